"""The arguments of the commands that start simulated Sparks: `demo` and `sim`."""

from __future__ import annotations

from typing import Any


def demo(sub: Any) -> None:
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


def sim(sub: Any) -> None:
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
