"""Put the recipe's model (and its draft model) on every node: download once, copy node to node.

For each model: list every node's Hugging Face cache entry for it (the snapshot's files with
their sizes, links to blobs, partial `.incomplete` files, free disk). A node with a complete
snapshot is the source (the head first). When no node has one, the model is downloaded once:
on the head with the Hub's own CLI (`hf download`, else `huggingface-cli download`) when it
has one, else on the control machine with huggingface_hub and sent to the head. Offline
(`HF_HUB_OFFLINE=1`) refuses to download. Then every other node gets what it lacks from the
source over the ConnectX link: the source node itself runs `tail -c +OFFSET FILE | dd | ssh
PEER 'cat >> FILE.incomplete'`, so the bytes go node to node and never through the control
machine; a file already complete is skipped and a partial one resumes where it stopped.
When the source cannot SSH to the peer (no key, unknown host key), the bytes are relayed
through the control machine's two SSH connections instead, with a warning that says how to
let the nodes talk directly.

The cache layout stays the Hub's: blobs under `blobs/`, the snapshot's links to them, and
`refs/main` when the source's main is this revision. HF_TOKEN reaches a download only on
stdin (never in an argv `ps` can show, nor in an event).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from spark_tui.core.errors import SparkError, UnreachableError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.model_presence import FileCopy, ModelNeed, files_to_copy
from spark_tui.core.weight_files import UNUSED_PATTERNS
from spark_tui.ops.events import Emit, Notice, SyncDone, SyncFinished, SyncStep, SyncUpdate
from spark_tui.ops.transfer import RateMeter, relay
from spark_tui.remote.hub import DEFAULT_ENDPOINT, is_transport_error
from spark_tui.remote.parsers import index_shards, parse_df_b1
from spark_tui.remote.ssh import ConnectionPool, NodeConnection

_HUB = 'hub="${HF_HOME:-$HOME/.cache/huggingface}/hub"'

# $1 the repo's folder under hub/, $2 the revision (empty: refs/main; a prefix is resolved).
LIST_SCRIPT = (
    _HUB
    + r"""
r="$hub/$1"; rev="$2"; main=$(cat "$r/refs/main" 2>/dev/null)
[ -n "$rev" ] || rev="$main"
if [ -n "$rev" ] && [ ! -d "$r/snapshots/$rev" ]; then
  for d in "$r/snapshots/$rev"*; do [ -d "$d" ] && rev=${d##*/} && break; done
fi
s="$r/snapshots/$rev"
echo "--- rev"; echo "$rev"
echo "--- main"; echo "$main"
echo "--- links"
[ -n "$rev" ] && [ -d "$s" ] && find "$s" -mindepth 1 -type l -printf '%P\t%l\n'
echo "--- sizes"
[ -n "$rev" ] && [ -d "$s" ] && find -L "$s" -type f ! -name '*.incomplete' -printf '%s\t%P\n'
echo "--- partial"
[ -d "$r" ] && find "$r" -type f -name '*.incomplete' -printf '%s\t%P\n'
echo "--- free"
d="$hub"; while [ ! -d "$d" ]; do d=$(dirname "$d"); done; df -B1 "$d"
echo "--- index"
[ -f "$s/model.safetensors.index.json" ] && head -c 65536 "$s/model.safetensors.index.json"
exit 0
"""
)

# Runs on the receiving node, its stdin the file's bytes from the offset on.
# $1 partial path, $2 final path (under hub/), $3 full size, $4 link path or "", $5 link target.
RECEIVE_SCRIPT = (
    _HUB
    + r"""
set -e
p="$hub/$1"; f="$hub/$2"
mkdir -p "$(dirname "$p")"
cat >> "$p"
got=$(stat -c %s "$p")
if [ "$got" != "$3" ]; then echo "received $got of $3 bytes" >&2; exit 75; fi
mv -f "$p" "$f"
if [ -n "$4" ]; then mkdir -p "$(dirname "$hub/$4")"; ln -sfn "$5" "$hub/$4"; fi
"""
)

# Runs on the sending node: $1 user@peer, $2 port, $3 the file under hub/, $4 the offset,
# $5 the receiving command. No process more in the pipe (progress is read on the receiver).
SEND_SCRIPT = (
    _HUB
    + r"""
tail -c +"$(($4 + 1))" "$hub/$3" | ssh -o BatchMode=yes -o ConnectTimeout=30 -p "$2" "$1" "$5"
"""
)
# The size of a file under hub/ (0 when absent): the receiver's partial file, for progress.
SIZE_SCRIPT = _HUB + '\nstat -c %s "$hub/$1" 2>/dev/null || echo 0'


# Can this node SSH to $1 (user@peer) on port $2 without a password?
PEER_CHECK = 'ssh -o BatchMode=yes -o ConnectTimeout=20 -p "$2" "$1" true'

# Sends one file's bytes from the offset on to stdout (the relay through the control machine).
READ_SCRIPT = _HUB + '\nexec tail -c +"$(($2 + 1))" "$hub/$1"'

# $1 the repo's folder, $2 the revision: writes refs/main.
REFS_SCRIPT = _HUB + '\nmkdir -p "$hub/$1/refs" && printf %s "$2" > "$hub/$1/refs/main"'

# The Hub's CLI on a node: $1 repo, $2 revision (may be empty), $3 HF_ENDPOINT (may be empty),
# then the files to fetch (or `--exclude PATTERN...`); the token, when any, is the first line
# of stdin.
DOWNLOAD_SCRIPT = r"""IFS= read -r tok || true
if [ -n "$tok" ]; then export HF_TOKEN="$tok"; fi; unset tok
if [ -n "$3" ]; then export HF_ENDPOINT="$3"; fi
repo=$1 rev=$2; shift 3
if command -v hf >/dev/null 2>&1; then exec hf download "$repo" ${rev:+--revision "$rev"} "$@"; fi
if command -v huggingface-cli >/dev/null 2>&1; then
    exec huggingface-cli download "$repo" ${rev:+--revision "$rev"} "$@"
fi
exit 127
"""
HAS_HUB_CLI = "command -v hf >/dev/null 2>&1 || command -v huggingface-cli >/dev/null 2>&1"

DD_BYTES = re.compile(rb"(?:^|[\r\n])(\d+) bytes")
_REVISION = re.compile(r"^[A-Za-z0-9._-]+$")
_CHUNK = 1 << 20


def sh(script: str, *args: str) -> str:
    """`sh -c SCRIPT sh ARGS...` with every value quoted: nothing a user typed is parsed."""
    return shlex.join(["sh", "-c", script, "sh", *args])


def repo_folder(repo_id: str) -> str:
    """The Hub cache's folder of a model repo: `models--ORG--NAME`."""
    return "models--" + repo_id.replace("/", "--")


def offline(env: Mapping[str, str]) -> bool:
    return str(env.get("HF_HUB_OFFLINE", "")).strip().lower() in ("1", "true", "yes", "on")


@dataclass
class Listing:
    """One node's cache entry for one model, as LIST_SCRIPT printed it."""

    revision: str | None = None
    main: str | None = None
    links: dict[str, str] = field(default_factory=dict)  # snapshot path -> link target
    sizes: dict[str, int] = field(default_factory=dict)  # snapshot path -> size (content there)
    partial: dict[str, int] = field(default_factory=dict)  # path under the repo -> size
    free_bytes: int | None = None
    shards: list[str] = field(default_factory=list)

    @property
    def dangling(self) -> list[str]:
        """Links whose blob is not (completely) there."""
        return sorted(p for p in self.links if p not in self.sizes)

    @property
    def complete(self) -> bool:
        """A snapshot with content, every link resolved and every indexed shard there."""
        return (
            bool(self.revision and self.sizes)
            and not self.dangling
            and all(s in self.sizes for s in self.shards)
        )

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())


def parse_listing(text: str) -> Listing:
    """Parse what LIST_SCRIPT printed."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("--- "):
            current = sections.setdefault(line[4:].strip(), [])
        elif current is not None:
            current.append(line)

    def first(name: str) -> str | None:
        lines = [ln.strip() for ln in sections.get(name, []) if ln.strip()]
        return lines[0] if lines else None

    def pairs(name: str) -> list[tuple[str, str]]:
        out = []
        for ln in sections.get(name, []):
            a, sep, b = ln.partition("\t")
            if sep:
                out.append((a, b))
        return out

    listing = Listing(revision=first("rev"), main=first("main"))
    listing.links = dict(pairs("links"))
    listing.sizes = {p: int(s) for s, p in pairs("sizes") if s.isdigit()}
    listing.partial = {p: int(s) for s, p in pairs("partial") if s.isdigit()}
    listing.free_bytes = parse_df_b1("\n".join(sections.get("free", [])))
    listing.shards = index_shards("\n".join(sections.get("index", [])))
    return listing


@dataclass(frozen=True)
class Placement:
    """Where one snapshot file goes on a receiving node (paths under hub/)."""

    final: str
    partial: str
    link: str  # "" for a plain file in the snapshot
    target: str


def placement(folder: str, revision: str, path: str, link_target: str | None) -> Placement:
    """The blob (or plain file) a snapshot file's content goes to, and the link to it."""
    snap = f"{folder}/snapshots/{revision}/{path}"
    if link_target:
        blob = posixpath.normpath(posixpath.join(posixpath.dirname(snap), link_target))
        if blob.startswith(f"{folder}/blobs/") and ".." not in blob.split("/"):
            return Placement(blob, blob + ".incomplete", snap, link_target)
    return Placement(snap, snap + ".incomplete", "", "")


def plan_copy(source: Listing, dest: Listing, folder: str) -> list[tuple[FileCopy, Placement]]:
    """Each file the receiving node lacks, with where it goes and the offset to resume at."""
    assert source.revision
    placed = {p: placement(folder, source.revision, p, source.links.get(p)) for p in source.sizes}
    have = dest.sizes if dest.revision == source.revision else {}
    prefix = folder + "/"
    partial = {
        p: dest.partial[pl.partial.removeprefix(prefix)]
        for p, pl in placed.items()
        if pl.partial.removeprefix(prefix) in dest.partial
    }
    return [(fc, placed[fc.path]) for fc in files_to_copy(source.sizes, have, partial)]


class SyncFailed(SparkError):
    """A model could not be put on a node; the message names it and the remedy says how."""


@dataclass
class ModelSync:
    """One run of `models sync` over an opened pool (nodes in rank order; the first is the head).

    `facts` are the nodes' probe facts (for their ConnectX addresses); `env` the control
    machine's environment (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE); `recipe_name` and `where`
    go into remedies.
    """

    pool: ConnectionPool
    facts: Sequence[NodeFacts]
    recipe_name: str
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    where: str = "--inventory FILE"
    local_cache: Path | None = None  # where a control-machine download goes (None: HF default)
    peer_port: int = 22
    relay: bool | None = None  # None: node to node when the nodes can SSH to each other
    progress_interval: float = 1.0
    _emit: Emit[SyncUpdate] | None = field(default=None, init=False, repr=False)  # see run
    _wanted: dict[ModelNeed, tuple[str, list[str]]] = field(default_factory=dict)

    # --- the run ------------------------------------------------------------------------

    async def run(self, needs: Sequence[ModelNeed], emit: Emit[SyncUpdate]) -> bool:
        """Sync every model in `needs`, each event to `emit` as it happens, SyncFinished
        last; True when every model is complete on every node."""
        self._emit = emit
        failed = await self._all(needs)
        emit(
            SyncFinished(
                ok=not failed,
                items=tuple(n.repo_id for n in needs),
                failed_nodes=tuple(sorted(failed)),
            )
        )
        return not failed

    def emit(self, event: SyncUpdate) -> None:
        assert self._emit is not None, "a sync emits while it runs"
        self._emit(event)

    async def _all(self, needs: Sequence[ModelNeed]) -> set[str]:
        failed: set[str] = set()
        for need in needs:
            try:
                failed |= await self._one(need)
            except SparkError as exc:
                self.emit(Notice("error", f"{need.repo_id}: {exc.message}", exc.remedy))
                failed.add(self.pool.nodes[0].name)
        return failed

    @property
    def _conns(self) -> list[NodeConnection]:
        return [self.pool[n.name] for n in self.pool.nodes]

    async def list_node(self, conn: NodeConnection, need: ModelNeed, rev: str | None) -> Listing:
        res = await conn.run(sh(LIST_SCRIPT, repo_folder(need.repo_id), rev or ""), timeout=120)
        if not res.ok:
            raise UnreachableError(
                f"{conn.name}: listing its cache failed: {res.stderr.strip()[:200]}",
                "check the node's Hugging Face cache folder and its disk",
            )
        return parse_listing(res.stdout)

    async def _one(self, need: ModelNeed) -> set[str]:
        if need.revision and not _REVISION.match(need.revision):
            raise SyncFailed(
                f"revision {need.revision!r} is not a branch, tag or commit name",
                "fix `model_revision` in the recipe",
            )
        conns = self._conns
        item = need.repo_id
        listings = list(
            await asyncio.gather(*(self.list_node(c, need, need.revision) for c in conns))
        )
        source = next((i for i, lst in enumerate(listings) if lst.complete), None)
        if source is None:
            got = await self._download(need, conns[0])
            listings[0] = await self.list_node(conns[0], need, got or need.revision)
            if not listings[0].complete:
                raise SyncFailed(
                    f"the download on {conns[0].name} left an incomplete snapshot "
                    f"({', '.join(listings[0].dangling[:3]) or 'no files'})",
                    "run `models sync` again: it resumes",
                )
            source = 0
        src = listings[source]
        rev = src.revision
        assert rev
        # Every node at the source's revision (a branch name resolves to the source's commit).
        if need.revision != rev:
            listings = [
                src if i == source else await self.list_node(c, need, rev)
                for i, c in enumerate(conns)
            ]
        self.emit(
            SyncStep(
                conns[source].name,
                item,
                "check",
                f"{conns[source].name} has {item} at {rev[:12]} complete "
                f"({len(src.sizes)} files, {src.total_bytes / 1e9:.2f} GB): the source",
            )
        )
        failed: set[str] = set()
        for i, conn in enumerate(conns):
            if i == source:
                continue
            try:
                await self._to_node(need, conns[source], src, conn, listings[i])
            except SparkError as exc:
                self.emit(Notice("error", f"{conn.name}: {item}: {exc.message}", exc.remedy))
                failed.add(conn.name)
        return failed

    # --- download -----------------------------------------------------------------------

    async def _download(self, need: ModelNeed, head: NodeConnection) -> str | None:
        """Download the model onto the head; the revision it got (None: the head's main)."""
        item = need.repo_id
        if offline(self.env):
            raise SyncFailed(
                f"no node has {item} complete and HF_HUB_OFFLINE is set: nothing is downloaded",
                "unset HF_HUB_OFFLINE to download it once, or put a complete copy on one node "
                f"and run `spark-tui models sync {self.recipe_name} {self.where}` again",
            )
        has_cli = (await head.run(sh(HAS_HUB_CLI), timeout=30)).ok
        if has_cli:
            self.emit(SyncStep(head.name, item, "download", f"downloading {item} on {head.name}"))
            if await self._download_on_node(need, head):
                return None
            self.emit(
                Notice(
                    "warning",
                    f"the download on {head.name} failed; downloading on this machine instead",
                    "check the node's access to the Hub (HF_ENDPOINT, proxy, HF_TOKEN)",
                )
            )
        else:
            self.emit(
                SyncStep(
                    head.name,
                    item,
                    "download",
                    f"{head.name} has no Hub CLI (hf): downloading {item} on this machine, "
                    f"then sending it to {head.name}",
                )
            )
        return await self._download_here_and_send(need, head)

    async def _download_on_node(self, need: ModelNeed, head: NodeConnection) -> bool:
        token = self.env.get("HF_TOKEN", "")
        endpoint = self.env.get("HF_ENDPOINT", "")
        # The node fetches only what vLLM reads: the file list comes from here when this
        # machine reaches the Hub; else the node skips what vLLM never reads.
        try:
            _, names = await asyncio.to_thread(self._wanted_files, need)
            which = list(names)
        except Exception:  # any failure here: the node's own download decides
            which = ["--exclude", *UNUSED_PATTERNS]
        cmd = sh(DOWNLOAD_SCRIPT, need.repo_id, need.revision or "", endpoint, *which)
        await head.ensure_connected()
        proc = await head.connection.create_process(cmd, encoding="utf-8", errors="replace")
        proc.stdin.write(token + "\n")  # the token goes on stdin, never in the argv
        proc.stdin.write_eof()
        poll = asyncio.create_task(self._watch_download(need, head))
        try:
            result = await proc.wait()
        finally:
            poll.cancel()
            await asyncio.gather(poll, return_exceptions=True)
        if result.exit_status != 0:
            lines = [ln for ln in str(result.stderr or "").splitlines() if ln.strip()][-3:]
            self.emit(Notice("warning", f"{head.name}: `hf download` failed: {' / '.join(lines)}"))
            return False
        return True

    async def _watch_download(self, need: ModelNeed, head: NodeConnection) -> None:
        meter = RateMeter(None)
        while True:
            await asyncio.sleep(2.0)
            try:
                lst = await self.list_node(head, need, need.revision)
            except SparkError:
                continue
            done = lst.total_bytes + sum(lst.partial.values())
            self.emit(meter.progress(head.name, need.repo_id, "download", done))

    async def _download_here_and_send(self, need: ModelNeed, head: NodeConnection) -> str | None:
        snapshot = await asyncio.to_thread(self._snapshot_download, need)
        self.emit(SyncStep("(this machine)", need.repo_id, "download", f"downloaded: {snapshot}"))
        local = local_listing(snapshot)
        if need.revision in (None, "main"):
            local.main = local.revision  # the head's main is what was downloaded
        dest = await self.list_node(head, need, local.revision)
        await self._send(need, None, local, head, dest, from_dir=snapshot)
        return local.revision

    def _wanted_files(self, need: ModelNeed) -> tuple[str, list[str]]:
        """The commit the revision names and the files of it vLLM reads (the Hub's file
        list, the safetensors index read first: see core.weight_files)."""
        from huggingface_hub import HfApi, hf_hub_download

        from spark_tui.core.weight_files import INDEX, files_vllm_reads

        if need in self._wanted:  # asked once per sync (the head's download, then here)
            return self._wanted[need]
        token = self.env.get("HF_TOKEN") or None
        endpoint = self.env.get("HF_ENDPOINT") or None
        info = HfApi(endpoint=endpoint, token=token).model_info(
            need.repo_id, revision=need.revision
        )
        if not info.sha:
            raise OSError(f"the Hub gave no commit for {need.repo_id}")
        names = [s.rfilename for s in info.siblings or [] if s.rfilename]
        weight_map: set[str] | None = None
        if INDEX in names:
            index = hf_hub_download(
                need.repo_id,
                INDEX,
                revision=info.sha,
                cache_dir=self.local_cache,
                token=token,
                endpoint=endpoint,
            )
            weight_map = set(index_shards(Path(index).read_text(encoding="utf-8"))) or None
        self._wanted[need] = (info.sha, files_vllm_reads(names, weight_map, need.load_format))
        return self._wanted[need]

    def _snapshot_download(self, need: ModelNeed) -> Path:
        # Imported here: only a download needs it.
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError

        token = self.env.get("HF_TOKEN") or None
        endpoint = self.env.get("HF_ENDPOINT") or None
        try:
            # The files vLLM reads, each by the Hub's own download (resumable, verified,
            # into the Hub cache layout).
            sha, names = self._wanted_files(need)
            path = ""
            for name in names:
                path = hf_hub_download(
                    need.repo_id,
                    name,
                    revision=sha,
                    cache_dir=self.local_cache,
                    token=token,
                    endpoint=endpoint,
                )
            if not path:
                raise SyncFailed(f"the Hub lists no files for {need.repo_id}", "check the model id")
            snapshot = Path(path)
            for _ in names[-1].split("/"):
                snapshot = snapshot.parent
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            raise SyncFailed(
                f"the Hub refused {need.repo_id} (HTTP {status})",
                "for a gated model accept its terms on the Hub and set HF_TOKEN; check the "
                "model id and `model_revision`",
            ) from None
        except (OSError, ValueError) as exc:
            raise SyncFailed(
                f"downloading {need.repo_id} failed: {exc}",
                "check this machine's network access to the Hub (HF_ENDPOINT, proxy)",
            ) from None
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            # Only the error's kind: its text may quote the request (and so the token).
            raise SyncFailed(
                f"could not reach the Hub at {endpoint or DEFAULT_ENDPOINT} "
                f"({type(exc).__name__}): no node has it complete and nothing was downloaded",
                "check this machine's network access to the Hub (HF_ENDPOINT, proxy), then run "
                f"`spark-tui models sync {self.recipe_name} {self.where}` again; or put a "
                "complete copy on one node and sync from it",
            ) from None
        return snapshot

    # --- copy ---------------------------------------------------------------------------

    def _peer(self, conn: NodeConnection) -> tuple[str, str]:
        """(user@address on the ConnectX link, where it came from) of a receiving node."""
        facts = next((f for f in self.facts if f.name == conn.name), None)
        address = facts.cluster_address if facts else None
        how = "ConnectX link"
        if not address:
            address, how = conn.address, "its SSH address (no ConnectX address in its probe)"
        user = conn.username or conn.node.user
        return (f"{user}@{address}" if user else address), how

    async def _can_reach(self, src: NodeConnection, peer: str) -> bool:
        res = await src.run(sh(PEER_CHECK, peer, str(self.peer_port)), timeout=30)
        return res.ok

    async def _to_node(
        self,
        need: ModelNeed,
        src_conn: NodeConnection,
        src: Listing,
        conn: NodeConnection,
        dest: Listing,
    ) -> None:
        item = need.repo_id
        plan = plan_copy(src, dest, repo_folder(item))
        if not plan and src.revision == dest.revision and dest.complete:
            self.emit(SyncDone(conn.name, item, 0, len(src.sizes), ""))
            return
        await self._send(need, src_conn, src, conn, dest)

    async def _send(
        self,
        need: ModelNeed,
        src_conn: NodeConnection | None,
        src: Listing,
        conn: NodeConnection,
        dest: Listing,
        *,
        from_dir: Path | None = None,
    ) -> None:
        item = need.repo_id
        folder = repo_folder(item)
        plan = plan_copy(src, dest, folder)
        remaining = sum(fc.remaining for fc, _ in plan)
        if dest.free_bytes is not None and dest.free_bytes < remaining:
            raise SyncFailed(
                f"{remaining / 1e9:.2f} GB to receive, {dest.free_bytes / 1e9:.2f} GB free",
                f"free disk on {conn.name} where its Hugging Face cache is, then run "
                f"`spark-tui models sync {self.recipe_name} {self.where}` again",
            )
        src_name = src_conn.name if src_conn else "(this machine)"
        rev = src.revision
        assert rev
        direct = False
        peer, how_msg = "", ""
        if src_conn is not None:
            peer, how = self._peer(conn)
            how_msg = f"over {how} ({peer})"
            direct = self.relay is not True and await self._can_reach(src_conn, peer)
            if not direct:
                self.emit(
                    Notice(
                        "warning",
                        f"{src_conn.name} cannot SSH to {conn.name} ({peer}): relaying the "
                        "copy through this machine (slower)",
                        f"let {src_conn.name} SSH to {peer} without a password (put its public "
                        f"key in {conn.name}'s authorized_keys and its host key in "
                        f"{src_conn.name}'s known_hosts), so copies go node to node",
                    )
                )
        skipped = len(src.sizes) - len(plan)
        route = how_msg if direct else "through this machine"
        resumed = sum(1 for fc, _ in plan if fc.offset)
        self.emit(
            SyncStep(
                conn.name,
                item,
                "copy",
                f"{src_name} -> {conn.name} {route}: {len(plan)} file(s), "
                f"{remaining / 1e9:.2f} GB ({skipped} complete, skipped; {resumed} resumed)",
            )
        )
        meter = RateMeter(remaining)
        started = time.monotonic()
        sent = 0
        for fc, pl in plan:
            receive = sh(RECEIVE_SCRIPT, pl.partial, pl.final, str(fc.size), pl.link, pl.target)

            def report(n: int, base: int = sent) -> None:
                self.emit(meter.progress(conn.name, item, "copy", base + n))

            if direct and src_conn is not None:
                await self._send_direct(
                    src_conn, peer, fc, folder, rev, receive, report, conn, pl.partial
                )
            else:
                await self._send_relayed(src_conn, fc, folder, rev, conn, receive, report, from_dir)
            # The file is complete: say so (its last partial report may be short of it).
            report(fc.remaining)
            sent += fc.remaining
        if src.main == src.revision and src.revision:
            await conn.run(sh(REFS_SCRIPT, folder, src.revision), timeout=30)
        after = await self.list_node(conn, need, src.revision)
        wrong = [p for p, s in src.sizes.items() if after.sizes.get(p) != s]
        if wrong:
            raise SyncFailed(
                f"after the copy {len(wrong)} file(s) differ from {src_name}'s: "
                f"{', '.join(wrong[:3])}",
                f"run `spark-tui models sync {self.recipe_name} {self.where}` again: it resumes",
            )
        self.emit(SyncDone(conn.name, item, sent, skipped, src_name, time.monotonic() - started))

    async def _send_direct(
        self,
        src_conn: NodeConnection,
        peer: str,
        fc: FileCopy,
        folder: str,
        rev: str,
        receive: str,
        report: Callable[[int], None],
        dest: NodeConnection,
        partial: str,
    ) -> None:
        path = _source_path(folder, rev, fc)
        cmd = sh(SEND_SCRIPT, peer, str(self.peer_port), path, str(fc.offset), receive)
        await src_conn.ensure_connected()
        # On a terminal: closing the channel (a cancelled sync) ends the pipeline on the node
        # (OpenSSH ignores signals in root sessions); the terminal also carries its errors.
        proc = await src_conn.connection.create_process(cmd, encoding=None, term_type="dumb")
        watch = asyncio.create_task(self._watch_partial(dest, partial, fc.offset, report))
        errors = b""
        try:
            while chunk := await proc.stdout.read(4096):
                errors = (errors + chunk)[-2048:]
            result = await proc.wait()
        except BaseException as exc:
            proc.close()
            if not isinstance(exc, asyncssh.Error | OSError):
                raise
            raise SyncFailed(
                f"the connection to {src_conn.name} broke off while it sent {fc.path}: {exc}",
                f"run `spark-tui models sync {self.recipe_name} {self.where}` again: it resumes",
            ) from None
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        if result.exit_status != 0:
            raise SyncFailed(
                f"sending {fc.path} from {src_conn.name} failed (exit {result.exit_status}): "
                f"{last_error(errors)}",
                f"run `spark-tui models sync {self.recipe_name} {self.where}` again: it resumes",
            )

    async def _watch_partial(
        self, dest: NodeConnection, partial: str, offset: int, report: Callable[[int], None]
    ) -> None:
        """Report the receiver's partial file growing, once a second, while a copy runs."""
        while True:
            await asyncio.sleep(self.progress_interval)
            try:
                res = await dest.run(sh(SIZE_SCRIPT, partial), timeout=10)
            except SparkError:
                continue
            size = res.stdout.strip()
            if size.isdigit() and int(size) > offset:
                report(int(size) - offset)

    async def _send_relayed(
        self,
        src_conn: NodeConnection | None,
        fc: FileCopy,
        folder: str,
        rev: str,
        conn: NodeConnection,
        receive: str,
        report: Callable[[int], None],
        from_dir: Path | None,
    ) -> None:
        await conn.ensure_connected()
        sink = await conn.connection.create_process(receive, encoding=None)
        reader: Any = None
        try:
            if src_conn is None:
                assert from_dir is not None
                reader = (from_dir / fc.path).open("rb")
                reader.seek(fc.offset)
                await relay(lambda: asyncio.to_thread(reader.read, _CHUNK), sink, report)
            else:
                await src_conn.ensure_connected()
                cmd = sh(READ_SCRIPT, _source_path(folder, rev, fc), str(fc.offset))
                reader = await src_conn.connection.create_process(cmd, encoding=None)
                await relay(lambda: reader.stdout.read(_CHUNK), sink, report)
            sink.stdin.write_eof()
            result = await sink.wait()
        except BaseException as exc:
            sink.close()
            if not isinstance(exc, asyncssh.Error | OSError):
                raise
            raise SyncFailed(
                f"relaying {fc.path} to {conn.name} broke off: {exc}",
                f"run `spark-tui models sync {self.recipe_name} {self.where}` again: it resumes",
            ) from None
        finally:
            if hasattr(reader, "close"):
                reader.close()
        if result.exit_status != 0:
            raise SyncFailed(
                f"{conn.name} did not take {fc.path}: {last_error(result.stderr or b'')}",
                f"run `spark-tui models sync {self.recipe_name} {self.where}` again: it resumes",
            )


def _source_path(folder: str, rev: str, fc: FileCopy) -> str:
    """The sending node's snapshot file, under hub/ (its link leads to the blob)."""
    return f"{folder}/snapshots/{rev}/{fc.path}"


def last_error(data: bytes | str) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    lines = [
        ln.strip()
        for ln in re.split(r"[\r\n]+", text)
        if ln.strip() and not re.match(r"^\d+ bytes|^\d+\+\d+ records", ln.strip())
    ]
    return lines[-1] if lines else "no message"


def local_listing(snapshot: Path) -> Listing:
    """A Listing of a snapshot on this machine (after a control-machine download)."""
    lst = Listing(revision=snapshot.name, main=None)
    for p in sorted(snapshot.rglob("*")):
        rel = p.relative_to(snapshot).as_posix()
        if p.is_symlink():
            lst.links[rel] = os.readlink(p)
        if p.is_file():
            lst.sizes[rel] = p.stat().st_size
    refs = snapshot.parent.parent / "refs" / "main"
    if refs.is_file():
        lst.main = refs.read_text().strip()
    index = snapshot / "model.safetensors.index.json"
    if index.is_file():
        lst.shards = index_shards(index.read_text()[:65536])
    return lst
