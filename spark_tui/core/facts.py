"""Facts about nodes and models: what a probe found, in the facts-file format."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core.errors import FactsError

GIB = 1024**3


@dataclass
class Interface:
    """One ConnectX port: netdev, RDMA device, link state, IPv4 and speed."""

    netdev: str
    rdma_device: str | None = None
    state: str = "unknown"  # "up" | "down" | "unknown"
    ipv4: str | None = None
    speed_mbps: int | None = None

    @property
    def is_up(self) -> bool:
        return self.state.lower() == "up"


@dataclass
class ImageInfo:
    """A local Docker image with its repo digest when known."""

    ref: str
    id: str | None = None
    digest: str | None = None
    size_bytes: int | None = None


@dataclass
class ContainerInfo:
    """A container of ours (carrying spark-tui labels) seen on a node."""

    name: str
    id: str | None = None
    state: str = "unknown"
    image: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Its command as Docker lists it (entrypoint and arguments): what a running rank of
    # ours budgets (--gpu-memory-utilization) is read from it.
    command: str | None = None


@dataclass
class ModelFacts:
    """Architecture and size facts of a model, each with where it came from.

    `attention` is one of "full", "sliding_window", "mla", "hybrid" (linear or Mamba
    layers mixed with attention layers). `full_attention_layers` counts the layers whose
    KV cache grows with the context (for sliding-window and hybrid models);
    `linear_layers` the recurrent (Mamba / linear-attention) layers of a hybrid model and
    `linear_state_bytes` the state one sequence holds in one of them at TP=1.
    """

    model_id: str
    weight_bytes: int | None = None
    params: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    attention: str | None = None
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    full_attention_layers: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    # Added for the fit check (H2): the full-attention layers' own shape when it differs
    # from the sliding layers' (Gemma 4), the recurrent layers of hybrid models and their
    # per-sequence state at TP=1, draft (MTP) layers, and a PLE table vLLM can keep on disk.
    global_head_dim: int | None = None
    num_global_key_value_heads: int | None = None
    linear_layers: int | None = None
    linear_state_bytes: int | None = None
    mtp_layers: int | None = None
    ple_table_bytes: int | None = None
    # The sampler's logits are vocab_size wide (the fit check's runtime overhead).
    vocab_size: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelFacts:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "model_id" not in known:
            raise FactsError("model facts without a model_id", 'add "model_id" to the entry')
        return cls(**known)


@dataclass
class CachedModel:
    """A model found in a node's Hugging Face cache.

    `config` is the model's config.json as a dict and `weight_bytes` the safetensors
    total size, when known: a facts file may carry them so checks work offline.
    `files` maps each file of the snapshot whose content is there (a link to a blob not
    yet downloaded is not) to its size; `shards` names the weight files the safetensors
    index lists (as far as the probe read it). Both are None when the probe did not say.
    """

    repo_id: str
    revision: str | None = None
    size_bytes: int | None = None
    weight_bytes: int | None = None
    config: dict[str, Any] | None = None
    files: dict[str, int] | None = None
    shards: list[str] | None = None


@dataclass
class NodeFacts:
    """Everything a probe learned about one Spark. The first node of a list is the head."""

    name: str
    address: str
    hostname: str | None = None
    home: str | None = None
    arch: str | None = None
    gpu_name: str | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    page_cache_bytes: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    docker_version: str | None = None
    disk_free_bytes: int | None = None
    interfaces: list[Interface] = field(default_factory=list)
    images: list[ImageInfo] = field(default_factory=list)
    models: list[CachedModel] = field(default_factory=list)
    containers: list[ContainerInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def connectx_up(self) -> list[Interface]:
        """Up ConnectX interfaces that carry an RDMA device, in probe order."""
        return [i for i in self.interfaces if i.is_up and i.rdma_device]

    @property
    def cluster_address(self) -> str | None:
        """The IPv4 of the first up ConnectX interface: the rendezvous address on a head."""
        for iface in self.connectx_up:
            if iface.ipv4:
                return iface.ipv4
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeFacts:
        if not isinstance(data, dict) or "name" not in data or "address" not in data:
            raise FactsError(
                'a node entry needs at least "name" and "address"',
                "regenerate the file with `spark-tui probe --json`",
            )
        where = f"node {data.get('name')!r}"
        known = _checked(cls, data, where)
        for key in ("interfaces", "images", "models", "containers"):
            if not isinstance(data.get(key) or [], list):
                raise FactsError(
                    f"{where}: {key!r} must be a list, not {type(data[key]).__name__}",
                    "regenerate the file with `spark-tui probe --json`",
                )
        known["interfaces"] = [_pick(Interface, i, where) for i in data.get("interfaces") or []]
        known["images"] = [
            _pick(ImageInfo, i, where) if isinstance(i, dict) else ImageInfo(ref=str(i))
            for i in data.get("images") or []
        ]
        known["models"] = [
            _pick(CachedModel, m, where) if isinstance(m, dict) else CachedModel(repo_id=str(m))
            for m in data.get("models") or []
        ]
        known["containers"] = [_pick(ContainerInfo, c, where) for c in data.get("containers") or []]
        return cls(**known)


_KINDS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


def _checked(cls: Any, data: Any, where: str) -> dict[str, Any]:
    """The entries of `data` that `cls` knows, each checked against the field's type."""
    if not isinstance(data, dict):
        raise FactsError(
            f"{where}: expected an object, got {type(data).__name__}",
            "regenerate the file with `spark-tui probe --json`",
        )
    known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
    for key, value in known.items():
        if value is None:
            continue
        declared = str(cls.__dataclass_fields__[key].type)
        kind = declared.split("[")[0].split("|")[0].strip()
        allowed = _KINDS.get(kind)
        wrong = allowed is not None and (
            not isinstance(value, allowed) or (kind in ("int", "float") and isinstance(value, bool))
        )
        if wrong:
            raise FactsError(
                f"{where}: {key!r} must be {kind}, not {type(value).__name__} ({value!r:.40})",
                "fix that value, or regenerate the file with `spark-tui probe --json`",
            )
    return known


def _pick(cls: Any, data: Any, where: str = "facts") -> Any:
    """Build a dataclass from a dict, ignoring keys it does not know (extra keys are allowed)."""
    return cls(**_checked(cls, data, f"{where}: {cls.__name__}"))


def parse_facts(text: str, source: str = "<facts>") -> list[NodeFacts]:
    """Parse a facts file (what `probe --json` prints) into nodes, in rank order."""
    from spark_tui.core.fact_ranges import check_finite_numbers

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactsError(
            f"{source}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}",
            "regenerate the file with `spark-tui probe --json > FILE`",
        ) from exc
    except RecursionError:
        raise FactsError(
            f"{source}: nested too deeply to be a facts file",
            "regenerate the file with `spark-tui probe --json > FILE`",
        ) from None
    # Infinity, NaN or 1e400 in a config or a size would break the fit arithmetic later.
    check_finite_numbers(data, source, FactsError)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise FactsError(
            f'{source}: no "nodes" list', 'the file must look like {"nodes": [{...}, ...]}'
        )
    try:
        return [NodeFacts.from_dict(n) for n in nodes]
    except TypeError as exc:
        raise FactsError(
            f"{source}: a value has the wrong type: {exc}", "check the node entries"
        ) from exc


def facts_to_json(nodes: list[NodeFacts]) -> str:
    """Render nodes in the facts-file format."""
    return json.dumps({"nodes": [n.to_dict() for n in nodes]}, indent=2)


def cached_revision(nodes: list[NodeFacts], repo_id: str) -> str | None:
    """The revision of `repo_id` in the nodes' Hugging Face caches ("a != b" when they differ)."""
    revisions = []
    for node in nodes:
        for model in node.models:
            if model.repo_id == repo_id and model.revision and model.revision not in revisions:
                revisions.append(model.revision)
    return " != ".join(revisions) if revisions else None
