"""The arguments of `lab`: real sshd and dockerd in network namespaces, and real vLLM."""

from __future__ import annotations

from typing import Any

from spark_tui.commands.arguments.common import json_flag


def lab(sub: Any) -> None:
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
    json_flag(p)
    p.add_argument(
        "--prefix", default="sparklab", help="names of the lab's bridge and namespaces (up)"
    )
    p.add_argument("--subnet", default="10.77.0.0/24", help="the lab's private subnet (up)")
