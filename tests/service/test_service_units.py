"""The service's pure parts: the one recipe pipeline, the memory our own cluster holds,
the tunnel command, questions, and the CLI's declared flags."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tui import cli
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.service import events as ev
from spark_tui.service.endpoint import tunnel_command
from spark_tui.service.evaluate import evaluate, held_by_ours
from spark_tui.service.pump import pump

GIB = 1024**3
ROOT = Path(__file__).resolve().parents[2]


def busy_nodes(free_gib: int) -> list:
    """Two simulated 128 GB Sparks with glm-5.3-flash cached, this much memory free."""
    from spark_tui.core.facts import parse_facts

    text = (ROOT / "tests" / "fixtures" / "simulated_facts_glm53_2x128.json").read_text()
    return [
        dataclasses.replace(n, memory_available_bytes=free_gib * GIB) for n in parse_facts(text)
    ]


def test_memory_our_running_cluster_holds_counts_as_free() -> None:
    recipe = find_recipe("glm-5.3-flash")
    nodes = busy_nodes(11)  # our engines hold most of the memory
    assert evaluate(recipe, {}, nodes).verdict == "does_not_fit"
    held = {n.name: held_by_ours(n, 0.87) for n in nodes}
    assert all(0 < v <= 0.87 * 128 * GIB for v in held.values())
    result = evaluate(recipe, {}, nodes, held=held)
    assert result.verdict in ("fits", "fits_with_warnings"), result.report
    assert result.credited == held
    # never more than what is in use on the node
    node = busy_nodes(0)[0]
    used = 10 * GIB
    free = node.memory_total_bytes - used
    assert held_by_ours(dataclasses.replace(node, memory_available_bytes=free), 0.9) == used


def test_a_removed_setting_is_shown_as_typed_not_as_python_none() -> None:
    recipe = find_recipe("glm-5.3-flash")
    result = evaluate(recipe, {"tool_call_parser": "none"}, [])
    assert result.problem is None, result.problem
    assert result.settings_shown["tool_call_parser"] == "none"
    assert "None" not in json.dumps({k: str(v) for k, v in result.settings_shown.items()})


def test_an_invalid_override_is_the_evaluation_problem_not_an_exception() -> None:
    result = evaluate(find_recipe("glm-5.3-flash"), ["max_num_seqs=lots"], busy_nodes(100))
    assert result.problem is not None and result.problem.remedy and result.plan is None


def test_the_tunnel_command_carries_the_inventory_port_user_key_and_known_hosts() -> None:
    node = InventoryNode(
        "spark-a",
        "10.0.0.1",
        port=2222,
        user="nv idia",
        identity_file="/keys/id ed25519",
        known_hosts="/keys/known_hosts",
    )
    cmd = tunnel_command(node, 8000)
    assert cmd.startswith("ssh -N -L 8000:127.0.0.1:8000 -p 2222 -i '/keys/id ed25519' ")
    assert "-o UserKnownHostsFile=/keys/known_hosts" in cmd and cmd.endswith("'nv idia@10.0.0.1'")
    assert tunnel_command(InventoryNode("b", "spark-b"), 9000) == (
        "ssh -N -L 9000:127.0.0.1:9000 spark-b"
    )


async def test_questions_take_the_answer_or_their_default_and_closing_cancels() -> None:
    answers: list[bool] = []
    ended = asyncio.Event()

    async def work(emit, ask) -> None:  # type: ignore[no-untyped-def]
        emit(ev.Notice("info", "start"))
        answers.append(await ask(ev.Question("insist", "t", "launch anyway?", default=False)))
        answers.append(await ask(ev.Question("insist", "t", "unanswered", default=False)))
        answers.append(await ask(ev.Question("insist", "t", "unanswered", default=True)))
        emit(ev.Notice("info", "waiting"))
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    events = pump(work)
    async for event in events:
        if isinstance(event, ev.Question) and event.text == "launch anyway?":
            event.reply(True)
        elif isinstance(event, ev.Notice) and event.message == "waiting":
            break
    await events.aclose()  # type: ignore[attr-defined]
    await asyncio.wait_for(ended.wait(), 5)  # closing the stream cancelled the work
    assert answers == [True, False, True]


def test_every_flag_is_declared_with_help() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["stop", "--hosts", "a,b", "--cluster", "c0ffee"])
    assert args.cluster == "c0ffee"
    args = parser.parse_args(["smoke", "--base-url", "http://x", "--timeout", "5"])
    assert args.timeout == 5.0
    missing = []
    subs = next(a for a in parser._actions if a.dest == "command")
    for name, sub in [("", parser), *subs.choices.items()]:  # type: ignore[union-attr]
        for action in sub._actions:
            if action.dest in ("help", "command") or action.option_strings == []:
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings}")
    assert missing == []


def test_argparse_stops_at_the_commands() -> None:
    """No layer below spark_tui/commands/ takes or imports argparse."""
    found = []
    for path in (ROOT / "spark_tui").rglob("*.py"):
        rel = path.relative_to(ROOT / "spark_tui")
        if rel.parts[0] in ("commands", "sim") or rel.name == "cli.py":
            continue  # the CLI, and the simulated vLLM's own flag parser
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*(import argparse|from argparse)|argparse\.Namespace", text, re.M):
            found.append(str(rel))
    assert found == []


def test_check_says_one_rank_not_one_ranks(tmp_path: Path) -> None:
    from spark_tui.core.facts import facts_to_json

    facts = tmp_path / "one.json"
    node = dataclasses.replace(busy_nodes(120)[0], memory_total_bytes=128 * GIB)
    facts.write_text(facts_to_json([node]))
    res = subprocess.run(
        [sys.executable, "-m", "spark_tui", "check", "gpt-oss-120b", "--facts", str(facts)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "= 1 rank on 1 node" in res.stdout, res.stdout + res.stderr
    assert "1 ranks" not in res.stdout and "node(s)" not in res.stdout


@pytest.mark.parametrize(
    "name", ["pump", "session", "evaluate", "smoke", "bench", "tune", "logs", "ssh_nodes"]
)
def test_the_service_does_not_import_textual(name: str) -> None:
    code = (
        f"import sys, spark_tui.service.{name}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
