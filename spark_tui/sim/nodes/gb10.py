"""What a simulated GB10 node prints for the probe commands, modelled on real outputs.

Formats follow the samples in the shared reference folder (nvidia_smi_gb10_*, free_*,
ibdev2netdev_*, ip_*, ethtool_speed_cx7.txt): nvidia-smi reports the unified memory as
"Not Supported", so a node's memory comes from /proc/meminfo.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spark_tui.sim.nodes.scenario import NodeScenario

DRIVER_VERSION = "580.95.05"
CUDA_VERSION = "13.0"
GPU_NAME = "NVIDIA GB10"
CONNECTX_SPEED_MBPS = 200000
_FOREVER = 4294967295

# Memory the OS and its services use on an idle GB10 (reference free_kib_gb10.txt: free
# 118621120 kB, buff/cache 2728844 kB split into buffers, page cache and reclaimable slab;
# procps 4 prints used = total - available, so what is neither free nor cache is this).
_USED_KB = 4_163_756
_BUFFERS_KB = 98_516
_CACHED_KB = 2_130_000
_SRECLAIMABLE_KB = 500_328
_SHMEM_KB = 20_596
_SWAP_KB = 16_777_212
_MIN_FREE_KB = 400_000  # the kernel keeps this much free: held cache is evicted below it
_WMARK_LOW_KB = 200_000


@dataclass(frozen=True)
class GpuProcess:
    """A process nvidia-smi lists (a running engine container)."""

    pid: int
    name: str
    used_mib: int


@dataclass(frozen=True)
class Memory:
    """A node's memory at one moment, in kB as /proc/meminfo counts it."""

    total: int
    free: int
    available: int
    buffers: int
    cached: int
    sreclaimable: int

    @property
    def page_cache_held(self) -> int:
        return self.cached - _CACHED_KB


def memory_state(node: NodeScenario, page_cache_bytes: int, held_bytes: int) -> Memory:
    """Memory of `node` holding `page_cache_bytes` of extra page cache and `held_bytes`
    taken by running engines (unified memory allocated by the driver: neither anon nor
    cache, it only lowers MemFree)."""
    total = node.mem_total_kb
    held = held_bytes // 1024
    room = total - _USED_KB - _BUFFERS_KB - _CACHED_KB - _SRECLAIMABLE_KB - _MIN_FREE_KB
    # The page cache cannot hold what the engines took: it is evicted first, as Linux does.
    extra_cache = max(0, min(page_cache_bytes // 1024, room - held))
    cached = _CACHED_KB + extra_cache
    free = max(_MIN_FREE_KB, total - _USED_KB - held - _BUFFERS_KB - cached - _SRECLAIMABLE_KB)
    # si_mem_available(): free minus reserves, plus most of the file pages and half the
    # reclaimable slab. The kernel counts page cache as available: CUDA on GB10 does not.
    file_pages = _BUFFERS_KB + cached - _SHMEM_KB
    available = (
        free
        - _MIN_FREE_KB
        + file_pages
        - min(file_pages // 2, _WMARK_LOW_KB)
        + _SRECLAIMABLE_KB // 2
    )
    return Memory(total, free, max(0, available), _BUFFERS_KB, cached, _SRECLAIMABLE_KB)


def meminfo(mem: Memory) -> str:
    """/proc/meminfo of a GB10 (aarch64, 6.x kernel) with these numbers."""
    anon = _USED_KB - 900_000
    inactive_file = (mem.buffers + mem.cached - _SHMEM_KB) * 2 // 3
    active_file = mem.buffers + mem.cached - _SHMEM_KB - inactive_file
    fields: list[tuple[str, int, bool]] = [
        ("MemTotal", mem.total, True),
        ("MemFree", mem.free, True),
        ("MemAvailable", mem.available, True),
        ("Buffers", mem.buffers, True),
        ("Cached", mem.cached, True),
        ("SwapCached", 0, True),
        ("Active", active_file + 310_512, True),
        ("Inactive", inactive_file + anon - 310_512 + _SHMEM_KB, True),
        ("Active(anon)", 310_512, True),
        ("Inactive(anon)", anon - 310_512 + _SHMEM_KB, True),
        ("Active(file)", active_file, True),
        ("Inactive(file)", inactive_file, True),
        ("Unevictable", 24_576, True),
        ("Mlocked", 24_576, True),
        ("SwapTotal", _SWAP_KB, True),
        ("SwapFree", _SWAP_KB, True),
        ("Zswap", 0, True),
        ("Zswapped", 0, True),
        ("Dirty", 1_284, True),
        ("Writeback", 0, True),
        ("AnonPages", anon, True),
        ("Mapped", 612_388, True),
        ("Shmem", _SHMEM_KB, True),
        ("KReclaimable", mem.sreclaimable, True),
        ("Slab", mem.sreclaimable + 642_300, True),
        ("SReclaimable", mem.sreclaimable, True),
        ("SUnreclaim", 642_300, True),
        ("KernelStack", 24_960, True),
        ("ShadowCallStack", 6_256, True),
        ("PageTables", 41_716, True),
        ("SecPageTables", 0, True),
        ("NFS_Unstable", 0, True),
        ("Bounce", 0, True),
        ("WritebackTmp", 0, True),
        ("CommitLimit", mem.total // 2 + _SWAP_KB, True),
        ("Committed_AS", 7_912_344, True),
        ("VmallocTotal", 135_288_315_904, True),
        ("VmallocUsed", 118_612, True),
        ("VmallocChunk", 0, True),
        ("Percpu", 17_920, True),
        ("HardwareCorrupted", 0, True),
        ("AnonHugePages", 1_337_344, True),
        ("ShmemHugePages", 0, True),
        ("ShmemPmdMapped", 0, True),
        ("FileHugePages", 0, True),
        ("FilePmdMapped", 0, True),
        ("CmaTotal", 0, True),
        ("CmaFree", 0, True),
        ("HugePages_Total", 0, False),
        ("HugePages_Free", 0, False),
        ("HugePages_Rsvd", 0, False),
        ("HugePages_Surp", 0, False),
        ("Hugepagesize", 2048, True),
        ("Hugetlb", 0, True),
    ]
    # The kernel pads "Name:" to 16 columns and the number to 8 (meminfo_proc_show()).
    return "".join(
        f"{name + ':':<16}{value:>8}{' kB' if kb else ''}\n" for name, value, kb in fields
    )


def free(mem: Memory, unit: int = 1024) -> str:
    """`free` (unit 1024 = kibibytes, 1 = bytes) for these numbers."""
    buff_cache = mem.buffers + mem.cached + mem.sreclaimable
    used = mem.total - mem.available  # procps-ng 4 computes "used" this way
    row = [mem.total, used, mem.free, _SHMEM_KB, buff_cache, mem.available]
    row = [v * 1024 // unit for v in row]
    swap = [_SWAP_KB * 1024 // unit, 0, _SWAP_KB * 1024 // unit]
    # procps-ng: "%-8s" for the label, then " %11s" per column (wider numbers overflow).
    heads = ["total", "used", "free", "shared", "buff/cache", "available"]
    lines = [("", heads), ("Mem:", [str(v) for v in row]), ("Swap:", [str(v) for v in swap])]
    return "".join(
        f"{label:<8}" + "".join(f" {v:>11}" for v in vals) + "\n" for label, vals in lines
    )


def nvidia_smi(now: datetime, processes: list[GpuProcess]) -> str:
    """`nvidia-smi` as GB10 prints it: memory usage "Not Supported"."""
    busy = bool(processes)
    temp, perf, watts = ("52C", "P0", "28W") if busy else ("36C", "P8", "4W")
    bar = "+" + "-" * 89 + "+"
    lines = [
        f"{now:%a %b} {now.day:>2} {now:%H:%M:%S %Y}       ",
        bar,
        f"| NVIDIA-SMI {DRIVER_VERSION}              Driver Version: {DRIVER_VERSION}"
        f"      CUDA Version: {CUDA_VERSION}     |",
        "+-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        "|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |                  N/A |",
        f"| N/A   {temp}    {perf}{watts:>16} /  N/A  | Not Supported          |"
        "      0%      Default |",
        "|                                         |                        |                  N/A |",
        "+-----------------------------------------+------------------------+----------------------+",
        "",
        bar,
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    if not processes:
        lines.append("|  No running processes found" + " " * 61 + "|")
    for p in processes:
        mem = f"{p.used_mib}MiB"
        name = p.name if len(p.name) <= 36 else "..." + p.name[-33:]
        lines.append(
            f"|{0:>5}{'N/A':>6}{'N/A':>5}{p.pid:>16}{'C':>7}   {name:<{46 - len(mem)}}{mem} |"
        )
    lines.append(bar)
    return "\n".join(lines) + "\n"


def nvidia_smi_query() -> str:
    """The probe's `--query-gpu=name,driver_version,memory.total,memory.used` CSV line."""
    return f"{GPU_NAME}, {DRIVER_VERSION}, [N/A], [N/A]\n"


# ---- network -------------------------------------------------------------------------


@dataclass(frozen=True)
class Netdev:
    """One network interface of a simulated node."""

    ifindex: int
    name: str
    mac: str
    up: bool
    rdma: str | None = None
    ipv4: str | None = None
    speed: str = ""
    link_local: str | None = None
    altname: str | None = None
    loopback: bool = False
    extra_ipv4: tuple[str, int, str] | None = None  # (address, prefix, broadcast)


def _mac(node: NodeScenario, offset: int) -> str:
    value = 0x2F9110 + node.index * 0x100 + offset
    return "4c:bb:47:" + ":".join(f"{(value >> s) & 0xFF:02x}" for s in (16, 8, 0))


def _link_local(mac: str) -> str:
    b = [int(x, 16) for x in mac.split(":")]
    b[0] ^= 0x02
    eui = b[:3] + [0xFF, 0xFE] + b[3:]
    groups = [f"{eui[i] << 8 | eui[i + 1]:x}" for i in range(0, 8, 2)]
    return "fe80::" + ":".join(groups)


def connectx_ports(node: NodeScenario) -> list[tuple[str, str, bool]]:
    """(rdma device, netdev, up) of the four ConnectX-7 ports, in ibdev2netdev's order."""
    ports = []
    for domain in ("p1", "P2p1"):
        for fn in (0, 1):
            rdma = f"roce{domain}s0f{fn}"
            netdev = f"en{domain}s0f{fn}np{fn}"
            ports.append((rdma, netdev, fn == node.cx_port or node.ring is not None))
    return ports


def primary_netdev(node: NodeScenario) -> str:
    """The cabled ConnectX netdev that carries the node's cluster IPv4 (on a ring, the
    cable toward the next node)."""
    port = 0 if node.ring is not None else node.cx_port
    return f"enp1s0f{port}np{port}"


def _port_ipv4(node: NodeScenario, name: str) -> str | None:
    if node.ring is not None:
        return {"enp1s0f0np0": node.ring[0], "enp1s0f1np1": node.ring[1]}.get(name)
    return node.address if name == primary_netdev(node) else None


def netdevs(node: NodeScenario) -> list[Netdev]:
    """Every interface of the node, as `ip addr` lists them."""
    devs = [
        Netdev(1, "lo", "00:00:00:00:00:00", True, loopback=True),
        Netdev(
            2,
            "enP7s7",
            _mac(node, 0x01),
            True,
            speed="10000",
            ipv4=node.address if node.ring is not None else None,
            link_local=_link_local(_mac(node, 0x01)),
            altname="enP7p1s0",
        ),
    ]
    offsets = {"enp1s0f0np0": 2, "enp1s0f1np1": 3, "enP2p1s0f0np0": 6, "enP2p1s0f1np1": 7}
    ordered = sorted(connectx_ports(node), key=lambda p: offsets[p[1]])
    for i, (rdma, name, up) in enumerate(ordered):
        mac = _mac(node, offsets[name])
        devs.append(
            Netdev(
                3 + i,
                name,
                mac,
                up,
                rdma=rdma,
                ipv4=_port_ipv4(node, name),
                speed=str(CONNECTX_SPEED_MBPS) if up else "-1",
                link_local=_link_local(mac) if up else None,
            )
        )
    devs.append(Netdev(7, "wlP9s9", _mac(node, 0x20), False, altname="wlP9p1s0"))
    docker_mac = _mac(node, 0x30).replace("4c:bb:47", "96:6d:d0")
    devs.append(
        Netdev(8, "docker0", docker_mac, False, extra_ipv4=("172.17.0.1", 16, "172.17.255.255"))
    )
    return devs


def ibdev2netdev(node: NodeScenario) -> str:
    """`ibdev2netdev`: one line per ConnectX port with its link state."""
    return "".join(
        f"{rdma} port 1 ==> {netdev} ({'Up' if up else 'Down'})\n"
        for rdma, netdev, up in connectx_ports(node)
    )


def _broadcast(address: str, prefix: int) -> str:
    import ipaddress

    return str(ipaddress.IPv4Network(f"{address}/{prefix}", strict=False).broadcast_address)


def _addr(
    family: str, local: str, prefix: int, scope: str, label: str | None, **kw: Any
) -> dict[str, Any]:
    entry: dict[str, Any] = {"family": family, "local": local, "prefixlen": prefix}
    entry.update(kw)
    entry["scope"] = scope
    if label:
        entry["label"] = label
    entry["valid_life_time"] = _FOREVER
    entry["preferred_life_time"] = _FOREVER
    return entry


def ip_addr_json(node: NodeScenario) -> str:
    """`ip -j addr` as iproute2 prints it (one compact JSON line)."""
    out = []
    for d in netdevs(node):
        if d.loopback:
            flags = ["LOOPBACK", "UP", "LOWER_UP"]
        elif d.up:
            flags = ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
        else:
            flags = ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]
        entry: dict[str, Any] = {
            "ifindex": d.ifindex,
            "ifname": d.name,
            "flags": flags,
            "mtu": 65536 if d.loopback else 1500,
            "qdisc": "noqueue" if d.loopback or d.name == "docker0" else "mq",
            "operstate": "UNKNOWN" if d.loopback else ("UP" if d.up else "DOWN"),
            "group": "default",
        }
        if d.name != "docker0":
            entry["txqlen"] = 1000
        entry["link_type"] = "loopback" if d.loopback else "ether"
        entry["address"] = d.mac
        entry["broadcast"] = "00:00:00:00:00:00" if d.loopback else "ff:ff:ff:ff:ff:ff"
        if d.altname:
            entry["altnames"] = [d.altname]
        info: list[dict[str, Any]] = []
        if d.loopback:
            info.append(_addr("inet", "127.0.0.1", 8, "host", "lo"))
            info.append(_addr("inet6", "::1", 128, "host", None, noprefixroute=True))
        if d.ipv4:
            info.append(
                _addr("inet", d.ipv4, 24, "global", d.name, broadcast=_broadcast(d.ipv4, 24))
            )
        if d.extra_ipv4:
            a, p, b = d.extra_ipv4
            info.append(_addr("inet", a, p, "global", d.name, broadcast=b))
        if d.link_local:
            info.append(_addr("inet6", d.link_local, 64, "link", None, noprefixroute=True))
        entry["addr_info"] = info
        out.append(entry)
    return json.dumps(out, separators=(",", ":")) + "\n"


def ip_neigh_json(node: NodeScenario, peers: list[NodeScenario]) -> str:
    """`ip -j neigh`: the other simulated nodes, reachable on this node's cabled port (on a
    ring: every node on the LAN port, each neighbour on the cable to it)."""
    others = [peer for peer in peers if peer.index != node.index]
    if node.ring is None:
        seen = [
            (peer.address, primary_netdev(node), _mac(peer, 2 + peer.cx_port)) for peer in others
        ]
    else:
        seen = [(peer.address, "enP7s7", _mac(peer, 0x01)) for peer in others]
        for peer in others:
            if peer.ring is None:
                continue
            if peer.index == node.index % len(peers) + 1:  # the next node, on its port f1
                seen.append((peer.ring[1], "enp1s0f0np0", _mac(peer, 3)))
            if node.index == peer.index % len(peers) + 1:  # the previous, on its port f0
                seen.append((peer.ring[0], "enp1s0f1np1", _mac(peer, 2)))
    out = [
        {"dst": dst, "dev": dev, "lladdr": mac, "state": ["REACHABLE"]} for dst, dev, mac in seen
    ]
    return json.dumps(out, separators=(",", ":")) + "\n"


def net_speeds(node: NodeScenario) -> str:
    """What the NET_SPEEDS loop prints: "name speed" per /sys/class/net entry, glob order."""
    devs = sorted(netdevs(node), key=lambda d: d.name.encode())
    return "".join(f"{d.name} {d.speed}\n" for d in devs)


# ---- link counters (simulated) ---------------------------------------------------------

# Bytes a cabled port sees each way with no job on it (LLDP, neighbour discovery).
IDLE_LINK_BYTES_PER_S = 180
# How long a simulated node has been up when the simulation starts.
BOOT_UPTIME_S = 3 * 86400 + 4127.31
_CPUS = 20  # /proc/uptime's idle time counts every core's


def link_counters(
    node: NodeScenario, name: str, uptime_s: float, engine_bytes: int
) -> tuple[int, int] | None:
    """(rx_bytes, tx_bytes) of interface `name` (None: the node has none of that name). The
    cabled port carries the engines' traffic (`engine_bytes` each way: a ring all-reduce
    sends what it receives) on top of an idle trickle; the counters start from a made-up
    history since boot."""
    dev = next((d for d in netdevs(node) if d.name == name), None)
    if dev is None:
        return None
    rx = (node.index + 1) * 7_519_000_000 + dev.ifindex * 104_729
    tx = rx * 97 // 100
    if dev.up and not dev.loopback:
        idle = int(uptime_s * IDLE_LINK_BYTES_PER_S)
        rx, tx = rx + idle, tx + idle
    if name == primary_netdev(node):
        rx, tx = rx + engine_bytes, tx + engine_bytes
    return rx, tx


def link_sample(
    node: NodeScenario, mem: Memory, interfaces: list[str], uptime_s: float, engine_bytes: int
) -> tuple[str, int]:
    """What `grep -H . /proc/uptime /proc/meminfo <each interface's counters and speed>`
    prints on this node, and its exit status (2 when a file is missing or unreadable, as
    grep's is: the speed of a virtual link gives EINVAL)."""
    lines = [f"/proc/uptime:{uptime_s:.2f} {uptime_s * _CPUS * 0.97:.2f}"]
    lines += [f"/proc/meminfo:{line}" for line in meminfo(mem).splitlines()]
    speeds = {d.name: d.speed for d in netdevs(node)}
    status = 0
    for name in interfaces:
        counters = link_counters(node, name, uptime_s, engine_bytes)
        if counters is None:
            status = 2
            continue
        base = f"/sys/class/net/{name}"
        lines.append(f"{base}/statistics/rx_bytes:{counters[0]}")
        lines.append(f"{base}/statistics/tx_bytes:{counters[1]}")
        if speeds.get(name):
            lines.append(f"{base}/speed:{speeds[name]}")
        else:
            status = 2
    return "\n".join(lines) + "\n", status
