"""spark-tui's `bench` beside vLLM's own `vllm bench serve` on real vLLM (CPU build) in the lab:
TTFT p50, ITL p50 and output tokens/s of both, side by side. Prints figures, never fails.

    flock /tmp/lab.lock python benchmarks/bench_parity.py [--prompt-tokens 256]
        [--output-tokens 64] [--concurrency 4] [--requests 48] [--rounds 3]
        [--placement split|clients|none[,...]] [--dump DIR]

Needs Linux and root and the lab's real-vLLM image (built once, cached). Brings up a 2-node lab,
launches the lab recipe for one node on the head with `spark-tui launch --wait`, then alternates
the two tools (`vllm bench serve` in the head's container against 127.0.0.1, `spark-tui bench
--inventory` from this machine over SSH, in the head container's CPU cgroup like `vllm bench
serve`, with the head's sshd) and prints the medians over rounds, and each tool's mean TTFT
split into the engine's own and the rest (the path to the client), with the 1-minute load
average beside each run. `--placement split` (the default, as the lab test): the engine's
processes bound to core 0, both tools' load generators (and the head's sshd) to core 1;
`clients`: only the load generators bound; `none`: nothing beyond the engine's compute threads;
`split,none`: both methods in turn, round by round, on the same launch (parity_kit.PLACEMENTS).
How the two are matched (the same kind of prompts, built fresh each round to the same token
count as the server counts it, chat template included, so neither tool's prompts are in the
prefix cache; forced output length; the server's prompt tokens and prefix-cache hits printed
per round): see tests/lab/parity_kit.py. Budget (issue's target): each figure within 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "lab"))

from spark_tui.core.inventory import inventory_to_yaml  # noqa: E402
from spark_tui.sim.lab import Lab, unavailable_reason, vllm_image  # noqa: E402
from spark_tui.sim.lab.config import DEFAULT_CACHE_DIR  # noqa: E402

SERVED = "tiny-qwen2"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--placement",
        default="split",
        help="where the engine and the load generators run: split (default, as the lab test), "
        "clients, none, or several in turn round by round, comma-separated (split,none)",
    )
    parser.add_argument("--dump", type=Path, help="keep both tools' raw results here")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    import parity_kit as pk
    from labkit import claim, cli, release, unique_config

    placements = args.placement.split(",")
    if unknown := [p for p in placements if p not in pk.PLACEMENTS]:
        parser.error(f"unknown placement {unknown}: choose from {', '.join(pk.PLACEMENTS)}")
    vllm_image.ensure(DEFAULT_CACHE_DIR, say=print)

    workload = pk.Workload(args.prompt_tokens, args.output_tokens, args.concurrency, args.requests)
    cfg = unique_config(2, memory_gb=128, engine="vllm")
    claim(cfg)
    lab = Lab(cfg)
    with tempfile.TemporaryDirectory(prefix="spark-tui-parity-") as tmp:
        inventory = Path(tmp) / "lab.yaml"
        try:
            lab.up()
            inventory.write_text(inventory_to_yaml(lab.inventory_nodes()[:1]))
            recipe = vllm_image.write_recipe(Path(tmp), 1)
            inv = ["--inventory", str(inventory)]
            res = cli("launch", str(recipe), *inv, "--wait", timeout=1100)
            if res.returncode != 0:
                print(f"launch failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
                return 0
            got: dict[str, pk.Comparison] = {}
            print(f"load before: {os.getloadavg()}")
            for _ in range(args.rounds):
                for placement in placements:
                    one = pk.compare(
                        pk.head_container(lab.node(1).docker_socket),
                        f"http://{lab.node(1).address}:8000",
                        inv,
                        vllm_image.MODEL_REPO,
                        SERVED,
                        workload,
                        rounds=1,
                        sshd_pid=int(lab.node(1).sshd_pidfile.read_text()),
                        placement=placement,
                    )
                    if placement in got:
                        got[placement].extend(one)
                    else:
                        got[placement] = one
            print(f"load after: {os.getloadavg()}")
            for placement, comparison in got.items():
                print(f"\n== {placement}\n{comparison.table()}")
                if args.dump:
                    args.dump.mkdir(parents=True, exist_ok=True)
                    name = f"bench-parity-{placement}.json"
                    (args.dump / name).write_text(json.dumps(comparison.raw, default=str))
            cli("stop", *inv, timeout=180)
        finally:
            lab.down(quiet=True)
            release(cfg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
