"""Put the recipe's image on every node, with the same image ID as the head's.

The head's image is the reference (an image only built there counts as well); when no node
has it, the head pulls it. A node without it, or with another ID, pulls it when the image
came from a registry (it has a repo digest) and the pull gives the same ID; otherwise, or
when no registry answers, it gets the image from a node that has it: that node runs
`docker save REF | dd | ssh PEER docker load`, node to node over the ConnectX link. When it
cannot SSH to the peer, the stream is relayed through the control machine, with a warning.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import asyncssh

from spark_tui.core.errors import SparkError
from spark_tui.core.facts import NodeFacts
from spark_tui.ops.events import Emit, Notice, SyncDone, SyncFinished, SyncStep, SyncUpdate
from spark_tui.ops.model_sync import DD_BYTES, PEER_CHECK, last_error, sh
from spark_tui.ops.transfer import RateMeter, relay
from spark_tui.remote.ssh import ConnectionPool, NodeConnection

# $1 the image: "ID SIZE DIGEST..." (nothing when the node does not have it).
INSPECT = "docker image inspect --format '{{.Id}} {{.Size}} {{range .RepoDigests}}{{.}} {{end}}' \"$1\" 2>/dev/null || true"
PULL = 'docker pull -q "$1"'
# $1 image, $2 user@peer, $3 port: the image streamed node to node.
SAVE_TO_PEER = (
    'docker save "$1" | dd bs=1M status=progress | '
    'ssh -o BatchMode=yes -o ConnectTimeout=30 -p "$3" "$2" docker load'
)
SAVE = 'exec docker save "$1"'
LOAD = "docker load"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageState:
    """One node's copy of the image: its ID (None: absent), size and repo digests."""

    id: str | None
    size: int | None = None
    digests: tuple[str, ...] = ()


def parse_inspect(text: str) -> ImageState:
    words = text.split()
    if not words or not words[0].startswith("sha256:"):
        return ImageState(None)
    size = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
    return ImageState(words[0], size, tuple(words[2:]))


class ImageSyncFailed(SparkError):
    """The image could not be put on a node; the message names it, the remedy says how."""


@dataclass
class ImageSync:
    """One image sync over an opened pool (rank order; the first node is the head)."""

    pool: ConnectionPool
    facts: Sequence[NodeFacts]
    image: str
    peer_port: int = 22
    pull_timeout: float = 600.0
    relay: bool | None = None  # None: node to node when the nodes can SSH to each other
    _emit: Emit[SyncUpdate] | None = field(default=None, init=False, repr=False)  # see run

    async def run(self, emit: Emit[SyncUpdate]) -> bool:
        """Sync the image, each event to `emit` as it happens, SyncFinished last; True when
        every node has the head's image."""
        self._emit = emit
        failed = await self._all()
        emit(SyncFinished(not failed, (self.image,), tuple(sorted(failed))))
        return not failed

    def emit(self, event: SyncUpdate) -> None:
        assert self._emit is not None, "a sync emits while it runs"
        self._emit(event)

    async def inspect(self, conn: NodeConnection) -> ImageState:
        res = await conn.run(sh(INSPECT, self.image), timeout=60)
        return parse_inspect(res.stdout)

    async def _pull(self, conn: NodeConnection) -> bool:
        self.emit(SyncStep(conn.name, self.image, "pull", f"pulling {self.image}"))
        try:
            res = await conn.run(sh(PULL, self.image), timeout=self.pull_timeout)
        except SparkError as exc:
            res_text = exc.message
            ok = False
        else:
            ok, res_text = res.ok, last_error(res.stderr or res.stdout)
        if not ok:
            self.emit(Notice("info", f"{conn.name}: no registry gave {self.image}: {res_text}"))
        return ok

    async def _all(self) -> set[str]:
        conns = [self.pool[n.name] for n in self.pool.nodes]
        states = list(await asyncio.gather(*(self.inspect(c) for c in conns)))
        source = 0 if states[0].id else next((i for i, s in enumerate(states) if s.id), None)
        if source is None:
            if await self._pull(conns[0]):
                states[0] = await self.inspect(conns[0])
            if not states[0].id:
                self.emit(
                    Notice(
                        "error",
                        f"no node has {self.image} and {conns[0].name} could not pull it",
                        f"build or load the image on {conns[0].name} (`docker load`, `docker "
                        "build`), or make its registry reachable, then sync again",
                    )
                )
                return {c.name for c in conns}
            source = 0
        ref = states[source]
        self.emit(
            SyncStep(
                conns[source].name,
                self.image,
                "check",
                f"{conns[source].name} has {self.image} ({str(ref.id)[7:19]}): the reference",
            )
        )
        failed: set[str] = set()
        for i, conn in enumerate(conns):
            if i == source:
                continue
            have = states[i].id
            if have == ref.id:
                self.emit(SyncDone(conn.name, self.image, 0, 1, ""))
                continue
            if have:
                self.emit(
                    Notice(
                        "warning",
                        f"{conn.name} has another {self.image} ({have[7:19]}, the "
                        f"reference is {str(ref.id)[7:19]}): replacing it",
                    )
                )
            try:
                await self._to_node(conns[source], ref, conn)
            except SparkError as exc:
                self.emit(Notice("error", f"{conn.name}: {exc.message}", exc.remedy))
                failed.add(conn.name)
        return failed

    async def _to_node(self, src: NodeConnection, ref: ImageState, conn: NodeConnection) -> None:
        started = time.monotonic()
        if ref.digests and await self._pull(conn):
            if (await self.inspect(conn)).id == ref.id:
                self.emit(SyncDone(conn.name, self.image, 0, 0, "registry"))
                return
        facts = next((f for f in self.facts if f.name == conn.name), None)
        address = (facts.cluster_address if facts else None) or conn.address
        user = conn.username or conn.node.user
        peer = f"{user}@{address}" if user else address
        direct = (
            self.relay is not True
            and (await src.run(sh(PEER_CHECK, peer, str(self.peer_port)), timeout=30)).ok
        )
        route = f"over the link ({peer})" if direct else "through this machine"
        if not direct:
            self.emit(
                Notice(
                    "warning",
                    f"{src.name} cannot SSH to {conn.name} ({peer}): relaying the image "
                    "through this machine (slower)",
                    f"let {src.name} SSH to {peer} without a password, so images and models "
                    "go node to node",
                )
            )
        self.emit(
            SyncStep(
                conn.name,
                self.image,
                "copy",
                f"{src.name} -> {conn.name} {route}: docker save | docker load "
                f"({(ref.size or 0) / 1e9:.2f} GB unpacked)",
            )
        )
        meter = RateMeter(ref.size)

        def report(n: int) -> None:
            self.emit(meter.progress(conn.name, self.image, "copy", n))

        if direct:
            sent = await self._direct(src, peer, report)
        else:
            sent = await self._relayed(src, conn, report)
        got = await self.inspect(conn)
        if got.id != ref.id:
            raise ImageSyncFailed(
                f"after docker load the image ID is {got.id or 'missing'}, not {ref.id}",
                f"check `docker load` on {conn.name} (disk, dockerd log), then sync again",
            )
        self.emit(SyncDone(conn.name, self.image, sent, 0, src.name, time.monotonic() - started))

    async def _direct(self, src: NodeConnection, peer: str, report: Callable[[int], None]) -> int:
        await src.ensure_connected()
        cmd = sh(SAVE_TO_PEER, self.image, peer, str(self.peer_port))
        # On a terminal, so closing the channel ends the pipeline (see model_sync).
        proc = await src.connection.create_process(cmd, encoding=None, term_type="dumb")
        tail, errors, sent = b"", b"", 0
        try:
            while chunk := await proc.stdout.read(4096):
                tail = (tail + chunk)[-256:]
                for m in DD_BYTES.finditer(tail):
                    sent = int(m.group(1))
                    report(sent)
                errors = (errors + chunk)[-2048:]
                tail = tail[-64:]
        except BaseException:
            proc.close()
            raise
        result = await proc.wait()
        if result.exit_status != 0:
            raise ImageSyncFailed(
                f"docker save | docker load from {src.name} failed: {last_error(errors)}",
                "check disk and dockerd on both nodes, then sync again",
            )
        return sent

    async def _relayed(
        self, src: NodeConnection, conn: NodeConnection, report: Callable[[int], None]
    ) -> int:
        await src.ensure_connected()
        await conn.ensure_connected()
        sink = await conn.connection.create_process(LOAD, encoding=None)
        reader = await src.connection.create_process(sh(SAVE, self.image), encoding=None)
        try:
            sent = await relay(lambda: reader.stdout.read(_CHUNK), sink, report)
            sink.stdin.write_eof()
            result = await sink.wait()
        except BaseException as exc:
            sink.close()
            reader.close()
            if not isinstance(exc, asyncssh.Error | OSError):
                raise
            raise ImageSyncFailed(f"relaying {self.image} broke off: {exc}", "sync again") from None
        if result.exit_status != 0:
            raise ImageSyncFailed(
                f"docker load on {conn.name} failed: {last_error(result.stderr or b'')}",
                f"check disk and dockerd on {conn.name}, then sync again",
            )
        return sent
