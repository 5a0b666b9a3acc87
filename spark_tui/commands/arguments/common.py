"""The arguments several commands share: the nodes, recipe changes, the cluster, JSON output,
the benchmark's settings."""

from __future__ import annotations

import argparse

from spark_tui.commands.shortcuts import add_host_sources, add_shortcuts


def targets(p: argparse.ArgumentParser, facts: bool = False, base_url: bool = False) -> None:
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


def sets(p: argparse.ArgumentParser, shortcuts: bool = True) -> None:
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


def on(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--on",
        metavar="NODE,NODE",
        help="run on these of the nodes given, head first, by the names the inventory (and "
        "`probe`) gives them (default: every node given; a layout of fewer ranks takes the "
        "first ones)",
    )


def cluster(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--cluster",
        metavar="ID",
        help=f"{what} this cluster of ours (`status` lists them; needed when several run)",
    )


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


# ops.bench.BenchConfig's defaults, which the cockpit benchmarks with too, so runs from
# either interface compare like with like (a test holds them equal; importing ops.bench here
# would load httpx for every command).
BENCH_DEFAULTS = {"concurrency": "1,4,8", "prompt_tokens": 256, "output_tokens": 128}


def bench_settings(p: argparse.ArgumentParser) -> None:
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
