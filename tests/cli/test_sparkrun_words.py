"""What a sparkrun user types, given to spark-tui: its setting shortcuts, its host lists (a
hosts file, a host group saved with sparkrun) and its other words, which get a hint to
spark-tui's own."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.conftest import Cli


def plan_json(cli: Cli, facts: Path, *args: str) -> dict[str, object]:
    res = cli.run("plan", "glm-5.3-flash", "--facts", str(facts), "--json", *args)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def test_sparkruns_setting_shortcuts_are_sets(cli: Cli, facts_128: Path) -> None:
    short = plan_json(
        cli, facts_128, "--tp", "1", "--gpu-mem", "0.8", "--max-model-len", "8192",
        "-o", "max_num_seqs=8", "--option", "port=8001",
    )  # fmt: skip
    long = plan_json(
        cli, facts_128, "--set", "tensor_parallel=1", "--set", "gpu_memory_utilization=0.8",
        "--set", "max_model_len=8192", "--set", "max_num_seqs=8", "--set", "port=8001",
    )  # fmt: skip
    assert short["ranks"] == long["ranks"]
    assert short["settings"] == long["settings"]
    # Later wins, as with --set: the shortcut and --set share one list in command-line order.
    mixed = plan_json(cli, facts_128, "--set", "max_num_seqs=2", "-o", "max_num_seqs=6")
    assert mixed["settings"]["max_num_seqs"] == 6  # type: ignore[index]


def probe_errors(cli: Cli, *args: str) -> list[str]:
    res = cli.run("probe", *args, "--json", timeout=60)
    assert res.returncode == 3, res.stderr  # nothing listens there: unreachable, as named
    return [e for n in json.loads(res.stdout)["nodes"] for e in n["errors"]]


def test_a_hosts_file_and_a_sparkrun_host_group_name_the_nodes(cli: Cli, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# head first\n127.0.0.1:9  # spark-a\n\n127.0.0.2:9\n")
    errors = probe_errors(cli, "--hosts-file", str(hosts))
    assert [e.split(" ")[1] for e in errors] == ["(root@127.0.0.1:9):", "(root@127.0.0.2:9):"]
    # sparkrun keeps its groups under the user's config: NAME.yaml with hosts and user.
    groups = Path(cli.env["HOME"]) / ".config" / "sparkrun" / "clusters"
    groups.mkdir(parents=True)
    (groups / "lab.yaml").write_text(
        yaml.safe_dump({"name": "lab", "hosts": ["127.0.0.1:9", "127.0.0.2:9"], "user": "me"})
    )
    errors = probe_errors(cli, "--sparkrun-cluster", "lab")
    assert [e.split(" ")[1] for e in errors] == ["(me@127.0.0.1:9):", "(me@127.0.0.2:9):"]
    res = cli.run("probe", "--sparkrun-cluster", "nope")
    assert res.returncode == 2 and "use one of: lab" in res.stderr


def test_an_unknown_flag_gets_spark_tuis_word(cli: Cli, facts_128: Path) -> None:
    cases = (
        (["check", "glm-5.3-flash", "--facts", str(facts_128), "--cluster", "lab"],
         "--sparkrun-cluster NAME"),
        (["plan", "glm-5.3-flash", "--facts", str(facts_128), "--tensor-parallel-size", "2"],
         "--set tensor_parallel=VALUE"),
        (["plan", "glm-5.3-flash", "--facts", str(facts_128), "--dry-run"], "spark-tui plan"),
        (["status", "--tp", "2"], "taken by check, plan, launch, tune"),
        (["plan", "glm-5.3-flash", "--facts", str(facts_128), "--jsn"], "did you mean --json"),
    )  # fmt: skip
    for args, hint in cases:
        res = cli.run(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert "usage: spark-tui" in res.stderr and "does not take" in res.stderr
        assert hint in res.stderr, (args, res.stderr)


def test_the_cockpit_takes_the_same_host_lists(tmp_path: Path) -> None:
    from spark_tui.cli import build_parser
    from spark_tui.commands.shortcuts import resolve_host_sources

    hosts = tmp_path / "hosts"
    hosts.write_text("spark-a\nspark-b  # worker\n")
    args, unknown = build_parser().parse_known_args(["--hosts-file", str(hosts)])
    resolve_host_sources(args)
    assert (args.command, args.hosts, unknown) == (None, "spark-a,spark-b", [])
