"""The headless CLI. Each subcommand lives in `spark_tui.commands.<name>` and is imported
only when used, so `plan` and `check` never import Textual, asyncssh or the Docker SDK."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from spark_tui.commands.shortcuts import (
    add_host_sources,
    add_shortcuts,
    flag_hint,
    resolve_host_sources,
)
from spark_tui.core.errors import NoClusterError, SparkError
from spark_tui.core.timeouts import READY_TIMEOUT_S, SMOKE_TIMEOUT_S, WATCH_INTERVAL_S


class Parser(argparse.ArgumentParser):
    """The CLI's parser; `commands` maps each subcommand to its own parser."""

    commands: dict[str, argparse.ArgumentParser]

    def __init__(self, *args: Any, **kw: Any) -> None:
        # No abbreviations: the top level would read `demo --host` as its own `--hosts`
        # (or refuse it as ambiguous), and a shortened flag is one a user never meant.
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)


def _targets(p: argparse.ArgumentParser, facts: bool = False, base_url: bool = False) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--inventory", metavar="FILE", help="inventory YAML: nodes: [{name, host, ...}]")
    g.add_argument("--hosts", metavar="H1,H2", help="comma-separated SSH hosts, head first")
    add_host_sources(g)
    if facts:
        g.add_argument("--facts", metavar="FILE", help="facts JSON printed by `probe --json`")
    if base_url:
        g.add_argument(
            "--base-url",
            metavar="URL",
            help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000",
        )
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust host keys not yet in known_hosts (changed keys are still refused)",
    )


def _sets(p: argparse.ArgumentParser, shortcuts: bool = True) -> None:
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one recipe default (repeatable)",
    )
    if shortcuts:
        add_shortcuts(p)


def _on(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--on",
        metavar="NODE,NODE",
        help="run on these of the nodes given, head first, by the names the inventory (and "
        "`probe`) gives them (default: every node given; a layout of fewer ranks takes the "
        "first ones)",
    )


def _cluster(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--cluster",
        metavar="ID",
        help=f"{what} this cluster of ours (`status` lists them; needed when several run)",
    )


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


# ops.bench.BenchConfig's defaults, which the cockpit benchmarks with too, so runs from
# either interface compare like with like (a test holds them equal; importing ops.bench here
# would load httpx for every command).
BENCH_DEFAULTS = {"concurrency": "1,4,8", "prompt_tokens": 256, "output_tokens": 128}


def _bench_settings(p: argparse.ArgumentParser) -> None:
    d = BENCH_DEFAULTS
    p.add_argument(
        "--concurrency",
        default=d["concurrency"],
        help=f"levels, comma-separated (default {d['concurrency']})",
    )
    p.add_argument(
        "--prompt-tokens",
        default=str(d["prompt_tokens"]),
        metavar="LENGTHS",
        help=f"prompt length: N, LOW-HIGH (uniform) or normal:MEAN,SD[,LOW-HIGH] "
        f"(default {d['prompt_tokens']})",
    )
    p.add_argument(
        "--output-tokens",
        default=str(d["output_tokens"]),
        metavar="LENGTHS",
        help=f"output length, written as the prompt's (default {d['output_tokens']})",
    )
    p.add_argument(
        "--workload-file",
        metavar="FILE",
        help='prompts from JSON lines: {"prompt_tokens": N, "output_tokens": M} or '
        '{"prompt": "text", "output_tokens": M} per line',
    )
    p.add_argument(
        "--shared-prefix",
        default="0",
        metavar="SHARE",
        help="share of every prompt all requests have in common, 0..0.95 or 50%% (default 0)",
    )
    p.add_argument(
        "--context-depth",
        default="0",
        metavar="DEPTHS",
        help="measure at these tokens already in context, e.g. 0,4k,16k (default 0)",
    )
    p.add_argument(
        "--goodput",
        action="append",
        default=[],
        metavar="TARGET",
        help="a per-request target for goodput, e.g. ttft<=2s itl<=80ms latency<=30s (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the lengths and words (default 0)")
    p.add_argument("--requests-per-level", type=int, default=0, help="default: 2 x concurrency")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run each level N times (their spread is the noise; a 95%% confidence interval)",
    )


def build_parser(command: str | None = None) -> Parser:
    """The whole CLI's parser, or with `command` only that subcommand's under the top level
    (`main` runs one: building the twenty others costs a headless `plan` more than its own
    arguments)."""
    parser = Parser(
        prog="spark-tui",
        description="Run one vLLM service across several DGX Sparks.",
    )
    parser.add_argument("--demo", action="store_true", help="open the cockpit on simulated Sparks")
    parser.add_argument(
        "--inventory", metavar="FILE", help="inventory YAML: nodes: [{name, host, ...}]"
    )
    parser.add_argument("--hosts", metavar="H1,H2", help="comma-separated SSH hosts, head first")
    add_host_sources(parser)
    parser.add_argument("--recipe", metavar="NAME", help="the recipe selected at start")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see the command palette)")
    parser.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust host keys not yet in known_hosts (changed keys are still refused)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add in SUBCOMMANDS.items():
        if command in (None, name):
            add(sub)
    parser.commands = dict(sub.choices)
    return parser


def _demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="open the cockpit on simulated Sparks")
    p.add_argument("--nodes", type=int, default=2, help="how many simulated Sparks (default 2)")
    p.add_argument(
        "--memory-gb",
        type=int,
        choices=[64, 128],
        default=128,
        help="memory of each simulated Spark (default 128)",
    )
    p.add_argument(
        "--recipe", metavar="NAME", dest="demo_recipe", help="the recipe selected at start"
    )
    p.add_argument("--theme", metavar="NAME", dest="demo_theme", help="colour theme")
    p.add_argument(
        "--ring",
        action="store_true",
        help="cable the simulated Sparks as a ring (3 or more; a subnet per cable), as "
        "switchless 3- and 4-Spark setups are",
    )
    web = p.add_argument_group("in a browser (--web)")
    web.add_argument(
        "--web",
        action="store_true",
        help="serve the demo cockpit to browsers: simulated Sparks only, one demo per tab, "
        "behind a token printed in the link",
    )
    web.add_argument("--host", help="address to listen on (default 127.0.0.1: this machine only)")
    web.add_argument("--port", type=int, help="TCP port (default 8000; 0: any free one)")
    web.add_argument("--token", help="the link's token (default: a new random one)")
    web.add_argument(
        "--max-visitors",
        type=int,
        help="demos at once, each with its own simulated Sparks (default 2)",
    )
    web.add_argument(
        "--expose-demo-to-network",
        action="store_true",
        help="allow a --host other machines reach: anyone with the link can then drive a demo "
        "cockpit (simulated Sparks only) on this machine's CPU",
    )


def _sim(sub: Any) -> None:
    p = sub.add_parser(
        "sim", help="run simulated Sparks in the foreground and write their inventory"
    )
    p.add_argument("--nodes", type=int, default=2, help="how many simulated Sparks (default 2)")
    p.add_argument("--memory-gb", type=int, default=128, help="memory of each (default 128)")
    p.add_argument(
        "--inventory", metavar="FILE", required=True, help="where to write their inventory"
    )
    p.add_argument("--page-cache-gb", type=float, default=0.0, help="memory held by the page cache")
    p.add_argument(
        "--worker-dies-after",
        type=float,
        metavar="SECONDS",
        help="a worker dies this long after ready",
    )
    p.add_argument("--pace", type=float, help="startup pace (1 = demo speed, 0.05 = test speed)")
    p.add_argument(
        "--ssh-port", type=int, default=2222, help="SSH port of every node (0: any free port)"
    )
    p.add_argument(
        "--base-address",
        help="loopback address of node 1, the others follow (default: the first free range "
        "from 127.0.0.11 on)",
    )
    p.add_argument(
        "--ring",
        action="store_true",
        help="cable the nodes as a ring (a subnet per cable; their addresses on the LAN port)",
    )
    p.add_argument("--state-dir", metavar="DIR", help="keep keys and homes here (default: temp)")


def _recipes(sub: Any) -> None:
    p = sub.add_parser(
        "recipes", help="list the recipes: user, registries (spark-tui's and sparkrun's), bundled"
    )
    _json(p)
    p.add_argument(
        "--update", action="store_true", help="pull the git registries named in the config first"
    )


def _probe(sub: Any) -> None:
    p = sub.add_parser("probe", help="probe nodes and print their facts")
    _targets(p)
    _json(p)


def _check(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="does the recipe fit these nodes?",
        epilog="exit status: 0 fits (also with warnings); 1 does not fit, or unknown because "
        "a needed fact is missing (the findings name it); 2 bad input; 3 a node could not "
        "be reached",
    )
    p.add_argument("recipe")
    _targets(p, facts=True)
    _on(p)
    _sets(p)
    _json(p)


def _plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="print the launch plan")
    p.add_argument("recipe")
    _targets(p, facts=True)
    _on(p)
    _sets(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--shell", action="store_true", help="the commands a person would type per node"
    )
    fmt.add_argument("--json", action="store_true", help="print JSON")


def _models(sub: Any) -> None:
    p = sub.add_parser("models", help="the recipe's model (and draft) on every node")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    p = msub.add_parser(
        "sync",
        help="download the model once, copy it node to node over the ConnectX link",
        epilog="exit status: 0 the model is complete on every node; 1 a download or copy "
        "failed (the message says how to go on: a rerun resumes); 2 bad input; 3 a node "
        "could not be reached",
    )
    p.add_argument("recipe")
    _targets(p)
    _on(p)
    _sets(p, shortcuts=False)
    _json(p)


def _images(sub: Any) -> None:
    p = sub.add_parser("images", help="the recipe's container image on every node")
    isub = p.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    p = isub.add_parser(
        "sync",
        help="the head's image on every node: pulled where a registry gives it, else copied "
        "node to node (docker save | docker load)",
        epilog="exit status: 0 every node has the image with the head's image ID; 1 a pull "
        "or copy failed (the message says how to go on); 2 bad input; 3 a node could not "
        "be reached",
    )
    p.add_argument("recipe")
    _targets(p)
    _on(p)
    _json(p)


def _launch(sub: Any) -> None:
    p = sub.add_parser("launch", help="start one container per rank")
    p.add_argument("recipe")
    _targets(p)
    _on(p)
    _sets(p)
    p.add_argument("--wait", action="store_true", help="wait until the API is ready")
    p.add_argument("--keep-failed", action="store_true", help="keep the other ranks when one fails")
    p.add_argument("--force", action="store_true", help="launch even when the fit check says no")
    p.add_argument(
        "--replace", action="store_true", help="remove stale spark-tui containers without asking"
    )
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=READY_TIMEOUT_S,
        metavar="SECONDS",
        help="with --wait: give up when the API is not ready after this long (default "
        f"{READY_TIMEOUT_S:.0f})",
    )


def _status(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="our clusters on the nodes, with the API and its tunnel",
        epilog="exit status: 0 every cluster runs or none is there; 1 a cluster failed (the "
        "rank, why, and the clean-up command are printed); 3 a node could not be reached",
    )
    _targets(p)
    _json(p)


def _watch(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a ready cluster: a tiny request, /metrics, node memory, every rank",
        epilog="exit status: 0 ended with Ctrl+C; 1 the cluster failed (the rank and its lines "
        "are printed, every rank is stopped and its last lines kept in the history; with "
        "--keep-failed they are left, with the command that removes them); 3 a node could "
        "not be reached at the start",
    )
    _targets(p)
    _cluster(p, "watch")
    p.add_argument(
        "--interval",
        type=float,
        default=WATCH_INTERVAL_S,
        metavar="S",
        help="seconds between samples",
    )
    p.add_argument(
        "--keep-failed",
        action="store_true",
        help="when a rank fails, keep every rank for inspection (stop them yourself)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per event and line")


def _logs(sub: Any) -> None:
    p = sub.add_parser("logs", help="print (or follow) the ranks' logs")
    _targets(p)
    _cluster(p, "the logs of")
    p.add_argument("--rank", type=int, help="only this rank's log")
    p.add_argument("--follow", action="store_true", help="keep reading until Ctrl+C")
    p.add_argument("--tail", type=int, default=200, help="start this many lines back (0: all)")


def _stop(sub: Any) -> None:
    p = sub.add_parser("stop", help="stop and remove every rank's container")
    _targets(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--cluster",
        metavar="ID",
        help="only this cluster of ours (default: the only one; `status` lists them)",
    )
    which.add_argument("--all", action="store_true", help="every cluster of ours on the nodes")


def _smoke(sub: Any) -> None:
    p = sub.add_parser("smoke", help="health, models, chat, tool-call and streaming checks")
    _targets(p, base_url=True)
    _cluster(p, "check")
    p.add_argument("--model", help="model id (default: the first of /v1/models)")
    p.add_argument(
        "--timeout",
        type=float,
        default=SMOKE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on one check after this long (default {SMOKE_TIMEOUT_S:.0f})",
    )
    _json(p)


def _bench(sub: Any) -> None:
    p = sub.add_parser("bench", help="concurrency sweep: TTFT, ITL, tokens/s")
    _targets(p, base_url=True)
    _cluster(p, "measure")
    p.add_argument("--model", help="model id (default: the first of /v1/models)")
    _bench_settings(p)
    _json(p)


def _tune(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="change one setting on the running cluster and compare with the baseline",
        epilog="exit status: 0 compared; 1 the relaunch or its smoke checks failed; 2 bad "
        "input; 3 a node could not be reached",
    )
    p.add_argument("recipe")
    _targets(p)
    _on(p)
    _cluster(p, "tune")
    _sets(p)
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
        help="with --sweep: what Ctrl+C leaves running (default: asked on a terminal, "
        "else the baseline's settings)",
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
    _bench_settings(p)
    _json(p)


def _history(sub: Any) -> None:
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
    _json(p)
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


def _lab(sub: Any) -> None:
    p = sub.add_parser("lab", help="real sshd + dockerd in network namespaces (Linux, root)")
    p.add_argument(
        "action",
        choices=["up", "down", "status", "build"],
        help="start, end or show the lab; build its image ahead of time",
    )
    p.add_argument("--nodes", type=int, default=2, help="how many lab nodes (up)")
    p.add_argument(
        "--engine",
        choices=["sim", "vllm"],
        default="sim",
        help="the image's vllm: the stand-in (sim) or real vLLM's CPU build (vllm)",
    )
    p.add_argument("--cache-dir", metavar="DIR", help="where built images are kept")
    p.add_argument(
        "--registry",
        action="store_true",
        help="a real registry server the nodes reach as ghcr.io and Docker Hub (up)",
    )
    p.add_argument(
        "--ring",
        action="store_true",
        help="also cable the nodes as a ring, a veth pair and a subnet per cable; the bridge "
        "is their LAN, enP7s7 (up)",
    )
    p.add_argument("--memory-gb", type=int, default=128, help="memory each node reports (up)")
    p.add_argument("--inventory", metavar="FILE", help="where `up` writes the inventory")
    p.add_argument("--state-dir", metavar="DIR", help="where the lab keeps its files")
    p.add_argument("--pace", type=float, help="engine startup pace baked into the lab image")
    p.add_argument(
        "--page-cache-gb", type=float, default=0.0, help="memory held by each node's page cache"
    )
    _json(p)
    p.add_argument(
        "--prefix", default="sparklab", help="names of the lab's bridge and namespaces (up)"
    )
    p.add_argument("--subnet", default="10.77.0.0/24", help="the lab's private subnet (up)")


# Each subcommand and what adds its parser to the subparsers (argparse's private
# _SubParsersAction, hence Any), in the order of `--help`.
SUBCOMMANDS: dict[str, Callable[[Any], None]] = {
    "demo": _demo,
    "sim": _sim,
    "recipes": _recipes,
    "probe": _probe,
    "check": _check,
    "plan": _plan,
    "models": _models,
    "images": _images,
    "launch": _launch,
    "status": _status,
    "watch": _watch,
    "logs": _logs,
    "stop": _stop,
    "smoke": _smoke,
    "bench": _bench,
    "tune": _tune,
    "history": _history,
    "lab": _lab,
}


def _refuse_unknown(parser: Parser, command: str | None, unknown: list[str]) -> int:
    """Usage, then what was not understood and spark-tui's word for it (exit 2, as argparse)."""
    own = parser.commands.get(command or "", parser)
    usage = own.format_usage()
    options = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", own.format_help())
    flags = [t for t in unknown if t.startswith("-")] or unknown
    sys.stderr.write(usage)
    for token in flags:
        where = f"`{command}`" if command else "spark-tui"
        print(f"spark-tui: {where} does not take {token}", file=sys.stderr)
        print(f"  remedy: {flag_hint(token, command, options)}", file=sys.stderr)
    return 2


def _node_flags(args: argparse.Namespace) -> str:
    """The user's own node arguments, as typed (`--inventory FILE` when none were)."""
    from spark_tui.commands.terminal import targets

    return targets(args).as_flags(live=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A first argument that names a subcommand is that subcommand for argparse too (the top
    # level takes no other positional).
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return _refuse_unknown(parser, args.command, unknown)
    name = args.command or "cockpit"
    try:
        resolve_host_sources(args)
        module = importlib.import_module(f"spark_tui.commands.{name}")
        return int(module.run(args))
    except SparkError as exc:
        if isinstance(exc, NoClusterError):
            # Raised where the nodes are a pool: the remedy names them as the user did.
            exc = NoClusterError(_node_flags(args))
        print(f"spark-tui: {exc.message}", file=sys.stderr)
        print(f"  remedy: {exc.remedy}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl+C, or SIGTERM/SIGHUP (commands.interrupts)
        print("spark-tui: interrupted", file=sys.stderr)
        return int(getattr(exc, "exit_code", 130))
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
