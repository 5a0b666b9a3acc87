"""Free loopback addresses for simulated nodes, so two demos (or a demo and `spark-tui sim`)
on one machine never share an address: the simulated engines bind the recipe's API port
(8000) and the rendezvous port (29501) on their node's address, and those are fixed."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import itertools
import random
import socket
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

# What a simulated node's engines bind on its address: the bundled recipes' API port and
# vLLM's --master-port default (the head's rendezvous).
ENGINE_PORTS = (8000, 29501)
_PROC_NET_TCP = Path("/proc/net/tcp")
_TCP_LISTEN = "0A"


def listening_addresses(table: Path = _PROC_NET_TCP) -> set[str] | None:
    """IPv4 addresses with a listening TCP socket on any port (Linux), None where the
    kernel does not say (then only the bind probes of `address_is_free` count)."""
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != _TCP_LISTEN:
            continue
        raw = fields[1].partition(":")[0]
        with contextlib.suppress(ValueError, struct.error):
            # The kernel prints the address as one native-endian 32-bit number.
            found.add(socket.inet_ntoa(struct.pack("=I", int(raw, 16))))
    return found


def port_is_free(address: str, port: int) -> bool:
    """Whether a listening socket could bind `address:port` now (a bind probe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like the servers that will bind it: a closed connection's TIME_WAIT does not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def address_is_free(address: str, ports: Iterable[int], listening: set[str] | None) -> bool:
    """Nothing listens on `address` (where the kernel tells) and each port binds there."""
    if listening is not None and address in listening:
        return False
    return all(port_is_free(address, port) for port in ports)


def candidate_bases(first: str, nodes: int, rng: random.Random | None = None) -> Iterator[str]:
    """`first`, then random 127.x.y.z ranges with room for `nodes` addresses."""
    yield first
    rng = rng or random.SystemRandom()
    while True:
        yield f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250 - nodes)}"


def free_base_address(
    nodes: int,
    ssh_port: int,
    first: str,
    *,
    attempts: int = 64,
    rng: random.Random | None = None,
) -> str:
    """The first loopback range of `nodes` consecutive addresses that are all free: nothing
    listens on them, and the SSH port (when fixed) and `ENGINE_PORTS` bind on each.
    Raises OSError (EADDRINUSE) when `attempts` ranges were all taken."""
    ports = (*ENGINE_PORTS, ssh_port) if ssh_port else ENGINE_PORTS
    for base in itertools.islice(candidate_bases(first, nodes, rng), attempts):
        start = ipaddress.IPv4Address(base)
        listening = listening_addresses()
        if all(address_is_free(str(start + i), ports, listening) for i in range(nodes)):
            return base
    raise OSError(errno.EADDRINUSE, f"no free range of {nodes} loopback addresses found")
