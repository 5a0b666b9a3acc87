"""Probe nodes: run the probe commands over SSH (in parallel) and turn their output into NodeFacts.

Docker facts (version, images with digests, our running containers) come from the
Docker SDK through the node's socket forwarded over the same SSH connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_tui.core.errors import SparkError, UnreachableError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.inventory import InventoryNode
from spark_tui.remote import parsers
from spark_tui.remote import probe_commands as pc
from spark_tui.remote.hostkeys import HostKeyConfirm
from spark_tui.remote.ssh import ConnectionPool, NodeConnection, RunResult, combine_errors

if TYPE_CHECKING:
    from spark_tui.remote.docker_remote import RemoteDocker

# The label every container of ours carries (see core.plan.LABEL_PREFIX).
CLUSTER_LABEL = "spark-tui.cluster"

_COMMANDS = pc.SECTIONS
# What a missing command means for the user, and what to do about it.
_MISSING = {
    "nvidia_smi": "nvidia-smi not found: is the NVIDIA driver installed?",
    "ibdev2netdev": "ibdev2netdev not found: ConnectX ports unknown (install the "
    "MLNX/DOCA OFED tools, as on DGX OS)",
}


def _failed(key: str, cmd: str, res: RunResult) -> str | None:
    """A one-line note for a probe command that failed (None: not worth saying)."""
    if key in _MISSING and res.exit_status == 127:
        return _MISSING[key]
    if key == "hf_cache":
        return None  # an empty or missing cache is not an error
    first = (res.stderr.strip() or res.stdout.strip()).splitlines()[:1]
    detail = f": {first[0]}" if first else ""
    # A section in `sh -c` is named by what it reads ("hostname", "meminfo", "ip"), not "sh".
    tool = cmd.split()[0]
    return f"`{key if tool == 'sh' else tool}` exited {res.exit_status}{detail}"


async def _run_all(conn: NodeConnection, timeout: float) -> dict[str, RunResult | SparkError]:
    # One session for every command: see probe_commands.COMBINED.
    try:
        res = await conn.run(pc.COMBINED, timeout=timeout)
    except SparkError as exc:
        return dict.fromkeys(_COMMANDS, exc)
    sections = pc.split_combined(res.stdout)
    out: dict[str, RunResult | SparkError] = {}
    for key in _COMMANDS:
        if key in sections:
            stdout, stderr, status = sections[key]
            out[key] = RunResult(stdout, stderr, status)
        else:
            first = (res.stderr.strip() or res.stdout.strip()).splitlines()[:1]
            detail = f": {first[0]}" if first else ""
            out[key] = UnreachableError(
                f"{conn.name}: the probe printed no {key} (exit {res.exit_status}){detail}",
                "probe again; check that /bin/sh and mktemp work on the node",
            )
    return out


def facts_from_outputs(name: str, address: str, outputs: dict[str, str]) -> NodeFacts:
    """NodeFacts from the stdout of each probe command (keys as in the probe's table, plus
    "nvidia_smi_query" when the table's GPU name was cut short)."""
    facts = NodeFacts(name=name, address=address)
    get = outputs.get
    facts.hostname = (get("hostname") or "").strip() or None
    facts.home = (get("home") or "").strip() or None
    facts.arch = (get("arch") or "").strip() or None
    smi = parsers.parse_nvidia_smi(get("nvidia_smi") or "")
    query = parsers.parse_nvidia_smi_csv(get("nvidia_smi_query") or "")
    first = query[0] if query else {}
    facts.gpu_name = first.get("name") or smi.name
    facts.driver_version = first.get("driver_version") or smi.driver_version
    facts.cuda_version = smi.cuda_version
    mem = parsers.parse_meminfo(get("meminfo") or "")
    facts.memory_total_bytes = mem.total
    facts.memory_available_bytes = mem.available
    facts.page_cache_bytes = mem.page_cache
    ports = parsers.parse_ibdev2netdev(get("ibdev2netdev") or "")
    ip_addr, ip_neigh = parsers.split_ip_batch(get("ip") or "")
    links = parsers.parse_ip_addr(ip_addr) if ip_addr else {}
    speeds = parsers.parse_net_speeds(get("net_speeds") or "")
    neighbours = parsers.parse_ip_neigh(ip_neigh)
    facts.interfaces = parsers.build_interfaces(ports, links, speeds, neighbours)
    facts.disk_free_bytes = parsers.parse_df_b1(get("disk_free") or "")
    facts.models = parsers.parse_hf_cache_scan(get("hf_cache") or "")
    return facts


def _name_cut_short(table: str) -> bool:
    # The table's name column holds ~20 characters ("NVIDIA RTX 6000 Ada Gene..."); GB10 fits.
    name = parsers.parse_nvidia_smi(table).name
    return name is not None and name.endswith("...")


async def probe_node(
    conn: NodeConnection,
    *,
    timeout: float = 30.0,
    docker: bool = True,
    dockers: ProbeDockers | None = None,
) -> NodeFacts:
    """Probe one connected node: every command at once, then Docker through the socket
    (through the client `dockers` keeps for the node, when given)."""
    results = await _run_all(conn, timeout)
    docker_host = results.get("docker_host")
    if isinstance(docker_host, RunResult) and docker_host.ok:
        conn.note_docker_host(docker_host.stdout)
    outputs: dict[str, str] = {}
    errors: list[str] = []
    for key, res in results.items():
        if isinstance(res, SparkError):
            if res.message not in errors:  # one failed session fails every section alike
                errors.append(res.message)
            continue
        if res.ok:
            outputs[key] = res.stdout
        else:
            note = _failed(key, _COMMANDS[key], res)
            if note and note not in errors:
                errors.append(note)
            if key == "hf_cache":
                outputs[key] = res.stdout  # partial output of a scan is still good
    if _name_cut_short(outputs.get("nvidia_smi", "")):
        # Rare (not a GB10): one more command, on the same connection, for the whole name.
        try:
            query = await conn.run(pc.NVIDIA_SMI_QUERY, timeout=timeout)
        except SparkError as exc:
            errors.append(exc.message)
        else:
            if query.ok:
                outputs["nvidia_smi_query"] = query.stdout
    try:
        facts = facts_from_outputs(conn.name, conn.address, outputs)
    except ValueError as exc:  # malformed JSON from `ip -j`: keep the rest
        errors.append(f"could not read the probe output: {exc}")
        facts = facts_from_outputs(conn.name, conn.address, {**outputs, "ip": ""})
    if facts.memory_total_bytes is None:
        errors.append("/proc/meminfo gave no MemTotal: node memory unknown")
    if docker:
        await _probe_docker(conn, facts, errors, dockers)
    facts.errors = errors
    return facts


class ProbeDockers:
    """The Docker client of each node that a session's probes keep between probes: a probe
    again asks the engine over the open client (its forward and HTTP connection) instead of
    a new client, a new connection and a /_ping each time, which were most of a probe's CPU
    on this side. A client that failed is dropped (the next probe opens one); a reconnected
    SSH connection is handled by the client itself. Close it before the connections."""

    def __init__(self) -> None:
        self._open: dict[str, RemoteDocker] = {}
        # One per node: two probes at once (a refresh during a launch's) share one client.
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, conn: NodeConnection) -> RemoteDocker:
        """The node's kept client (opened now if there is none for this connection)."""
        # Imported here: the headless paths that never probe must not import the Docker SDK.
        from spark_tui.remote.docker_remote import RemoteDocker

        async with self._locks.setdefault(conn.name, asyncio.Lock()):
            kept = self._open.get(conn.name)
            if kept is not None and kept.conn is conn:
                return kept
            if kept is not None:
                await self.drop(conn.name)
            docker = await RemoteDocker.open(conn)
            self._open[conn.name] = docker
            return docker

    async def drop(self, name: str) -> None:
        """Close and forget node `name`'s client."""
        docker = self._open.pop(name, None)
        if docker is not None:
            await docker.close()

    async def close(self) -> None:
        for name in list(self._open):
            await self.drop(name)


async def _probe_docker(
    conn: NodeConnection, facts: NodeFacts, errors: list[str], dockers: ProbeDockers | None
) -> None:
    from spark_tui.remote.docker_remote import RemoteDocker

    try:
        docker = await (dockers.get(conn) if dockers is not None else RemoteDocker.open(conn))
    except SparkError as exc:
        errors.append(f"{exc.message} ({exc.remedy})")
        return
    failed = False
    try:
        facts.docker_version = await docker.version()
        # Both asked at once: one round trip to the engine rather than two.
        images, containers = await asyncio.gather(
            docker.images(), docker.containers(labels=[CLUSTER_LABEL]), return_exceptions=True
        )
        for res in (images, containers):
            if isinstance(res, BaseException):
                raise res
        assert not isinstance(images, BaseException)
        assert not isinstance(containers, BaseException)
        facts.images, facts.containers = images, containers
    except SparkError as exc:
        failed = True
        errors.append(f"{exc.message} ({exc.remedy})")
    finally:
        if dockers is None:
            await docker.close()
        elif failed:
            await dockers.drop(conn.name)


def unreachable_facts(node: InventoryNode, error: SparkError) -> NodeFacts:
    """A node that could not be reached, as facts that say so (for partial probes)."""
    return NodeFacts(
        name=node.name, address=node.host, errors=[f"{error.message} (remedy: {error.remedy})"]
    )


async def probe_pool(
    pool: ConnectionPool,
    *,
    partial: bool = False,
    docker: bool = True,
    timeout: float = 30.0,
    dockers: ProbeDockers | None = None,
) -> list[NodeFacts]:
    """Probe every node of an opened pool (unreachable ones as facts with errors if partial);
    `dockers`: the Docker clients kept between the probes of a session."""
    reachable = pool.reachable
    probed = await asyncio.gather(
        *(probe_node(c, timeout=timeout, docker=docker, dockers=dockers) for c in reachable),
        return_exceptions=True,
    )
    by_name: dict[str, NodeFacts] = {}
    failures: list[SparkError] = list(pool.errors.values())
    for conn, res in zip(reachable, probed, strict=True):
        if isinstance(res, NodeFacts):
            by_name[conn.name] = res
        elif isinstance(res, SparkError):
            failures.append(res)
            by_name[conn.name] = unreachable_facts(conn.node, res)
        elif isinstance(res, BaseException):
            raise res
    if failures and not partial:
        raise combine_errors(failures, len(pool))
    for node in pool.nodes:
        if node.name not in by_name:
            by_name[node.name] = unreachable_facts(node, pool.errors[node.name])
    return [by_name[n.name] for n in pool.nodes]


async def probe_nodes(
    nodes: Sequence[InventoryNode],
    accept_new_host_keys: bool = False,
    confirm: HostKeyConfirm | None = None,
    *,
    partial: bool = False,
    docker: bool = True,
    **ssh_options: object,
) -> list[NodeFacts]:
    """Connect to every node at once and probe them all, in inventory (rank) order.

    A node that cannot be reached raises UnreachableError (exit 3) naming it and why,
    unless `partial`: then its entry carries the reason in `errors` and the others'
    facts come back complete.
    """
    pool = ConnectionPool(
        nodes, accept_new_host_keys=accept_new_host_keys, confirm=confirm, **ssh_options
    )
    try:
        await pool.open(partial=partial)
        return await probe_pool(pool, partial=partial, docker=docker)
    finally:
        await pool.close()
