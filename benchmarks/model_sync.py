"""Model copy throughput between two lab nodes against a raw stream over the same link: prints.

    python benchmarks/model_sync.py [--gib 1] [--runs 3]

Needs Linux and root (it brings up its own namespace lab and takes it down again). The head
gets a model of one `--gib` GiB shard (sparse: reading it costs no disk); each run removes
the worker's copy and times `ModelSync` from the start of the copy to the worker's SyncDone
(node to node: the head's own ssh to the worker's link address). The raw stream is the same
bytes through the same ssh from the head to the worker, into a file on the worker (and into
/dev/null, for the link alone). Budget: copy >= 80 % of the raw stream into a file.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_tui.sim.lab import Lab, LabConfig, unavailable_reason  # noqa: E402

BUDGET = 0.80
REPO = "bench-org/sync-model"
REV = "fedcba9876543210fedcba9876543210fedcba98"


def put_model(home: Path, size: int) -> None:
    repo = home / ".cache" / "huggingface" / "hub" / ("models--" + REPO.replace("/", "--"))
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    with (repo / "blobs" / ("b" * 64)).open("wb") as f:
        f.truncate(size)
    (snap / "model.safetensors").symlink_to("../../blobs/" + "b" * 64)


def node_keys(lab: Lab) -> None:
    from spark_tui.sim.lab.sshd import generate_key

    ssh_dir = lab.node(1).home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    generate_key(ssh_dir / "id_ed25519", "bench-head")
    auth = lab.cfg.authorized_keys
    auth.write_text(auth.read_text() + (ssh_dir / "id_ed25519.pub").read_text())
    (ssh_dir / "known_hosts").write_text(lab.cfg.known_hosts.read_text())


class CopyTimer:
    """Times the node-to-node copy from the sync's events, as each happens."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.seconds = float("nan")

    def __call__(self, ev: object) -> None:
        from spark_tui.ops.events import SyncDone, SyncStep

        if isinstance(ev, SyncStep) and ev.action == "copy":
            if "over ConnectX link" not in ev.message:
                raise SystemExit(f"not node to node: {ev.message}")
            self.started = time.perf_counter()
        elif isinstance(ev, SyncDone) and self.started is not None:
            self.seconds = time.perf_counter() - self.started


async def _runs(lab: Lab, size: int, runs: int) -> list[tuple[float, float, float]]:
    from spark_tui.core.model_presence import ModelNeed
    from spark_tui.ops.model_sync import ModelSync
    from spark_tui.remote.probe import probe_pool
    from spark_tui.remote.ssh import ConnectionPool

    worker_repo = lab.node(2).home / ".cache" / "huggingface" / "hub"
    peer = f"root@{lab.node(2).address}"
    out: list[tuple[float, float, float]] = []
    async with ConnectionPool(lab.inventory_nodes(), ssh_config=()) as pool:
        facts = await probe_pool(pool, docker=False)
        head = pool[lab.inventory_nodes()[0].name]
        for _ in range(runs):
            shutil.rmtree(worker_repo, ignore_errors=True)
            timer = CopyTimer()
            run = ModelSync(pool, facts, "bench", env={})
            if not await run.run([ModelNeed("model", REPO, None)], timer):
                raise SystemExit("the sync failed")
            copy_s = timer.seconds
            raw = {}
            for sink in ("/var/tmp/spark-tui-bench-raw", "/dev/null"):
                remote = f"cat > {sink}"
                cmd = (
                    f"head -c {size} /dev/zero | ssh -o BatchMode=yes {shlex.quote(peer)} "
                    f"{shlex.quote(remote)}"
                )
                t0 = time.perf_counter()
                res = await head.run(cmd, timeout=600)
                raw[sink] = time.perf_counter() - t0
                if not res.ok:
                    raise SystemExit(f"raw stream failed: {res.stderr}")
            await head.run(
                "ssh -o BatchMode=yes " + shlex.quote(peer) + " rm -f /var/tmp/spark-tui-bench-raw"
            )
            out.append((copy_s, raw["/var/tmp/spark-tui-bench-raw"], raw["/dev/null"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"model sync benchmark skipped: {reason}")
        return 0
    size = int(args.gib * 1024**3)
    cfg = LabConfig(
        nodes=2,
        prefix="syncbench",
        subnet="10.77.98.0/24",
        state_dir=Path("/var/tmp/spark-tui-syncbench"),
    )
    lab = Lab(cfg)
    lab.up()
    try:
        put_model(lab.node(1).home, size)
        node_keys(lab)
        results = asyncio.run(_runs(lab, size, args.runs))
    finally:
        lab.down(quiet=True)
    mb = size / 1e6
    print(f"{mb:.0f} MB, node to node over the lab link (ssh), {args.runs} run(s)")
    print(
        f"{'run':>4} {'copy MB/s':>10} {'raw->file MB/s':>15} {'raw->null MB/s':>15} {'ratio':>6}"
    )
    ratios = []
    for i, (copy_s, file_s, null_s) in enumerate(results, 1):
        ratio = file_s / copy_s
        ratios.append(ratio)
        print(
            f"{i:>4} {mb / copy_s:>10.0f} {mb / file_s:>15.0f} {mb / null_s:>15.0f} {ratio:>6.2f}"
        )
    med = statistics.median(ratios)
    null_ratio = statistics.median(n / c for c, _, n in results)
    print(
        f"median ratio copy / raw stream into a file: {med:.2f} (budget >= {BUDGET:.2f}: "
        f"{'met' if med >= BUDGET else 'NOT met'}); against /dev/null: {null_ratio:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
