"""spark-tui's `bench` beside vLLM's own `vllm bench serve` on real vLLM (CPU build) in the lab:
TTFT p50, ITL p50 and output tokens/s of both, side by side. Prints figures, never fails.

    flock /tmp/lab.lock python benchmarks/bench_parity.py [--prompt-tokens 256]
        [--output-tokens 64] [--concurrency 4] [--requests 48] [--rounds 3]

Needs Linux and root and the lab's real-vLLM image (built once, cached). Brings up a 2-node lab,
launches the lab recipe for one node on the head with `spark-tui launch --wait`, then alternates
the two tools (`vllm bench serve` in the head's container against 127.0.0.1, `spark-tui bench
--inventory` from this machine over SSH, in the head container's CPU cgroup like `vllm bench
serve`, with the head's sshd) and prints the medians over rounds, and each tool's mean TTFT
split into the engine's own and the rest (the path to the client).
How the two are matched (the same kind of prompts, built fresh each round to the same token
count as the server counts it, chat template included, so neither tool's prompts are in the
prefix cache; forced output length; the server's prompt tokens and prefix-cache hits printed
per round): see tests/lab/parity_kit.py. Budget (issue's target): each figure within 10 %.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    vllm_image.ensure(DEFAULT_CACHE_DIR, say=print)

    import parity_kit as pk
    from labkit import claim, cli, release, unique_config

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
            got = pk.compare(
                pk.head_container(lab.node(1).docker_socket),
                f"http://{lab.node(1).address}:8000",
                inv,
                vllm_image.MODEL_REPO,
                SERVED,
                workload,
                rounds=args.rounds,
                sshd_pid=int(lab.node(1).sshd_pidfile.read_text()),
            )
            print(got.table())
            for i, (v, s) in enumerate(zip(got.vllm, got.spark, strict=True), 1):
                print(
                    f"  round {i}: vllm ttft {v['ttft_p50_s'] * 1000:.1f} ms itl "
                    f"{v['itl_p50_s'] * 1000:.2f} ms {v['output_tps']:.0f} tok/s | spark-tui "
                    f"ttft {s['ttft_p50_s'] * 1000:.1f} ms itl {s['itl_p50_s'] * 1000:.2f} ms "
                    f"{s['output_tps']:.0f} tok/s"
                )
            cli("stop", *inv, timeout=180)
        finally:
            lab.down(quiet=True)
            release(cfg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
