"""Facts about nodes and models: what a probe found, in the facts-file format."""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar, cast

from spark_tui.core.errors import FactsError

GIB = 1024**3
T = TypeVar("T")


@dataclass
class Interface:
    """One ConnectX port: netdev, RDMA device, link state, IPv4 (with its prefix length),
    speed, and the IPv4 neighbours that answered on it (`ip neigh`)."""

    netdev: str
    rdma_device: str | None = None
    state: str = "unknown"  # "up" | "down" | "unknown"
    ipv4: str | None = None
    speed_mbps: int | None = None
    prefix_len: int | None = None
    peers: list[str] = field(default_factory=list)

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
    # The vision tower and projector of a multimodal checkpoint: --language-model-only
    # leaves them unloaded.
    encoder_bytes: int | None = None
    # An encoder vLLM builds from config.json although the checkpoint holds none of its
    # tensors (an audio_config added to a model without audio): allocated on every rank.
    unbacked_encoder_bytes: int | None = None
    # The sampler's logits are vocab_size wide (the fit check's runtime overhead).
    vocab_size: int | None = None
    # Routed experts (0: a dense model); vLLM runs some data-parallel forms only for MoE.
    num_experts: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelFacts:
        if not isinstance(data, dict) or "model_id" not in data:
            raise FactsError("model facts without a model_id", 'add "model_id" to the entry')
        return _validated(ModelFacts, data, f"model {data['model_id']!r}")


@dataclass
class CachedModel:
    """A model found in a node's Hugging Face cache.

    `config` is the model's config.json as a dict and `weight_bytes` the safetensors
    total size, when known: a facts file may carry them so checks work offline.
    `files` maps each file of the snapshot whose content is there (a link to a blob not
    yet downloaded is not) to its size; `shards` names the weight files the safetensors
    index lists (as far as the probe read it). Both are None when the probe did not say.
    `modules` are the first two parts of the tensor names the index maps (`model.audio_tower`):
    which encoders the checkpoint holds (None: no index, or the probe did not say).
    """

    repo_id: str
    revision: str | None = None
    size_bytes: int | None = None
    weight_bytes: int | None = None
    config: dict[str, Any] | None = None
    files: dict[str, int] | None = None
    shards: list[str] | None = None
    modules: list[str] | None = None


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
        """A node of a facts file: unknown keys are ignored, every known one must have its
        type (no coercion: "12" is not a byte count)."""
        if not isinstance(data, dict) or "name" not in data or "address" not in data:
            raise FactsError(
                'a node entry needs at least "name" and "address"',
                "regenerate the file with `spark-tui probe --json`",
            )
        data = dict(data)
        # Older files list images and cached models by name alone.
        for key, name in (("images", "ref"), ("models", "repo_id")):
            entries = data.get(key)
            if isinstance(entries, list):
                data[key] = [{name: str(e)} if not isinstance(e, dict) else e for e in entries]
        return _validated(NodeFacts, data, f"node {data.get('name')!r}")


@functools.cache
def _validator(cls: Any) -> Any:
    """A strict validator of the dataclass's fields (nested dataclasses too): no coercion
    ("12" is not a byte count, true is not a count), unknown keys ignored. Straight on
    pydantic-core, as the fact ranges: pydantic's model machinery would cost each headless
    plan/check more than the check itself. Built on the first facts file read."""
    from pydantic_core import SchemaValidator

    return SchemaValidator(_entry_schema(cls))


def _entry_schema(cls: Any) -> Any:
    from pydantic_core import core_schema as cs

    hints = _hints(cls)
    return cs.typed_dict_schema(
        {
            f.name: cs.typed_dict_field(_schema(hints[f.name]), required=_required(f))
            for f in dataclasses.fields(cls)
        },
        extra_behavior="ignore",
    )


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _schema(tp: Any) -> Any:
    """The strict pydantic-core schema of one field type of the facts dataclasses."""
    from pydantic_core import core_schema as cs

    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _entry_schema(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        inner = _schema(rest[0]) if len(rest) == 1 else cs.union_schema([_schema(a) for a in rest])
        return cs.nullable_schema(inner) if len(rest) < len(args) else inner
    if origin is list:
        return cs.list_schema(_schema(args[0]), strict=True)
    if origin is dict:
        return cs.dict_schema(_schema(args[0]), _schema(args[1]), strict=True)
    simple = {
        str: cs.str_schema(strict=True),
        int: cs.int_schema(strict=True),
        float: cs.float_schema(strict=True),
        bool: cs.bool_schema(strict=True),
    }
    return simple.get(tp, cs.any_schema())


def _built(cls: Any, data: Any) -> Any:
    """The dataclass from checked data (entries and nested entries by their fields)."""
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        hints = _hints(cls)
        known = {f.name: f for f in dataclasses.fields(cls)}
        make: Any = cls
        return make(**{k: _built(hints[k], v) for k, v in data.items() if k in known})
    inner = [a for a in typing.get_args(cls) if dataclasses.is_dataclass(a)]
    if inner and isinstance(data, list):
        return [_built(inner[0], item) for item in data]
    return data


def _validated(cls: type[T], data: dict[str, Any], where: str) -> T:
    """`cls` from a facts-file entry, checked by pydantic-core against the dataclass's types."""
    from pydantic_core import ValidationError

    model: Any = cls
    try:
        checked = _validator(model).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"]) or "the entry"
        value = first.get("input")
        raise FactsError(
            f"{where}: {at!r}: {first['msg'].lower()}, not {type(value).__name__} ({value!r:.40})",
            "fix that value, or regenerate the file with `spark-tui probe --json`",
        ) from None
    return cast(T, _built(cls, checked))


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
