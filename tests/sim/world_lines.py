"""The lines a vLLM rank logs about its data-parallel rank and torch world, made comparable
between a real capture and the stand-in: the process named without its pid, the source, the
message with the node's own address and every tcp:// endpoint blanked (their relations are
checked apart, from `endpoints`)."""

from __future__ import annotations

import re

LINE = re.compile(r"^\((\w+)[^)]*\) (\w+) \S+ \S+ \[([^\]]+)\] (.*)$")
SOURCES = (
    "arg_utils.py:2472",  # "Inferred data_parallel_rank N from node_rank M"
    "serve.py:239",  # a headless replica's "Launching N data parallel engine(s)"
    "multiproc_executor.py:153",  # its DP group leader
    "parallel_state.py:1906",  # its torch world and where it meets
    "parallel_state.py:2350",  # its place in that world
)
ENDPOINT = re.compile(r"tcp://([\d.]+):(\d+)")


def world_lines(lines: list[str], head: str | None = None) -> list[str]:
    """Each world line as `(process) [source] message`, in order (`head`: the address given
    as --master-addr, shown as HEAD)."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if not m or m.group(3) not in SOURCES:
            continue
        proc, _level, src, msg = m.groups()
        msg = ENDPOINT.sub("tcp://ADDRESS:PORT", msg)
        if head is not None:
            msg = msg.replace(f"master_addr={head},", "master_addr=HEAD,")
        msg = re.sub(r"mq_connect_ip=\S+", "mq_connect_ip=OWN", msg)
        # The CPU build's collective backend; the GPU build, which the stand-in is, says
        # nccl (vLLM takes it from the platform: CpuPlatform gloo, CudaPlatform nccl).
        msg = msg.replace("backend=gloo", "backend=nccl")
        out.append(f"({proc}) [{src}] {msg}")
    return out


def endpoints(lines: list[str]) -> dict[str, tuple[str, int]]:
    """The tcp:// endpoint (host, port) each world source names, by source."""
    found: dict[str, tuple[str, int]] = {}
    for line in lines:
        m = LINE.match(line)
        if m and m.group(3) in SOURCES and (hit := ENDPOINT.search(m.group(4))):
            found[m.group(3)] = (hit.group(1), int(hit.group(2)))
    return found


def ranks_of(capture: str) -> list[list[str]]:
    """A capture's lines by rank, split at its `# rank N on NODE` lines."""
    ranks: list[list[str]] = []
    for line in capture.splitlines():
        if line.startswith("# rank "):
            ranks.append([])
        elif ranks and not line.startswith("#"):
            ranks[-1].append(line)
    return ranks
