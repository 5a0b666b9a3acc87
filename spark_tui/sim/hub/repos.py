"""SIMULATED Hub repositories: files per commit, named refs, gated access.

A shard is a `SafetensorsFile`: a real safetensors header (8-byte length, JSON with dtype,
shape and offsets per tensor) followed by zero bytes, generated on read so a shard of tens
of GiB costs nothing until a client asks for a range of it.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from spark_tui.sim.engine import catalogue

CHUNK = 1 << 20
_DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1, "I8": 1}


@dataclass(frozen=True)
class SafetensorsFile:
    """A shard of exactly `size` bytes holding `tensors` (names) of one dtype, zero-filled."""

    tensors: tuple[str, ...]
    size: int
    dtype: str = "BF16"

    def header(self) -> bytes:
        """The 8-byte length and the JSON header, padded with spaces as the format allows."""
        width = _DTYPE_BYTES[self.dtype]
        names = self.tensors or ("weight",)
        # Size the header for the largest offsets first, then fill in the real ones.
        budget = len(self._json(names, width, self.size)) + 8
        budget += (self.size - 8 - budget) % width  # data a whole number of elements
        data = self.size - 8 - budget
        if data < 0:
            raise ValueError(f"a shard of {self.size} bytes cannot hold {len(names)} tensors")
        text = self._json(names, width, data)
        return struct.pack("<Q", budget) + text.ljust(budget).encode()

    @staticmethod
    def _json(names: tuple[str, ...], width: int, data: int) -> str:
        elements = data // width
        each, extra = divmod(elements, len(names))
        doc: dict[str, object] = {"__metadata__": {"format": "pt"}}
        start = 0
        dtype = {1: "U8", 2: "BF16", 4: "F32"}[width]
        for i, name in enumerate(names):
            n = each + (extra if i == len(names) - 1 else 0)
            doc[name] = {"dtype": dtype, "shape": [n], "data_offsets": [start, start + n * width]}
            start += n * width
        return json.dumps(doc, separators=(",", ":"))

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes [start, end) of the file, in chunks."""
        head = self.header()
        pos = start
        while pos < end:
            if pos < len(head):
                piece = head[pos : min(end, len(head))]
            else:
                piece = bytes(min(CHUNK, end - pos))
            yield piece
            pos += len(piece)


FileContent = bytes | SafetensorsFile


def size_of(content: FileContent) -> int:
    return len(content) if isinstance(content, bytes) else content.size


def etag_of(content: FileContent, name: str) -> str:
    """The Hub's ETag: a git blob sha1 for small files, the sha256 of an LFS file."""
    if isinstance(content, bytes):
        return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    return hashlib.sha256(f"simulated lfs {name} {content.size}".encode()).hexdigest()


@dataclass
class SimulatedRepo:
    """One model repository: its commits (sha -> files), refs (name -> sha), gating.

    `gated` repos serve their files only to a token in `granted`; their model info is
    public, as on the real Hub.
    """

    repo_id: str
    commits: dict[str, dict[str, FileContent]]
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    granted: frozenset[str] = frozenset()

    def resolve(self, revision: str | None) -> str | None:
        """The commit a revision names: a ref, a full sha, or None when unknown."""
        rev = revision or "main"
        if rev in self.refs:
            return self.refs[rev]
        return rev if rev in self.commits else None


def _commit_sha(repo_id: str, files: Mapping[str, FileContent]) -> str:
    listing = ",".join(f"{n}:{size_of(c)}" for n, c in sorted(files.items()))
    return hashlib.sha1(f"simulated commit {repo_id} {listing}".encode()).hexdigest()


def model_repo(
    repo_id: str,
    config: Mapping[str, object],
    shards: Mapping[str, SafetensorsFile],
    *,
    gated: bool = False,
    granted: frozenset[str] = frozenset(),
    sha: str | None = None,
    extra: Mapping[str, FileContent] | None = None,
) -> SimulatedRepo:
    """A repo with a config.json, the shards and (for more than one) their index, and any
    `extra` files (a tokenizer, another framework's weights, the vendor's `original/`)."""
    files: dict[str, FileContent] = {"config.json": json.dumps(config, indent=2).encode()}
    files.update(shards)
    files.update(extra or {})
    if len(shards) > 1:
        weight_map = {t: name for name, f in shards.items() for t in f.tensors}
        total = sum(f.size for f in shards.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    commit = sha or _commit_sha(repo_id, files)
    return SimulatedRepo(repo_id, {commit: files}, {"main": commit}, gated, granted)


def catalogue_repo(
    model_id: str,
    *,
    gated: bool = False,
    granted: frozenset[str] = frozenset(),
    sha: str | None = None,
) -> SimulatedRepo:
    """The simulated catalogue's model as a Hub repo (its config, index and shards)."""
    index = catalogue.safetensors_index(model_id)
    by_shard: dict[str, list[str]] = {}
    for tensor, shard in index["weight_map"].items():
        by_shard.setdefault(shard, []).append(tensor)
    shards = {
        name: SafetensorsFile(tuple(by_shard.get(name, [])), size)
        for name, size in catalogue.shard_files(model_id)
    }
    return model_repo(
        model_id, catalogue.hf_config(model_id), shards, gated=gated, granted=granted, sha=sha
    )
