"""Pure functions that turn the output of the probe commands into facts.

Built against real GB10 output (see the shared reference folder): nvidia-smi reports the
unified memory as "Not Supported" / "[N/A]", so memory comes from /proc/meminfo; the
ConnectX ports come from `ibdev2netdev`; addresses from `ip -j addr` (or plain `ip addr`
when an old iproute2 has no `-j`). No I/O happens here.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.facts import CachedModel, Interface

MIB = 1024**2


# --- nvidia-smi ---------------------------------------------------------------------------


@dataclass
class GpuInfo:
    """What nvidia-smi says about the GPU(s); memory is None when it says "Not Supported"."""

    name: str | None = None
    count: int = 0
    driver_version: str | None = None
    cuda_version: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None


_SMI_DRIVER = re.compile(r"Driver Version:\s*([\w.]+)")
_SMI_CUDA = re.compile(r"CUDA Version:\s*([\w.]+)")
# "|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |   N/A |"
_SMI_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|")
# "| N/A   45C    P0   11W /  N/A  | Not Supported   |" or "|  1234MiB /  81559MiB |"
_SMI_MEM = re.compile(r"^\|[^|]*\|\s*(?:(\d+)\s*MiB\s*/\s*(\d+)\s*MiB|(Not Supported|N/A))\s*\|")


def parse_nvidia_smi(text: str) -> GpuInfo:
    """Parse the table `nvidia-smi` prints: GPU name, count, driver, CUDA, memory if any."""
    info = GpuInfo()
    if m := _SMI_DRIVER.search(text):
        info.driver_version = m.group(1)
    if m := _SMI_CUDA.search(text):
        info.cuda_version = m.group(1)
    total = used = 0
    memory_known = False
    expect_memory = False
    for line in text.splitlines():
        gpu = _SMI_GPU.match(line)
        if gpu and not line.lstrip("| ").startswith(("GPU", "Fan")):
            info.count += 1
            info.name = info.name or gpu.group(2).strip()
            expect_memory = True
            continue
        if expect_memory:
            expect_memory = False
            mem = _SMI_MEM.match(line)
            if mem and mem.group(1) is not None:
                used += int(mem.group(1)) * MIB
                total += int(mem.group(2)) * MIB
                memory_known = True
    if memory_known:
        info.memory_total_bytes, info.memory_used_bytes = total, used
    return info


# The columns of probe_commands.NVIDIA_SMI_QUERY, in order.
QUERY_COLUMNS = ("name", "driver_version", "memory.total", "memory.used")


def _smi_mib(value: str) -> int | None:
    """'81559 MiB' or '81559' -> bytes; '[N/A]', 'N/A', '[Not Supported]' -> None."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(MiB)?\s*", value)
    return int(float(m.group(1)) * MIB) if m else None


def parse_nvidia_smi_csv(
    text: str, columns: tuple[str, ...] = QUERY_COLUMNS
) -> list[dict[str, Any]]:
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`, one dict per GPU.

    A header line (`name, memory.total [MiB], ...`) names the columns when present;
    otherwise `columns` does. Memory columns become bytes, or None for "[N/A]".
    """
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        return []
    if any(c.strip().startswith(("name", "index", "memory.", "driver_version")) for c in rows[0]):
        columns = tuple(re.sub(r"\s*\[.*\]$", "", c.strip()) for c in rows[0])
        rows = rows[1:]
    gpus: list[dict[str, Any]] = []
    for row in rows:
        gpu: dict[str, Any] = {}
        for key, value in zip(columns, row, strict=False):
            value = value.strip()
            if key.startswith("memory."):
                gpu[key] = _smi_mib(value)
            else:
                gpu[key] = None if value in ("[N/A]", "N/A", "[Not Supported]") else value
        gpus.append(gpu)
    return gpus


# --- memory --------------------------------------------------------------------------------


@dataclass
class MemInfo:
    """Node memory from /proc/meminfo, in bytes; `page_cache` is Cached + Buffers."""

    total: int | None = None
    available: int | None = None
    page_cache: int | None = None
    free: int | None = None


def parse_meminfo(text: str) -> MemInfo:
    """Parse /proc/meminfo (values in kB)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s*kB)?\s*$", line)
        if m:
            unit = 1024 if line.rstrip().endswith("kB") else 1
            values[m.group(1)] = int(m.group(2)) * unit
    cache = None
    if "Cached" in values or "Buffers" in values:
        cache = values.get("Cached", 0) + values.get("Buffers", 0)
    return MemInfo(
        total=values.get("MemTotal"),
        available=values.get("MemAvailable"),
        page_cache=cache,
        free=values.get("MemFree"),
    )


# --- network -------------------------------------------------------------------------------

_IBDEV = re.compile(r"^\s*(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((\w+)\)")


def parse_ibdev2netdev(text: str) -> list[Interface]:
    """Parse `ibdev2netdev`: one ConnectX port per line, `rdma port N ==> netdev (Up|Down)`."""
    ports = []
    for line in text.splitlines():
        m = _IBDEV.match(line)
        if m:
            ports.append(
                Interface(netdev=m.group(3), rdma_device=m.group(1), state=m.group(4).lower())
            )
    return ports


@dataclass
class LinkAddrs:
    """One netdev as `ip addr` shows it."""

    name: str
    state: str = "unknown"  # operstate, lower case
    flags: list[str] = field(default_factory=list)
    mac: str | None = None
    ipv4: list[str] = field(default_factory=list)  # "a.b.c.d/len", in order
    ipv6: list[str] = field(default_factory=list)
    altnames: list[str] = field(default_factory=list)


def split_ip_batch(text: str) -> tuple[str, str]:
    """The `ip -j addr` and the `ip -j neigh` output in that of probe_commands.IP_JSON
    (`ip -j -batch` prints each command's JSON array in turn; "" for one not printed).
    Raises ValueError when what comes first is not JSON."""
    decoder = json.JSONDecoder()
    parts: list[str] = []
    rest = text.lstrip()
    while rest and len(parts) < 2:
        _, end = decoder.raw_decode(rest)
        parts.append(rest[:end] + "\n")
        rest = rest[end:].lstrip()
    parts += [""] * (2 - len(parts))
    return parts[0], parts[1]


def parse_ip_addr(text: str) -> dict[str, LinkAddrs]:
    """Parse `ip -j addr` (JSON) or, when iproute2 is too old for `-j`, plain `ip addr`."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _parse_ip_addr_json(stripped)
    return _parse_ip_addr_text(text)


def _parse_ip_addr_json(text: str) -> dict[str, LinkAddrs]:
    links: dict[str, LinkAddrs] = {}
    for entry in json.loads(text):
        if not isinstance(entry, dict) or "ifname" not in entry:
            continue
        link = LinkAddrs(
            name=entry["ifname"],
            state=str(entry.get("operstate", "unknown")).lower(),
            flags=list(entry.get("flags") or []),
            mac=entry.get("address"),
            altnames=list(entry.get("altnames") or []),
        )
        for addr in entry.get("addr_info") or []:
            local, plen = addr.get("local"), addr.get("prefixlen")
            if not local:
                continue
            cidr = f"{local}/{plen}" if plen is not None else local
            (link.ipv4 if addr.get("family") == "inet" else link.ipv6).append(cidr)
        links[link.name] = link
    return links


_IP_LINK = re.compile(r"^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>.*?(?:state\s+(\S+))?")


def _parse_ip_addr_text(text: str) -> dict[str, LinkAddrs]:
    links: dict[str, LinkAddrs] = {}
    current: LinkAddrs | None = None
    for line in text.splitlines():
        m = _IP_LINK.match(line)
        if m:
            current = LinkAddrs(name=m.group(1), flags=m.group(2).split(","))
            state = re.search(r"\bstate\s+(\S+)", line)
            current.state = state.group(1).lower() if state else "unknown"
            links[current.name] = current
            continue
        if current is None:
            continue
        words = line.split()
        if len(words) >= 2 and words[0].startswith("link/"):
            current.mac = words[1]
        elif len(words) >= 2 and words[0] == "altname":
            current.altnames.append(words[1])
        elif len(words) >= 2 and words[0] == "inet":
            current.ipv4.append(words[1])
        elif len(words) >= 2 and words[0] == "inet6":
            current.ipv6.append(words[1])
    return links


def parse_net_speeds(text: str) -> dict[str, int | None]:
    """Parse NET_SPEEDS (`name speed` per line, Mb/s); -1 or empty means unknown."""
    speeds: dict[str, int | None] = {}
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        value = words[1] if len(words) > 1 else ""
        speeds[words[0]] = int(value) if value.isdigit() and int(value) > 0 else None
    return speeds


def _strip_len(cidr: str) -> str:
    return cidr.split("/", 1)[0]


def _preferred_ipv4(addrs: list[str]) -> str | None:
    """A routable IPv4 first; a link-local 169.254 one (what a bare cable gets) otherwise."""
    cidr = _preferred_cidr(addrs)
    return _strip_len(cidr) if cidr else None


def _preferred_cidr(addrs: list[str]) -> str | None:
    plain = [a for a in addrs if not a.startswith("169.254.")]
    chosen = plain or addrs
    return chosen[0] if chosen else None


def _prefix_len(cidr: str | None) -> int | None:
    _, sep, plen = (cidr or "").partition("/")
    return int(plen) if sep and plen.isdigit() and int(plen) <= 32 else None


# Neighbour states of an address that did not answer (or has not yet).
_NEIGH_SILENT = {"FAILED", "INCOMPLETE", "NONE"}


def parse_ip_neigh(text: str) -> dict[str, list[str]]:
    """Parse `ip -j neigh` (JSON) or plain `ip neigh`: per netdev, the IPv4 neighbours that
    answered there (a failed or incomplete entry never answered), in order, no repeats."""
    entries: list[tuple[str, str, list[str]]] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        for e in json.loads(stripped):
            if isinstance(e, dict) and isinstance(e.get("dst"), str) and e.get("dev"):
                state = e.get("state") or []
                states = [str(s) for s in state] if isinstance(state, list) else [str(state)]
                entries.append((e["dst"], str(e["dev"]), states))
    else:
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] == "dev":
                entries.append((words[0], words[2], words[-1:]))
    out: dict[str, list[str]] = {}
    for dst, dev, states in entries:
        if ":" in dst or any(s.upper() in _NEIGH_SILENT for s in states):
            continue
        found = out.setdefault(dev, [])
        if dst not in found:
            found.append(dst)
    return out


def build_interfaces(
    ports: list[Interface],
    links: dict[str, LinkAddrs] | None = None,
    speeds: dict[str, int | None] | None = None,
    neighbours: dict[str, list[str]] | None = None,
) -> list[Interface]:
    """Merge ConnectX ports (ibdev2netdev) with their addresses, link speeds and the
    neighbours that answered on them."""
    links = links or {}
    speeds = speeds or {}
    neighbours = neighbours or {}
    merged = []
    for port in ports:
        link = links.get(port.netdev)
        state = port.state
        if state == "unknown" and link is not None:
            state = "up" if link.state == "up" else "down"
        speed = speeds.get(port.netdev) if state == "up" else None
        cidr = _preferred_cidr(link.ipv4) if link else None
        merged.append(
            Interface(
                netdev=port.netdev,
                rdma_device=port.rdma_device,
                state=state,
                ipv4=_strip_len(cidr) if cidr else None,
                speed_mbps=speed,
                prefix_len=_prefix_len(cidr),
                peers=list(neighbours.get(port.netdev, [])) if state == "up" else [],
            )
        )
    return merged


# --- disk ----------------------------------------------------------------------------------


def parse_df_b1(text: str) -> int | None:
    """The available bytes of the first filesystem in `df -B1 PATH` output."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[0].lower().startswith("filesystem"):
        return None
    # A long device name makes df wrap the row onto a second line: join the rest.
    words = " ".join(lines[1:]).split()
    numbers = [w for w in words[1:] if w.isdigit()]
    return int(numbers[2]) if len(numbers) >= 3 else None


# --- Hugging Face cache --------------------------------------------------------------------

_TOTAL_SIZE = re.compile(r'"total_size"\s*:\s*(\d+)')
_SHARD_NAME = re.compile(r'"([^"\\]+\.safetensors)"')
_NUMBERED = re.compile(r"^(?P<stem>.*-)(?P<i>\d+)-of-(?P<n>\d+)\.safetensors$")


def index_shards(text: str) -> list[str]:
    """The weight files a (possibly truncated) safetensors index names, sorted.

    A cut index still names its numbered shards completely: `model-00001-of-00014` says
    there are 14 of them, so the names the cut hid are filled in.
    """
    names = set(_SHARD_NAME.findall(text))
    for name in list(names):
        m = _NUMBERED.match(name)
        if m:
            width, count = len(m.group("i")), int(m.group("n"))
            first = 0 if "-" + "0" * width + "-of-" in text else 1
            for i in range(first, count + first):
                names.add(f"{m.group('stem')}{i:0{width}d}-of-{m.group('n')}.safetensors")
    return sorted(names)


_SNAPSHOT = re.compile(r"/models--(?P<repo>[^/]+)/snapshots/(?P<rev>[^/\s]+)/?$")
# A file of a snapshot: the snapshot's path (the first `models--X/snapshots/Y` in it) and the
# file's path inside it.
_SNAPSHOT_FILE = re.compile(r"^(?P<snap>.*?/models--[^/]+/snapshots/[^/]+)/(?P<rel>.+)$")


def repo_id_from_cache_dir(name: str) -> str:
    """`models--org--name` (or the part after `models--`) -> `org/name`."""
    name = name.removeprefix("models--")
    org, sep, rest = name.partition("--")
    return f"{org}/{rest}" if sep else org


def parse_hf_cache_scan(text: str) -> list[CachedModel]:
    """Parse probe_commands.HF_CACHE_SCAN: one CachedModel per snapshot (model revision).

    `files` holds each complete file with its size, `size_bytes` their sum; config.json
    becomes `config` (None when absent or not valid JSON); the safetensors index's
    `metadata.total_size` becomes `weight_bytes` (read with a regex, because the scan
    truncates large index files after their metadata); the `--- module` lines, read from
    the whole index, become `modules`.
    """
    models: dict[str, CachedModel] = {}
    heads: dict[str, list[str]] = {}
    body: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("==> ") and line.endswith(" <=="):
            body = heads.setdefault(line[4:-4], [])
        elif body is not None:
            body.append(line)
        elif line.startswith("--- module "):
            path, _, module = line.removeprefix("--- module ").rpartition(" ")
            where = _SNAPSHOT_FILE.match(path)
            model = models.get(where.group("snap")) if where else None
            if model is not None and module:
                model.modules = sorted({*(model.modules or []), module})
        elif line.startswith("--- snapshot "):
            path = line.removeprefix("--- snapshot ").strip()
            if m := _SNAPSHOT.search(path):
                repo_id = repo_id_from_cache_dir(m.group("repo"))
                models[path] = CachedModel(repo_id=repo_id, revision=m.group("rev"), files={})
        else:
            size, _, path = line.partition(" ")
            where = _SNAPSHOT_FILE.match(path)
            model = models.get(where.group("snap")) if where else None
            if model is not None and model.files is not None and where and size.isdigit():
                model.files[where.group("rel")] = int(size)
    for path, lines in heads.items():
        where = _SNAPSHOT_FILE.match(path)
        model = models.get(where.group("snap")) if where else None
        content = "\n".join(lines).strip()
        if model is None or where is None or not content:
            continue
        if where.group("rel") == "config.json":
            try:
                data = json.loads(content)
            except json.JSONDecodeError:
                data = None
            model.config = data if isinstance(data, dict) else None
        elif where.group("rel") == "model.safetensors.index.json":
            m = _TOTAL_SIZE.search(content)
            model.weight_bytes = int(m.group(1)) if m else None
            model.shards = index_shards(content)
    for model in models.values():
        model.size_bytes = sum((model.files or {}).values())
    return list(models.values())
