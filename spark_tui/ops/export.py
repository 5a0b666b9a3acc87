"""Export runs: a repeatable launch script and a Markdown report, both free of secrets."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spark_tui.core.errors import InputError
from spark_tui.core.link import fmt_share
from spark_tui.core.wording import change_text, depth_label, setting_text
from spark_tui.core.workload import workload_of
from spark_tui.ops.compare import (
    FIGURE_LABELS,
    TABLE_FIGURES,
    Comparison,
    compare_runs,
    fmt_figure,
)
from spark_tui.ops.history import History, Run, mask_secrets, mask_text


def _shell_value(value: str) -> str:
    # A `${NAME}` reference must stay expandable by the shell; everything else is quoted.
    if value.startswith("${") and value.endswith("}") and "'" not in value and "`" not in value:
        return f'"{value}"'
    return shlex.quote(value)


def _docker_options(docker: Any) -> list[str]:
    if isinstance(docker, list):
        return [str(x) for x in docker]
    out: list[str] = []
    if not isinstance(docker, dict):
        return out
    for key, value in docker.items():
        # Docker's own spelling: the plan's `ulimits` are `--ulimit NAME=V` options.
        flag = "--ulimit" if key == "ulimits" else "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value in (None, False):
            continue
        elif isinstance(value, list):
            for item in value:
                out += [flag, shlex.quote(str(item))]
        elif isinstance(value, dict):
            for k, v in value.items():
                out += [flag, shlex.quote(f"{k}={v}")]
        else:
            out += [flag, shlex.quote(str(value))]
    return out


def _mounts(mounts: Any) -> list[str]:
    out: list[str] = []
    if isinstance(mounts, dict):
        mounts = [{"source": k, "target": v} for k, v in mounts.items()]
    for m in mounts or []:
        if isinstance(m, str):
            out += ["-v", _shell_value(m) if m.startswith("${") else shlex.quote(m)]
        elif isinstance(m, dict):
            src = m.get("source") or m.get("host") or m.get("src")
            dst = m.get("target") or m.get("container") or m.get("dst")
            if src and dst:
                out += ["-v", f'"{src}:{dst}"' if "$" in str(src) else shlex.quote(f"{src}:{dst}")]
    return out


def _rank_command(cmd: dict[str, Any]) -> str:
    parts = ["docker", "run", "-d"]
    if cmd.get("container_name"):
        parts += ["--name", shlex.quote(str(cmd["container_name"]))]
    for key, value in (cmd.get("labels") or {}).items():
        parts += ["--label", shlex.quote(f"{key}={value}")]
    parts += _docker_options(cmd.get("docker"))
    for key, value in (cmd.get("env") or {}).items():
        parts += ["-e", f"{key}={_shell_value(str(value))}"]
    parts += _mounts(cmd.get("mounts"))
    parts.append(shlex.quote(str(cmd.get("image") or "IMAGE")))
    parts += [shlex.quote(str(a)) for a in cmd.get("argv") or []]
    return " \\\n  ".join(parts)


def launch_script(run: Run) -> str:
    """A bash script that starts the recorded launch again, rank by rank on each node.

    The plan's own shell form (`core.shell.plan_to_shell`, kept in the record) is used when
    the record has it; otherwise the script is rebuilt from the recorded per-rank commands.
    """
    header = [
        f"# spark-tui run {run.id} ({run.time}): recipe {run.recipe}, cluster {run.cluster_key}",
        f"# settings hash {run.settings_hash}; image {run.image}",
    ]
    for node, digest in sorted(run.image_digests.items()):
        header.append(f"#   image digest on {node}: {digest}")
    header.append(f"# model {run.model} revision {run.model_revision or 'unknown'}")
    if run.overrides:
        shown = " ".join(f"--set {setting_text(k, v)}" for k, v in run.overrides.items())
        header.append(f"# overrides: {shown}")
    for change in run.changed:
        header.append(
            "# changed from the recipe's defaults: "
            + change_text(change["name"], change["before"], change["after"])
        )
    for node, values in run.network.items():
        shown = " ".join(f"{k}={v}" for k, v in values.items())
        header.append(f"#   network on {node}: {shown}")
    if run.shell:
        body = run.shell.rstrip().splitlines()
        if body and body[0].startswith("#!"):
            lines = [body[0], *header, *body[1:]]
        else:
            lines = ["#!/usr/bin/env bash", *header, *body]
        return mask_text("\n".join(lines) + "\n")
    lines = ["#!/usr/bin/env bash", *header]
    lines.append("# Secrets travel as ${NAME}: export them (e.g. HF_TOKEN) in the node's shell.")
    lines.append("set -euo pipefail")
    lines += ["", 'rank="${1:?usage: $0 RANK (0 on the head first, then each worker)}"']
    lines.append('case "$rank" in')
    for cmd in run.commands:
        lines.append(f"  {cmd.get('rank')})  # {cmd.get('node')} ({cmd.get('role', '')})")
        body_text = _rank_command(cmd).replace("\n", "\n    ")
        lines.append(f"    {body_text}")
        lines.append("    ;;")
    lines.append('  *) echo "unknown rank: $rank" >&2; exit 2 ;;')
    lines.append("esac")
    return mask_text("\n".join(lines) + "\n")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return out


def _run_section(run: Run) -> list[str]:
    out = [f"## {run.kind} {run.id}", ""]
    facts = [
        ("time", run.time),
        ("recipe", run.recipe),
        ("cluster", run.cluster_key),
        ("model", f"{run.model} (revision {run.model_revision or 'unknown'})"),
        ("image", run.image),
        ("settings hash", run.settings_hash),
        ("launch", run.launch_id),
        ("overrides", ", ".join(setting_text(k, v) for k, v in run.overrides.items()) or "none"),
    ]
    if run.changed:
        facts.append(
            (
                "changed from the recipe's defaults",
                ", ".join(change_text(c["name"], c["before"], c["after"]) for c in run.changed),
            )
        )
    for node, digest in sorted(run.image_digests.items()):
        facts.append((f"digest on {node}", digest))
    if run.simulated:
        facts.append(("simulated", "yes: measured on simulated Sparks (the demo)"))
    facts.append(("failed", run.failure))
    facts += [(f"rank {k.rank} log ({k.node})", k.path) for k in run.rank_logs]
    out += [f"- {k}: {v}" for k, v in facts if v not in (None, "")]
    out.append("")
    if run.kind == "launch" and run.network:
        keys = sorted({k for v in run.network.values() for k in v})
        out += _table(
            ["node", *keys], [[n, *(v.get(k, "") for k in keys)] for n, v in run.network.items()]
        )
        out.append("")
    if run.kind == "sweep" and run.results.get("sweep"):
        from spark_tui.core.sweep_result import SweepResult

        out += ["```", SweepResult.from_dict(run.results["sweep"]).text(), "```", ""]
    if run.kind == "smoke":
        rows = [
            [
                c.get("name"),
                "ok" if c.get("ok") else "FAIL",
                f"{c.get('latency_s', 0) * 1000:.0f} ms",
                c.get("detail", ""),
                c.get("remedy") or "",
            ]
            for c in run.results.get("checks") or []
        ]
        out += _table(["check", "result", "latency", "detail", "remedy"], rows)
        out.append("")
    if run.kind == "bench":
        bench = run.results.get("bench") or {}
        cfg = bench.get("config") or {}
        out.append(
            f"{workload_of(cfg).summary()}, concurrency {cfg.get('concurrency')}, "
            f"forced length {bench.get('forced_length')}"
        )
        out.append("")
        rows = []
        for lv in bench.get("levels") or []:
            f = lv.get("figures") or {}
            m = lv.get("metrics") or {}
            depth = int(lv.get("context_depth") or 0)
            rows.append(
                [
                    f"{lv.get('concurrency')}" + (f"@{depth_label(depth)}" if depth else ""),
                    lv.get("requests"),
                    lv.get("errors"),
                    *(fmt_figure(k, f.get(k)) for k in TABLE_FIGURES),
                    _metric(m, "kv_cache_usage_perc", pct=True),
                    _metric(m, "num_requests_running"),
                    _metric(m, "num_requests_waiting"),
                ]
            )
        out += _table(
            [
                "conc",
                "requests",
                "errors",
                "TTFT p50",
                "TTFT p95",
                "ITL mean",
                "ITL p95",
                "tok/s per req",
                "total tok/s",
                "req/s",
                "KV max",
                "running max",
                "waiting max",
            ],
            rows,
        )
        out.append("")
        out += _link_section(bench)
    return out


def _gbs(value: Any) -> str:
    return "–" if value is None else f"{float(value):.3g}"


def _link_section(bench: dict[str, Any]) -> list[str]:
    """The ranks' interfaces and every node's memory while the benchmark ran."""
    link, memory = bench.get("link") or [], bench.get("memory") or []
    out: list[str] = []
    if link:
        rows = [
            [
                f.get("node"),
                f.get("interface"),
                *(
                    _gbs(f.get(k))
                    for k in ("rx_peak_gbs", "rx_mean_gbs", "tx_peak_gbs", "tx_mean_gbs")
                ),
                fmt_share(f.get("peak_share")),
                _gbs(f.get("speed_gbs")),
                f.get("samples"),
            ]
            for f in link
        ]
        header = ["node", "interface", "rx peak GB/s", "rx mean GB/s", "tx peak GB/s"]
        header += ["tx mean GB/s", "peak share", "link GB/s", "samples"]
        out += _table(header, rows)
        out.append("")
    if memory:
        gib = 1024**3
        rows = [
            [
                m.get("node"),
                "?" if m.get("min_available") is None else f"{m['min_available'] / gib:.1f}",
                "?" if m.get("total") is None else f"{m['total'] / gib:.1f}",
            ]
            for m in memory
        ]
        out += _table(["node", "least free GiB", "total GiB"], rows)
        out.append("")
    return out


def _metric(m: dict[str, Any], key: str, pct: bool = False) -> str:
    v = (m.get(key) or {}).get("max")
    if v is None:
        return "-"
    return f"{v * 100:.0f} %" if pct else f"{v:.0f}"


def comparison_section(cmp: Comparison) -> list[str]:
    """The comparison as Markdown: the changed setting, then every figure."""
    out = [f"## Comparison: {cmp.run_id} against baseline {cmp.baseline_id}", ""]
    out.append(f"- changed: {cmp.changed_text()}")
    out.append(f"- noise rule: {cmp.rule}")
    out += [f"- note: {n}" for n in cmp.notes]
    out.append("")
    rows = []
    for f in cmp.figures:
        rows.append(
            [
                f.level_label.removeprefix("c"),
                FIGURE_LABELS.get(f.figure, (f.figure, ""))[0],
                fmt_figure(f.figure, f.baseline),
                fmt_figure(f.figure, f.value),
                "-" if f.delta is None else fmt_figure(f.figure, f.delta),
                "-" if f.delta_pct is None else f"{f.delta_pct:+.1f} %",
                "-" if f.noise_pct is None else f"{f.noise_pct:.1f} %",
                f.verdict,
            ]
        )
    out += _table(
        ["conc", "figure", "baseline", "run", "delta", "delta %", "noise", "verdict"], rows
    )
    out.append("")
    return out


def markdown_report(runs: Sequence[Run], comparison: Comparison | None = None) -> str:
    """A Markdown report of the runs and, when given, their comparison."""
    out = ["# spark-tui runs", ""]
    out += _table(
        ["run", "kind", "time", "recipe", "result"],
        [[r.id, r.kind, r.time, r.recipe or "-", r.summary()] for r in runs],
    )
    out.append("")
    if comparison is not None:
        out += comparison_section(comparison)
    for run in runs:
        out += _run_section(run)
    return mask_text("\n".join(out))


def _related(history: History, run: Run) -> list[Run]:
    """A launch with its measurements, or a measurement with its launch and smoke runs."""
    if run.kind == "launch":
        return [run] + [r for r in history.list_runs() if r.launch_id == run.id]
    if run.kind == "sweep":
        # Each value's launch (its script) and benchmark, beside the table.
        rows = (run.results.get("sweep") or {}).get("rows") or []
        ids = [i for r in rows for i in (r.get("launch_id"), r.get("bench_id")) if i]
        found = []
        for rid in dict.fromkeys(ids):
            with contextlib.suppress(InputError):
                found.append(history.get_run(rid))
        return [run, *found]
    if not run.launch_id:
        return [run]
    try:
        launch = history.get_run(run.launch_id)
    except InputError:  # the launch record was deleted: report what is left
        return [run]
    smokes = [r for r in history.list_runs("smoke") if r.launch_id == launch.id]
    return [launch, *smokes, run]


def _bench_of(history: History, runs: list[Run]) -> Run | None:
    return next((r for r in reversed(runs) if r.kind == "bench"), None)


def export_runs(history: History, run_ids: Sequence[str], out_dir: Path | str) -> list[Path]:
    """Write a launch script per launch involved and `report.md`; returns the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = [_related(history, history.get_run(rid)) for rid in run_ids]
    written: list[Path] = []
    seen: set[str] = set()
    all_runs: list[Run] = []
    for group in groups:
        for run in group:
            if run.id in seen:
                continue
            seen.add(run.id)
            all_runs.append(run)
            if run.kind == "launch":
                path = out / f"launch-{run.id}.sh"
                path.write_text(launch_script(run), encoding="utf-8")
                path.chmod(0o755)
                written.append(path)
    comparison = None
    if len(groups) == 2:
        a, b = _bench_of(history, groups[0]), _bench_of(history, groups[1])
        if a is not None and b is not None:
            comparison = compare_runs(history, a, b)
    report = out / "report.md"
    report.write_text(markdown_report(all_runs, comparison), encoding="utf-8")
    written.append(report)
    # Belt and braces: nothing written may carry a secret value of this environment.
    for path in written:
        text = path.read_text(encoding="utf-8")
        masked = mask_text(text)
        if masked != text:
            path.write_text(masked, encoding="utf-8")
    return written


def masked_dict(run: Run) -> dict[str, Any]:
    """A run as a JSON-able dict, masked again (for `history --json`)."""
    return dict(mask_secrets(run.to_dict()))
