"""Tuning one setting at a time: relaunch with one change on every rank, measure, compare.

The launch and stop steps are callables, so the same loop drives a real cluster (through
`spark_tui.ops.launch`) or engine subprocesses in a test. A step: stop the service, launch
it with the one changed setting, check every rank's command carries the change, record the
launch, run the smoke checks and the baseline's benchmark, record both, and compare with
the baseline benchmark.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.errors import InputError, OperationFailed
from spark_tui.ops.bench import BenchConfig, BenchProgress, BenchRun
from spark_tui.ops.compare import Comparison, compare_bench
from spark_tui.ops.history import History, Run, changed_settings
from spark_tui.ops.smoke import SmokeResult, all_passed, iter_smoke


@dataclass
class Launched:
    """A service that a launch callable brought up: its API and the plan it ran."""

    base_url: str
    plan: dict[str, Any]
    digests: dict[str, str] = field(default_factory=dict)
    revision: str | None = None
    shell: str | None = None


LaunchFn = Callable[[Mapping[str, Any]], Awaitable[Launched]]
StopFn = Callable[[], Awaitable[None]]


@dataclass
class Measured:
    """One measured launch: its records, the smoke results and the comparison if any."""

    launch: Run
    smoke: Run
    bench: Run | None
    smoke_results: list[SmokeResult]
    comparison: Comparison | None = None

    @property
    def smoke_ok(self) -> bool:
        return all_passed(self.smoke_results)


def _flag_for(setting: str) -> str:
    from spark_tui.core import settings_schema

    known = settings_schema.get(setting)
    return known.flag if known else "--" + setting.replace("_", "-")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ranks_carry(plan: Mapping[str, Any], setting: str, value: Any) -> list[int]:
    """The ranks whose serve argv does NOT carry `setting` = `value` (empty when all do).

    Booleans are checked as flag presence; other values as the flag's argument.
    """
    flag = _flag_for(setting)
    wrong = []
    for rank in plan.get("ranks") or []:
        argv = [str(a) for a in rank.get("argv") or []]
        if isinstance(value, bool):
            present = flag in argv
            ok = present == value or ("--no-" + flag[2:] in argv) == (not value)
        else:
            got = None
            for i, tok in enumerate(argv):
                if tok == flag and i + 1 < len(argv):
                    got = argv[i + 1]
                elif tok.startswith(flag + "="):
                    got = tok.split("=", 1)[1]
            ok = got == _value_text(value)
        if not ok:
            wrong.append(int(rank.get("rank", 0)))
    return wrong


async def measure(
    overrides: Mapping[str, Any],
    *,
    launch: LaunchFn,
    history: History,
    bench_config: BenchConfig,
    model: str | None = None,
    expect_reasoning: bool | None = None,
    tool_call_parser: str | None = None,
    changed: list[dict[str, Any]] | None = None,
    on_smoke: Callable[[SmokeResult], None] | None = None,
    on_progress: Callable[[BenchProgress], None] | None = None,
) -> Measured:
    """Launch with these overrides, record it, run the smoke checks and the benchmark."""
    up = await launch(dict(overrides))
    launch_run = history.record_launch(
        up.plan, overrides, up.digests, up.revision, shell=up.shell, changed=changed, ok=True
    )
    results = []
    async for result in iter_smoke(
        up.base_url,
        model or launch_run.model,
        expect_reasoning=expect_reasoning,
        tool_call_parser=tool_call_parser,
    ):
        results.append(result)
        if on_smoke:
            on_smoke(result)
    smoke_run = history.record_smoke(results, launch=launch_run, base_url=up.base_url)
    bench_run = None
    # A benchmark of a server that fails health or chat measures nothing useful.
    basic = {r.name: r.ok for r in results}
    if basic.get("health") and basic.get("chat"):
        served = next((r.data.get("model") for r in results if r.name == "models"), None)
        bench = await BenchRun(
            up.base_url, served or model, bench_config, progress=on_progress
        ).run()
        bench_run = history.record_bench(bench, launch=launch_run, base_url=up.base_url)
    return Measured(launch_run, smoke_run, bench_run, results)


async def relaunch_with_change(
    setting: str,
    value: Any,
    *,
    base_overrides: Mapping[str, Any],
    launch: LaunchFn,
    stop: StopFn,
    history: History,
    baseline: Run | None = None,
    recipe: str | None = None,
    cluster_key: str | None = None,
    model: str | None = None,
    expect_reasoning: bool | None = None,
    tool_call_parser: str | None = None,
    on_smoke: Callable[[SmokeResult], None] | None = None,
    on_progress: Callable[[BenchProgress], None] | None = None,
) -> Measured:
    """Stop, relaunch with ONE changed setting on every rank, measure and compare.

    The baseline is `baseline` or the first benchmark of the recipe on the cluster; the
    benchmark rerun uses the baseline's exact config.
    """
    if baseline is None:
        baseline = history.baseline_for(recipe, cluster_key, "bench")
    if baseline is None or baseline.kind != "bench":
        raise InputError(
            "no baseline benchmark for this recipe on this cluster",
            "launch, smoke and benchmark once without changes first: that run is the baseline",
        )
    config = BenchConfig.from_dict((baseline.results.get("bench") or {}).get("config") or {})
    before = baseline.settings.get(setting, base_overrides.get(setting))
    overrides = {**dict(base_overrides), setting: value}
    await stop()
    change = [{"name": setting, "before": before, "after": value}]

    async def launch_checked(ov: Mapping[str, Any]) -> Launched:
        up = await launch(ov)
        wrong = ranks_carry(up.plan, setting, value)
        if wrong:
            raise OperationFailed(
                f"rank(s) {wrong} do not carry {setting}={value}",
                "the same change must reach every rank: check the plan with `spark-tui plan`",
            )
        return up

    step = await measure(
        overrides,
        launch=launch_checked,
        history=history,
        bench_config=config,
        model=model,
        expect_reasoning=expect_reasoning,
        tool_call_parser=tool_call_parser,
        changed=change,
        on_smoke=on_smoke,
        on_progress=on_progress,
    )
    found = changed_settings(step.launch, baseline)
    extra = [c for c in found if c["name"] != setting]
    if extra:
        names = ", ".join(c["name"] for c in extra)
        step.launch.notes.append(f"more than one setting differs from the baseline: {names}")
        history.save(step.launch)
    if step.bench is not None:
        repeats = [r for r in history.repeats_of(baseline) if r.id != baseline.id]
        step.comparison = compare_bench(baseline, step.bench, repeats)
    return step
