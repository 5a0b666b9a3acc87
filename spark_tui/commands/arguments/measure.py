"""The arguments of the commands that measure: `bench`, `tune`, `history`."""

from __future__ import annotations

from typing import Any

from spark_tui.commands.arguments.common import (
    bench_settings,
    cluster,
    json_flag,
    on,
    sets,
    targets,
)


def bench(sub: Any) -> None:
    p = sub.add_parser("bench", help="concurrency sweep: TTFT, ITL, tokens/s")
    targets(p, base_url=True)
    cluster(p, "measure")
    p.add_argument("--model", help="model id (default: the first of /v1/models)")
    bench_settings(p)
    json_flag(p)


def tune(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="change one setting on the running cluster and compare with the baseline",
        epilog="exit status: 0 compared; 1 the relaunch or its smoke checks failed (the "
        "baseline's settings are relaunched, asked); 2 bad input; 3 a node could not be reached",
    )
    p.add_argument("recipe")
    targets(p)
    on(p)
    cluster(p, "tune")
    sets(p)
    p.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        help="measure each value of one setting in turn (instead of --set), against one baseline",
    )
    p.add_argument(
        "--target",
        dest="targets",
        action="append",
        default=[],
        metavar="FIG<=X@cN",
        help="with --sweep: a limit each value must keep, e.g. ttft_p95<=2s@c8, "
        "itl_p95<=80ms@c8, tok_s>=30@c8 (repeatable)",
    )
    obj = p.add_mutually_exclusive_group()
    obj.add_argument(
        "--maximize",
        metavar="FIG@cN",
        help="with --sweep: the best value has the most of this (default: tok_s at the "
        "targets' concurrency)",
    )
    obj.add_argument("--minimize", metavar="FIG@cN", help="with --sweep: ... the least of this")
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --sweep: continue the same sweep where it was interrupted (finished "
        "values are not measured again)",
    )
    p.add_argument(
        "--apply-best",
        action="store_true",
        help="with --sweep: leave the best value running and make it the baseline (default: "
        "the baseline's settings are left running)",
    )
    p.add_argument(
        "--on-interrupt",
        choices=["best", "baseline", "nothing"],
        help="what Ctrl+C during the relaunch leaves running: the baseline's settings "
        "(relaunched), nothing, or with --sweep the best value so far (default: asked on a "
        "terminal, else the baseline's settings)",
    )
    p.add_argument(
        "--keep-failed",
        action="store_true",
        help="when the relaunch with the change fails, keep its ranks for inspection "
        "(default: asked on a terminal, else the baseline's settings are relaunched)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--baseline",
        metavar="RUN",
        help="compare with this benchmark run (default: the picked baseline, else the latest "
        "benchmark of the running settings, else one measured first)",
    )
    g.add_argument(
        "--new-baseline",
        action="store_true",
        help="measure a new baseline before the change (its benchmark settings are the "
        "cockpit's and `bench`'s defaults)",
    )
    p.add_argument("--force", action="store_true", help="relaunch even when the fit check says no")
    # The benchmark a new baseline is measured with (a picked baseline brings its own: the
    # run after the change always repeats the baseline's settings).
    bench_settings(p)
    json_flag(p)


def history(sub: Any) -> None:
    p = sub.add_parser("history", help="list runs, compare two, export, pick the baseline")
    p.add_argument(
        "action",
        nargs="?",
        choices=["list", "show", "compare", "export", "baseline"],
        default="list",
        help="list (default), show RUN, compare A B, export A [B], baseline RUN (or baseline "
        "--reset RECIPE)",
    )
    p.add_argument("runs", nargs="*", help="run ids")
    json_flag(p)
    p.add_argument(
        "--demo",
        dest="demo_history",
        action="store_true",
        help="the demo's own history (its runs are on simulated Sparks, kept apart)",
    )
    p.add_argument("--out", metavar="DIR", help="where export writes the script and report")
    p.add_argument(
        "--reset",
        metavar="RECIPE",
        help="with baseline: forget the baseline picked for RECIPE (the next tuning step "
        "measures a new one)",
    )
