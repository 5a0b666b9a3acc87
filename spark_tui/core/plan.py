"""The launch plan: one container per rank, with its image, labels, env, mounts, docker
options and argv, as NVIDIA's two-Spark playbook runs them by hand.

vllm-distributed ranks each run `vllm serve` with the rank and rendezvous flags
(`--nnodes`, `--master-addr`, `--master-port`, `--node-rank`, `--headless` on workers;
for DP and hybrid TP x DP, replicas mapped to host groups as sparkrun does, but in the
form vLLM 0.32 runs for dense models too: one API server on the head, the other replicas
headless with `--data-parallel-start-rank`, where sparkrun gives every replica leader
`--data-parallel-rank` and its own API). vllm-ray ranks run `ray start` and the serve command runs on the head
once the Ray cluster has formed. Network variables come from each node's own facts.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_tui.core import prelaunch
from spark_tui.core.errors import InputError, RecipeError
from spark_tui.core.facts import NodeFacts
from spark_tui.core.images import ResolvedImage
from spark_tui.core.network_env import eth_interface, linked_env, network_env
from spark_tui.core.ports import (
    DEFAULT_API_PORT,
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_DP_RPC_PORT,
    DEFAULT_MASTER_PORT,
    DEFAULT_RAY_PORT,
)
from spark_tui.core.recipe import PrelaunchStep, Recipe
from spark_tui.core.render import render_argv, render_env
from spark_tui.core.selection import ON_FLAG, choice_text
from spark_tui.core.serve_args import ServeArgs, parse_serve_args
from spark_tui.core.wiring import (
    PAIR,
    POINT_TO_POINT,
    Wiring,
    fitting_layouts,
    fitting_orders,
    unlinked_groups,
    wiring_of,
)
from spark_tui.core.wording import plural

# What the playbook adds to every Ray node's `docker run -e`: Ray's memory monitor would kill
# workers on a unified-memory Spark, where the model's weights count as host memory.
RAY_FIXED_ENV = {"RAY_memory_monitor_refresh_ms": "0"}

# The playbook's cache mounts: (path under the node's home, path in the container).
CACHE_MOUNTS: tuple[tuple[str, str], ...] = (
    (".cache/huggingface", "/root/.cache/huggingface"),
    (".cache/vllm", "/root/.cache/vllm"),
    (".cache/flashinfer", "/root/.cache/flashinfer"),
    (".triton", "/root/.triton"),
    (".cache/b12x", "/root/.cache/b12x"),
)
FALLBACK_HOME = "/root"

LABEL_PREFIX = "spark-tui."
# A Ray head runs `ray start` (its `--port` is Ray's): the API port is in this label.
API_PORT_LABEL = LABEL_PREFIX + "api-port"
# A secret's name has a word (split on `_`/`-`) ending in one of these; plural counts such
# as `max_num_batched_tokens` are not secrets.
_SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIALS")
# Of those, the words that name a secret wherever they stand in a name (a TOKEN or KEY word
# inside a name may qualify something else: a token threshold, a key-value store).
_ALWAYS_SECRET = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIALS")
# Names of spark-tui's own records that end in KEY but hold no secret.
_NOT_SECRET = frozenset({"cluster_key", "sort_key"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value that is only a reference to a variable of the launching shell: ${NAME} or ${NAME:-x}.
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_CLUSTER_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}")

# Rank and rendezvous flags the plan owns: a template value for them is replaced.
NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, HEADLESS = (
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
)
DP_SIZE, DP_RANK, DP_ADDRESS, DP_RPC_PORT = (
    "--data-parallel-size",
    "--data-parallel-rank",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
)
DP_SIZE_LOCAL, DP_START_RANK = "--data-parallel-size-local", "--data-parallel-start-rank"
API_SERVER_COUNT = "--api-server-count"
EXECUTOR_BACKEND = "--distributed-executor-backend"
# Short spellings vLLM accepts for the flags above (underscore forms are handled generically).
_FLAG_ALIASES = {
    DP_SIZE: ("-dp",),
    DP_RANK: ("-dpn",),
    DP_ADDRESS: ("-dpa",),
    DP_RPC_PORT: ("-dpp",),
    DP_SIZE_LOCAL: ("-dpl",),
    DP_START_RANK: ("-dpr",),
    API_SERVER_COUNT: ("-asc",),
}


def is_secret_name(name: str) -> bool:
    """Whether an env key or flag name looks like it holds a secret (HF_TOKEN, --api-key).

    The last word of the name (split on `_`, `-`, `.`) must end so, or any word be one that
    only ever names a secret (SECRET, PASSWORD): `AWS_SECRET_ACCESS_KEY` and `HF_TOKEN` are
    secrets; `max_num_batched_tokens` (TOKENS) is not, nor vLLM's
    `--long-prefill-token-threshold` (a TOKEN word that qualifies a threshold). The one
    rule for plans and history.
    """
    if name in _NOT_SECRET:
        return False
    words = [w for w in re.split(r"[_\-.]+", name.strip("-").upper()) if w]
    if not words:
        return False
    return words[-1].endswith(_SECRET_WORDS) or any(w.endswith(_ALWAYS_SECRET) for w in words)


@dataclass
class DockerOptions:
    """The `docker run` options of the playbook: privileged, all GPUs, host IPC and network."""

    privileged: bool = True
    gpus: str = "all"
    ipc: str = "host"
    network: str = "host"
    shm_size: str = "16g"
    ulimits: dict[str, str] = field(
        default_factory=lambda: {
            "nofile": "1048576:1048576",
            "memlock": "-1",
            "stack": "67108864",
        }
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ContainerSpec:
    """One rank's container: name, image, labels, env, mounts (host -> container), options.

    `command` is the argv the container runs (after `entrypoint` when one is set).
    `home` is the node home the mounts were built from; None means it was unknown and
    the mounts use FALLBACK_HOME (the shell export writes `$HOME` instead). `copies` are
    (control-machine path, container path) pairs put into the container before it starts
    (the recipe's mods and `pre_exec` copies); `entrypoint` then runs them (core.prelaunch).
    """

    name: str
    image: str
    labels: dict[str, str]
    env: dict[str, str]
    mounts: dict[str, str]
    docker: DockerOptions = field(default_factory=DockerOptions)
    entrypoint: list[str] | None = None
    command: list[str] = field(default_factory=list)
    home: str | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class RankSpec:
    """One rank: its node, role, addresses, container and the argv it runs.

    `role` is "head" or "worker" (vllm-distributed) or "ray-head" / "ray-worker".
    `address` is how the node is reached (its facts address); `cluster_address` its
    ConnectX IPv4. `serves_api` is true for ranks that run an API server (the head, and
    every replica leader under data parallelism). `replica` is the data-parallel rank.
    """

    rank: int
    role: str
    node: str
    address: str
    cluster_address: str
    container: ContainerSpec
    argv: list[str]
    env: dict[str, str]
    serves_api: bool = False
    replica: int = 0
    mods: list[str] = field(default_factory=list)
    prelaunch: list[PrelaunchStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The rank in the `plan --json` format (secrets only as `${NAME}`)."""
        c = self.container
        return {
            "rank": self.rank,
            "role": self.role,
            "node": self.node,
            "address": self.address,
            "cluster_address": self.cluster_address,
            "container_name": c.name,
            "image": c.image,
            "argv": list(self.argv),
            "env": dict(self.env),
            "mounts": dict(c.mounts),
            "docker": c.docker.to_dict(),
            "labels": dict(c.labels),
            "entrypoint": list(c.entrypoint) if c.entrypoint is not None else None,
            "command": list(c.command),
            "serves_api": self.serves_api,
            "replica": self.replica,
            "mods": list(self.mods),
            "prelaunch": [step.to_dict() for step in self.prelaunch],
            "copies": [{"source": src, "dest": dest} for src, dest in c.copies],
        }


@dataclass
class LaunchPlan:
    """Everything needed to start one service across the nodes, and to find it again."""

    cluster_id: str
    recipe: str
    model: str
    runtime: str
    settings: dict[str, Any]
    settings_hash: str
    ranks: list[RankSpec]
    endpoint: dict[str, Any]
    rendezvous: dict[str, Any]
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    serve_exec: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    # Nodes given but not used: the layout needs fewer ranks (the ranks use the first ones),
    # or the user picked others.
    nodes_left_out: list[str] = field(default_factory=list)
    # The sentinel image the recipe names, resolved to a dated tag and its digest (the
    # ranks' image is that tag); None when the recipe's image is used as written.
    image_resolved: ResolvedImage | None = None

    @property
    def head(self) -> RankSpec:
        return self.ranks[0]

    def to_dict(self) -> dict[str, Any]:
        """The `plan --json` format of issue 2 (extra keys allowed); secrets as `${NAME}`."""
        return {
            "cluster_id": self.cluster_id,
            "recipe": self.recipe,
            "model": self.model,
            "runtime": self.runtime,
            "settings": mask_settings(self.settings),
            "settings_hash": self.settings_hash,
            "parallel": {
                "tensor": self.tensor_parallel,
                "pipeline": self.pipeline_parallel,
                "data": self.data_parallel,
            },
            "ranks": [r.to_dict() for r in self.ranks],
            "endpoint": dict(self.endpoint),
            "rendezvous": dict(self.rendezvous),
            "serve_exec": list(self.serve_exec) if self.serve_exec is not None else None,
            "notes": list(self.notes),
            "nodes_used": [r.node for r in self.ranks],
            "nodes_left_out": list(self.nodes_left_out),
            "image_resolved": self.image_resolved.to_dict() if self.image_resolved else None,
        }

    def to_shell(self) -> str:
        """The equivalent hand-typed commands, per node (see core.shell)."""
        from spark_tui.core.shell import plan_to_shell

        return plan_to_shell(self)


# --- settings, identity -------------------------------------------------------------


def mask_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings with every secret-looking value replaced by a `${NAME}` reference."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if is_secret_name(key) and value is not None and not _is_reference(value):
            out[key] = "${" + key.upper() + "}"
        else:
            out[key] = value
    return out


def settings_hash(settings: Mapping[str, Any]) -> str:
    """A short, stable hash of the settings (canonical JSON, secrets masked first)."""
    canonical = json.dumps(
        mask_settings(settings), sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def default_cluster_id(recipe_name: str, node_names: Sequence[str]) -> str:
    """A short id, stable for the same recipe on the same nodes (in order)."""
    key = "\0".join([recipe_name, *node_names])
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def container_name(cluster_id: str, rank: int) -> str:
    """The container name of a rank: `spark-tui-<cluster_id>-r<rank>`."""
    return f"spark-tui-{cluster_id}-r{rank}"


# --- secrets ------------------------------------------------------------------------


def _is_reference(value: Any) -> bool:
    return isinstance(value, str) and REFERENCE.fullmatch(value) is not None


def resolve_secrets(env: Mapping[str, str], local_env: Mapping[str, str]) -> dict[str, str]:
    """Fill every `${NAME}` (or `${NAME:-default}`) value from the launching side's
    environment, for the ops layer at launch time. The result must never be printed."""
    out: dict[str, str] = {}
    for key, value in env.items():
        m = REFERENCE.fullmatch(value)
        out[key] = _lookup(m, local_env) if m else value
    return out


def resolve_argv(argv: Sequence[str], rank_env: Mapping[str, str]) -> list[str]:
    """Fill argv elements that are exactly `${NAME}` from the rank's own (resolved) env.

    Only a variable the plan passes to the container (declared in the recipe's `env:`, or
    a secret spark-tui passes by reference such as HF_TOKEN) can be named: any other name
    raises, so a recipe cannot publish an arbitrary variable of the launching shell.
    """
    out: list[str] = []
    for token in argv:
        m = REFERENCE.fullmatch(token)
        if m is None:
            out.append(token)
            continue
        if m.group(1) not in rank_env:
            raise RecipeError(*_undeclared_text(m.group(1), token))
        out.append(_lookup(m, rank_env))
    return out


def _lookup(m: re.Match[str], local_env: Mapping[str, str]) -> str:
    name, default = m.group(1), m.group(2)
    value = local_env.get(name)
    if value is None or (value == "" and default is not None):
        return default or ""
    return value


def _undeclared_text(name: str, token: str) -> tuple[str, str]:
    return (
        f"the command passes {token} (the launching shell's {name}), which the recipe "
        "does not declare: it would be read from your whole environment and served as it is",
        f"declare it under the recipe's `env:` (`{name}: ${{{name}}}`) to pass it on purpose, "
        "or write the value into the command",
    )


def declared_names(recipe_env: Mapping[str, str]) -> set[str]:
    """Variables a command may name as `${NAME}`: the recipe's env keys (each reaches the
    container) and HF_TOKEN, which every rank gets by reference."""
    return {*recipe_env, "HF_TOKEN", *_ENV_FOR_FLAG.values()}


def undeclared_references(argv: Sequence[str], recipe_env: Mapping[str, str]) -> list[str]:
    """The argv elements `${NAME}` whose NAME the recipe does not pass to the containers
    (a rendered command, before the plan moves secret flags to the environment)."""
    stripped, flag_env = _secret_flags_to_env(list(argv), [])
    stripped = _mask_argv(stripped, [], flag_env)
    names = declared_names({**recipe_env, **flag_env})
    found: list[str] = []
    for token in stripped:
        m = REFERENCE.fullmatch(token)
        if m is not None and m.group(1) not in names and token not in found:
            found.append(token)
    return found


def undeclared_reference_error(token: str, recipe_name: str) -> RecipeError:
    """The error for one undeclared `${NAME}` in a command."""
    m = REFERENCE.fullmatch(token)
    message, remedy = _undeclared_text(m.group(1) if m else token, token)
    return RecipeError(f"{recipe_name}: {message}", remedy)


# Secret flags vLLM (or the Hub client in it) also reads from an environment variable: the
# value goes there, never into argv, where `ps`, `docker inspect` and vLLM's own
# "non-default args" log line would show it.
_ENV_FOR_FLAG = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}


def _secret_flags_to_env(argv: list[str], notes: list[str]) -> tuple[list[str], dict[str, str]]:
    """argv without `--api-key` / `--hf-token` (any form), and the env references that
    carry them instead."""
    out: list[str] = []
    env: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, eq, inline = token.partition("=")
        name = _ENV_FOR_FLAG.get(flag.replace("_", "-")) if token.startswith("--") else None
        if name is None:
            out.append(token)
            i += 1
            continue
        values = [inline] if eq else []
        i += 1
        if not eq:
            while i < len(argv) and not argv[i].startswith("-"):
                values.append(argv[i])
                i += 1
        value = values[0] if values else ""
        if _is_reference(value):
            env[name] = value
        else:
            env[name] = "${" + name + "}"
            if value:
                notes.append(
                    f"{flag}: the recipe's literal value is not used; export {name} before launch"
                )
        if len(values) > 1:
            notes.append(f"{flag}: only the first of {len(values)} values is passed (as {name})")
        notes.append(f"{flag} is passed as the environment variable {name}, not on the command")
    return out, env


def _mask_argv(argv: list[str], notes: list[str], introduced: dict[str, str]) -> list[str]:
    """Replace the values of other secret-looking flags (`--x-token v`) with `${NAME}`
    references; each NAME is added to `introduced` so the containers get it too."""
    out = list(argv)
    i = 0
    while i < len(out):
        token = out[i]
        if token.startswith("--") and is_secret_name(token.split("=", 1)[0]):
            name = token[2:].split("=", 1)[0].replace("-", "_").upper()
            ref_name = {"API_KEY": "VLLM_API_KEY"}.get(name, name)
            introduced.setdefault(ref_name, "${" + ref_name + "}")
            if "=" in token:
                if not _is_reference(token.split("=", 1)[1]):
                    out[i] = f"{token.split('=', 1)[0]}=${{{ref_name}}}"
                    notes.append(f"{token.split('=', 1)[0]} is passed as ${{{ref_name}}}")
            elif i + 1 < len(out) and not _is_reference(out[i + 1]):
                out[i + 1] = "${" + ref_name + "}"
                notes.append(f"{token} is passed as ${{{ref_name}}}: export it before launch")
                i += 1
        i += 1
    return out


RANK_PLACEHOLDER = "{rank}"


def _rank_env(
    recipe_env: Mapping[str, str],
    node: NodeFacts,
    head_ip: str,
    master_port: int,
    net_env: Mapping[str, str],
) -> tuple[dict[str, str], list[str]]:
    """Recipe env, then the playbook's `docker run -e` variables with this node's values."""
    notes: list[str] = []
    env: dict[str, str] = {}
    for key, value in recipe_env.items():
        if not _ENV_NAME.fullmatch(key):
            raise RecipeError(
                f"env key {key!r} is not a valid variable name",
                "use letters, digits and underscores in `env:` keys",
            )
        if is_secret_name(key) and not _is_reference(value):
            # Never carry a literal secret into a plan: read it from the launching shell.
            env[key] = "${" + key + "}"
            notes.append(f"{key}: the recipe's literal value is not used; export {key} instead")
        else:
            env[key] = value
    # A recipe may point HF_TOKEN at another variable (`${MY_HF}`); otherwise the user's own.
    env.setdefault("HF_TOKEN", "${HF_TOKEN}")
    for key, value in net_env.items():
        if key in env and env[key] != value:
            notes.append(
                f"{node.name}: recipe sets {key}={env[key]}, replaced by the node's own {value}"
            )
        env.pop(key, None)
        env[key] = value
    env.pop("HEAD_IP", None)
    env.pop("MASTER_PORT", None)
    env["HEAD_IP"] = head_ip
    env["MASTER_PORT"] = str(master_port)
    return env, notes


def _mounts(node: NodeFacts) -> dict[str, str]:
    home = (node.home or FALLBACK_HOME).rstrip("/") or "/"
    return {f"{home}/{rel}" if home != "/" else f"/{rel}": target for rel, target in CACHE_MOUNTS}


# --- argv editing -------------------------------------------------------------------


def _spellings(flag: str) -> tuple[str, ...]:
    return (flag, "--" + flag[2:].replace("-", "_"), *_FLAG_ALIASES.get(flag, ()))


def _find(argv: Sequence[str], flag: str) -> list[tuple[int, int]]:
    """(start, end) spans of every occurrence of `flag` with its value, any spelling."""
    names = _spellings(flag)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0]
        if name in names:
            end = i + 1
            if "=" not in token and flag != HEADLESS and end < len(argv):
                end += 1
            spans.append((i, end))
            i = end
        else:
            i += 1
    return spans


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of a flag in argv (any spelling), or None."""
    for start, end in _find(argv, flag):
        token = argv[start]
        if "=" in token:
            return token.split("=", 1)[1]
        if end > start + 1:
            return argv[start + 1]
    return None


def set_flag(argv: Sequence[str], flag: str, value: str | bool | None) -> list[str]:
    """argv with `flag` set to `value` exactly once: replaced in place where the template
    has it (its first spelling kept), appended otherwise. `True` is a bare switch;
    `None` or `False` removes the flag."""
    spans = _find(argv, flag)
    if value is None or value is False:
        new: list[str] = []
    elif value is True:
        new = [flag]
    else:
        new = [flag, str(value)]
    if not spans:
        return list(argv) + new
    out = list(argv[: spans[0][0]])
    first_token = argv[spans[0][0]]
    if isinstance(value, str) and "=" in first_token:
        new = [f"{first_token.split('=', 1)[0]}={value}"]
    out += new
    pos = spans[0][1]
    for start, end in spans[1:]:
        out += argv[pos:start]
        pos = end
    out += argv[pos:]
    return out


# --- building ----------------------------------------------------------------------


def _int_setting(settings: Mapping[str, Any], key: str, default: int) -> int:
    value = settings.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError(
            f"setting {key}={value!r} is not an integer", f"use --set {key}=<number>"
        ) from None


def _size(value: Any, default: int = 1) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def layout_ranks(args: ServeArgs) -> int:
    """The ranks, so the nodes (one GPU per Spark), a serve command's layout takes:
    TP x PP x DP."""
    return (
        _size(args.tensor_parallel_size)
        * _size(args.pipeline_parallel_size)
        * _size(args.data_parallel_size)
    )


def nodes_needed(recipe: Recipe, settings: Mapping[str, Any]) -> int:
    """The nodes a plan of the recipe with these settings runs on (see `layout_ranks`)."""
    return layout_ranks(parse_serve_args(render_argv(recipe, settings)))


def build_plan(
    recipe: Recipe,
    settings: Mapping[str, Any],
    nodes: list[NodeFacts],
    cluster_id: str | None = None,
    *,
    unpicked: Sequence[str] | None = None,
) -> LaunchPlan:
    """One rank per node (the first is the head) for this recipe and these settings.
    `unpicked`: the user picked `nodes` (see core.selection) and left these out; None:
    `nodes` are every node given. A layout of fewer ranks runs on the first of `nodes`."""
    if not nodes:
        raise InputError("no nodes to plan for", "pass --facts FILE, --inventory or --hosts")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise InputError(f"node names repeat: {names}", "give every node its own name")
    if not recipe.container:
        raise RecipeError(
            f"{recipe.name}: the recipe names no container image",
            "add `container: IMAGE:TAG` to the recipe",
        )
    if recipe.missing:
        # A mod the recipe names and nobody found would be silently skipped: never plan that.
        first = prelaunch.findings(recipe)[0]
        raise RecipeError(f"{recipe.name}: {first[1]}", first[2])
    if cluster_id is not None and not _CLUSTER_ID.fullmatch(cluster_id):
        raise InputError(
            f"cluster id {cluster_id!r} is not usable in a container name",
            "use up to 32 lower-case letters, digits, '.', '_' or '-'",
        )

    notes: list[str] = []
    rendered = render_argv(recipe, settings)
    undeclared = undeclared_references(rendered, recipe.env)
    if undeclared:
        raise undeclared_reference_error(undeclared[0], recipe.name)
    rendered, flag_env = _secret_flags_to_env(rendered, notes)
    base = _mask_argv(rendered, notes, flag_env)
    args = parse_serve_args(base)
    tp = _size(args.tensor_parallel_size)
    pp = _size(args.pipeline_parallel_size)
    dp = _size(args.data_parallel_size)
    api_port = _size(args.port, DEFAULT_API_PORT)
    backend = args.distributed_executor_backend or settings.get("distributed_executor_backend")
    ray = recipe.runtime == "vllm-ray" or backend == "ray"

    required = layout_ranks(args)
    if ray and dp > 1:
        raise InputError(
            f"{recipe.name}: vllm-ray does not support data parallelism (data_parallel={dp})",
            "use vllm-distributed (drop `distributed_executor_backend: ray` / "
            "`runtime: vllm-ray`), or --set data_parallel=1",
        )
    source = "given" if unpicked is None else "picked"
    if required > len(nodes):
        most = recipe.max_nodes
        if most is not None and required > most:
            # More nodes would not do: the recipe itself is made for fewer (eugr's solo
            # recipes that still write `-tp 2`, which sparkrun starts on one GPU).
            remedy = (
                f"the recipe runs on at most {plural(most, 'node')}: change the layout with "
                f"--set tensor_parallel={max(1, most // (pp * dp))}"
            )
        elif unpicked:
            remedy = (
                f"pick {plural(required, 'node')} of {','.join([*names, *unpicked])} with "
                f"{ON_FLAG} (head first), or change the layout with --set tensor_parallel=N "
                "(pipeline_parallel, data_parallel)"
            )
        else:
            remedy = (
                f"give {plural(required, 'node')}, head first, or change the layout with "
                "--set tensor_parallel=N (pipeline_parallel, data_parallel)"
            )
        raise InputError(
            f"{recipe.name} needs TP {tp} x PP {pp} x DP {dp} = {plural(required, 'node')}; "
            f"only {len(nodes)} {source} ({', '.join(names)})",
            remedy,
        )
    candidates = len(nodes)
    left_out = [n.name for n in nodes[required:]] + list(unpicked or ())
    if left_out:
        # As sparkrun: a layout of fewer ranks than nodes runs on the first ones.
        nodes = nodes[:required]
        names = names[:required]
        what, change = choice_text(
            names, left_out, picked=unpicked is not None, candidates=candidates
        )
        notes.append(f"{what} → {change}")
    if cluster_id is None:
        cluster_id = default_cluster_id(recipe.name, names)

    wiring = wiring_of(nodes)
    _check_wiring(recipe.name, wiring, names, tp, pp, dp)
    # Every node's ConnectX facts are checked up front, so a bad worker fails the plan.
    cluster_ips, net_envs = _cluster_network(wiring, nodes, settings)
    head_ip = cluster_ips[0]
    master_port = _int_setting(
        settings, "master_port", _size(flag_value(base, MASTER_PORT), DEFAULT_MASTER_PORT)
    )
    rpc_port = _int_setting(
        settings,
        "data_parallel_rpc_port",
        _size(flag_value(base, DP_RPC_PORT), DEFAULT_DP_RPC_PORT),
    )
    ray_port = _int_setting(settings, "ray_port", DEFAULT_RAY_PORT)
    # sparkrun's dashboard is off unless asked for; a dashboard_port setting turns it on.
    dashboard = (
        _int_setting(settings, "dashboard_port", DEFAULT_DASHBOARD_PORT)
        if settings.get("dashboard_port") is not None
        else None
    )
    recipe_env = {**render_env(recipe), **flag_env}
    shash = settings_hash(settings)
    image = recipe.container

    ranks: list[RankSpec] = []
    serve_exec: list[str] | None = None
    rendezvous: dict[str, Any]
    replica_size = tp * pp
    for rank, node in enumerate(nodes):
        replica, intra = divmod(rank, replica_size)
        # Every rank meets at the head, replicas that span nodes too: vLLM keeps them one
        # torch world (a MoE model's: on the real-vLLM lab TP 2 x DP 2 gives every worker
        # world_size=4, and a rendezvous per replica leader hung).
        master_ip = head_ip
        if ray:
            role = "ray-head" if rank == 0 else "ray-worker"
            argv = _ray_argv(rank, head_ip, cluster_ips[rank], ray_port, dashboard)
            serves_api = rank == 0
        else:
            role = "head" if rank == 0 else "worker"
            argv = _distributed_argv(
                base,
                nnodes=len(nodes) if dp > 1 else replica_size,
                node_rank=rank if dp > 1 else intra,
                master_ip=master_ip,
                master_port=master_port,
                dp=dp,
                dp_rank=replica,
                dp_address=head_ip,
                rpc_port=rpc_port,
            )
            # One API server for all replicas: the head's (vLLM's internal load balancing).
            serves_api = rank == 0
        env, env_notes = _rank_env(recipe_env, node, master_ip, master_port, net_envs[rank])
        notes.extend(n for n in env_notes if n not in notes)
        # `{rank}` in a recipe's env value is this rank's number (e.g. a CPU core to bind).
        env = {k: v.replace(RANK_PLACEHOLDER, str(rank)) for k, v in env.items()}
        if ray or len(nodes) > 1:
            # Every rank advertises its own cluster address: vLLM's Ray executor and its
            # multi-node message queues take it from VLLM_HOST_IP (else a guessed interface).
            env["VLLM_HOST_IP"] = cluster_ips[rank]
        if ray:
            # The playbook points MASTER_ADDR at the head on every node.
            env["MASTER_ADDR"] = head_ip
            env.update(RAY_FIXED_ENV)
        labels = {
            LABEL_PREFIX + "cluster": cluster_id,
            LABEL_PREFIX + "rank": str(rank),
            LABEL_PREFIX + "role": role,
            LABEL_PREFIX + "recipe": recipe.name,
            LABEL_PREFIX + "settings-hash": shash,
            LABEL_PREFIX + "node": node.name,
            LABEL_PREFIX + "model": recipe.model,
        }
        if ray:
            labels[API_PORT_LABEL] = str(api_port)
        spec = ContainerSpec(
            name=container_name(cluster_id, rank),
            image=image,
            labels=labels,
            env=env,
            mounts=_mounts(node),
            entrypoint=prelaunch.entrypoint(recipe.prelaunch),
            command=list(argv),
            home=node.home,
            copies=prelaunch.copies(recipe.prelaunch),
        )
        if node.home is None:
            notes.append(
                f"{node.name}: home directory unknown; mounts use {FALLBACK_HOME} in the plan "
                "and $HOME in the shell export"
            )
        ranks.append(
            RankSpec(
                rank=rank,
                role=role,
                node=node.name,
                address=node.address,
                cluster_address=cluster_ips[rank],
                container=spec,
                argv=argv,
                env=env,
                serves_api=serves_api,
                replica=replica if not ray else 0,
                mods=list(dict.fromkeys(s.mod for s in recipe.prelaunch if s.mod)),
                prelaunch=list(recipe.prelaunch),
            )
        )

    if ray:
        serve_exec = set_flag(base, EXECUTOR_BACKEND, "ray")
        rendezvous = {"ray_address": f"{head_ip}:{ray_port}", "master_addr": head_ip}
        if dashboard is not None:
            rendezvous["dashboard_port"] = dashboard
    else:
        rendezvous = {"master_addr": head_ip, "master_port": master_port}
        if dp > 1:
            rendezvous.update(data_parallel_address=head_ip, data_parallel_rpc_port=rpc_port)
            notes.append(
                f"data parallel: {dp} replicas of {plural(replica_size, 'node')}; the head's API "
                "server balances requests over every replica's engine (the other replica "
                "leaders run headless and join it at the data-parallel RPC port)"
            )
    head = nodes[0]
    endpoint = {
        "node": head.name,
        "address": head.address,
        "port": api_port,
        "base_url": f"http://{head.address}:{api_port}/v1",
        "replicas": [
            {"node": r.node, "address": r.address, "port": api_port} for r in ranks if r.serves_api
        ],
    }
    return LaunchPlan(
        cluster_id=cluster_id,
        recipe=recipe.name,
        model=recipe.model,
        runtime="vllm-ray" if ray else "vllm-distributed",
        settings=dict(settings),
        settings_hash=shash,
        ranks=ranks,
        endpoint=endpoint,
        rendezvous=rendezvous,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        serve_exec=serve_exec,
        notes=notes,
        nodes_left_out=left_out,
    )


def _check_wiring(
    recipe: str, wiring: Wiring, names: Sequence[str], tp: int, pp: int, dp: int
) -> None:
    """Refuse a layout whose groups span nodes with no cable between them, naming the node
    order or the layouts the cabling carries."""
    bad = unlinked_groups(wiring, names, tp, pp)
    if not bad:
        return
    what, group = bad[0]
    layout = f"TP {tp} x PP {pp} x DP {dp}"
    orders = fitting_orders(wiring, names, tp, pp)
    fixes = []
    if orders:
        fixes.append(f"list the nodes as {', '.join(orders[0])} (head first)")
    for t, p, d in fitting_layouts(wiring, names)[:2]:
        fixes.append(
            f"--set tensor_parallel={t} --set pipeline_parallel={p} --set data_parallel={d}"
        )
    fixes.append("cable the missing link (or use a switch) and probe again")
    raise InputError(
        f"{recipe}: {layout} needs a link between {' and '.join(group)} ({what}), and the "
        f"cabling has none ({wiring.summary})",
        "; or ".join(fixes),
    )


def _cluster_network(
    wiring: Wiring, nodes: Sequence[NodeFacts], settings: Mapping[str, Any]
) -> tuple[list[str], list[dict[str, str]]]:
    """Each rank's cluster address (the head's is the rendezvous) and network variables.

    On a switch or a pair every node has one cluster subnet. With a subnet per cable (a
    ring), two nodes use the cable between them; three or more have no address all of them
    reach over the cables (the head advertises one address), so the rendezvous goes over
    the LAN interface the `bootstrap_interface` setting names, at the inventory addresses.
    """
    names = [n.name for n in nodes]
    if wiring.kind == PAIR:
        # Over the cable between the two, even when a node has other ports up (two nodes
        # of a ring): its first addressed port may lead elsewhere.
        link = wiring.links[0]
        ports = [link.port_of(n) for n in names]
        if all(ports):
            return [p.address for p in ports if p], [
                network_env(n, p) for n, p in zip(nodes, ports, strict=True)
            ]
    if wiring.kind not in POINT_TO_POINT or len(nodes) < 2:
        return [eth_interface(n).ipv4 or "" for n in nodes], [network_env(n) for n in nodes]
    lan = str(settings.get("bootstrap_interface") or "").strip() or None
    merge = settings.get("ring_merge_nics")
    merge_nics = True if merge is None else bool(merge)
    envs = [
        linked_env(
            n,
            wiring,
            [m for m in names if m != n.name],
            bootstrap_interface=lan,
            merge_nics=merge_nics,
        )
        for n in nodes
    ]
    if lan is None:
        raise InputError(
            f"{len(nodes)} nodes on {wiring.summary}: no cluster address reaches every node "
            "(each cable is its own subnet)",
            "set the LAN interface every node reaches for the rendezvous: --set "
            "bootstrap_interface=enP7s7 (the Spark's 10 GbE port); NCCL's data stays on "
            "the cables",
        )
    return [n.address for n in nodes], envs


def _distributed_argv(
    base: list[str],
    *,
    nnodes: int,
    node_rank: int,
    master_ip: str,
    master_port: int,
    dp: int,
    dp_rank: int,
    dp_address: str,
    rpc_port: int,
) -> list[str]:
    """The serve argv of one vllm-distributed rank, in the playbook's flag order.

    Data parallelism takes vLLM's internally balanced multi-node form: one API server on
    the head (`--data-parallel-size-local 1`), every other node `--headless` with
    `--data-parallel-start-rank` naming its replica. vLLM 0.32 refuses the per-node form
    (`--data-parallel-rank` on every node, an API per replica) for a dense model ("Non-MoE
    models do not support external data parallel mode"); this form runs dense and MoE
    models alike (on the lab's real vLLM a MoE model's replicas form their group across the
    nodes in it, though the CPU build then stops at the first request in any form: `check`
    refuses that). Under data parallelism vLLM counts `--nnodes`/`--node-rank` over the whole
    deployment and takes the replica's place from them, and `--master-addr` is the head's on
    every node: a MoE model's replicas that span nodes form one world of TP x PP x DP ranks
    (on the lab's real vLLM, TP 2 x DP 2 with each replica's own leader as the address hung,
    two halves each waiting for 4 ranks; with the head's it formed).
    """
    argv = list(base)
    if nnodes > 1 and (dp == 1 or nnodes > dp):
        argv = set_flag(argv, NNODES, str(nnodes))
        argv = set_flag(argv, MASTER_ADDR, master_ip)
        argv = set_flag(argv, MASTER_PORT, str(master_port))
        argv = set_flag(argv, NODE_RANK, str(node_rank))
    else:
        for flag in (NNODES, MASTER_ADDR, MASTER_PORT, NODE_RANK):
            argv = set_flag(argv, flag, None)
    argv = set_flag(argv, HEADLESS, node_rank > 0)
    if node_rank > 0:
        # vLLM refuses an API server count on a headless rank ("cannot be used with
        # --headless"): a recipe's count is the head's alone.
        argv = set_flag(argv, API_SERVER_COUNT, None)
    if dp > 1:
        if flag_value(argv, DP_SIZE) is None:
            argv = set_flag(argv, DP_SIZE, str(dp))
        argv = set_flag(argv, DP_RANK, None)
        argv = set_flag(argv, DP_SIZE_LOCAL, "1")
        argv = set_flag(argv, DP_START_RANK, str(dp_rank) if node_rank > 0 else None)
        if node_rank == 0 and flag_value(argv, API_SERVER_COUNT) is None:
            # vLLM starts one API process per replica by default and then turns its
            # "Engine 00N: Avg prompt throughput" lines off ("disabling stats logging to
            # avoid incomplete stats"): one API process keeps every replica's numbers in
            # the head's log, where the cockpit reads them.
            argv = set_flag(argv, API_SERVER_COUNT, "1")
        argv = set_flag(argv, DP_ADDRESS, dp_address)
        argv = set_flag(argv, DP_RPC_PORT, str(rpc_port))
    return argv


def _ray_argv(
    rank: int, head_ip: str, own_ip: str, ray_port: int, dashboard: int | None = None
) -> list[str]:
    """`ray start` for the Ray head (rank 0) or a worker, bound to the ConnectX address.

    `--block` keeps Ray in the foreground as the container's process (its log is the
    container's); usage stats are off (no phoning home from a lab or a private network).
    """
    if rank == 0:
        argv = ["ray", "start", "--head", "--port", str(ray_port), "--node-ip-address", own_ip]
        if dashboard is None:
            argv.append("--include-dashboard=false")
        else:
            argv += [
                "--include-dashboard=true",
                "--dashboard-host",
                "0.0.0.0",
                "--dashboard-port",
                str(dashboard),
            ]
    else:
        argv = ["ray", "start", "--address", f"{head_ip}:{ray_port}", "--node-ip-address", own_ip]
    return [*argv, "--disable-usage-stats", "--block"]
