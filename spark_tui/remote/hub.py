"""Model facts from the Hugging Face Hub, for a model no node has yet (network I/O).

`model_facts_for(recipe, nodes, argv)` is what a fit check calls: it asks the Hub only when
metadata and node caches leave a fact out. `fetch_model_facts(recipe)` reads the model's
config.json, its safetensors files' sizes and headers (dtype, parameters) and the commit
its `model_revision` names, with HF_TOKEN for gated models. The result is cached on the control machine
(`platformdirs.user_cache_dir("spark-tui")/hub`, or `$SPARK_TUI_CACHE_DIR/hub`); files go
to huggingface_hub's own cache. Offline (`HF_HUB_OFFLINE=1`) only the cache answers.
Every failure is a `Finding` with a remedy, never an exception; no message carries the
token or an exception's text (which may quote request headers). A read of the Hub takes at
most `wait_seconds` (30 s, or `$SPARK_TUI_HUB_TIMEOUT`) whatever the Hub does, and
`wait_note` says so beforehand: a slow Hub is otherwise a silent pause.

huggingface_hub is imported only when the Hub is really asked, so a check whose facts
are complete starts as fast as before.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import platformdirs

from spark_tui.core.facts import ModelFacts, NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.model_facts import (
    HubFacts,
    needs_hub,
    resolve_model_facts,
    safetensors_dtype,
)
from spark_tui.core.recipe import Recipe
from spark_tui.core.serve_args import parse_serve_args

if TYPE_CHECKING:
    from huggingface_hub import HfApi

DEFAULT_ENDPOINT = "https://huggingface.co"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = ("1", "true", "yes", "on")
_CACHE_VERSION = 1
TIMEOUT_S = 20.0  # one request
# The whole read (model info, config, index, each shard's header): a Hub that answers
# slowly or not at all holds a `check` this long at most.
WAIT_S = 30.0


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def wait_seconds(env: Mapping[str, str]) -> float:
    """How long a read of the Hub may take in all: $SPARK_TUI_HUB_TIMEOUT seconds, else 30."""
    try:
        given = float(env.get("SPARK_TUI_HUB_TIMEOUT") or WAIT_S)
    except ValueError:
        return WAIT_S
    return given if given > 0 else WAIT_S


def _endpoint(env: Mapping[str, str]) -> str:
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def wait_note(
    repo_id: str, revision: str | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """What a fetch of repo_id's facts will wait for and how long at most, or None when it
    answers from this machine's cache (offline, or a pinned commit already read)."""
    env = os.environ if env is None else env
    if _truthy(env.get("HF_HUB_OFFLINE")):
        return None
    if revision and _COMMIT.match(revision) and _read_cache(cache_root(env), repo_id, revision):
        return None
    return (
        f"reading the facts of {repo_id}@{revision or 'main'} from the Hub at {_endpoint(env)} "
        f"(no node caches the model; at most {wait_seconds(env):.0f} s)..."
    )


def _again(again: str | None) -> str:
    """The end of a remedy: run the user's own command again."""
    return f"run `{again}` again" if again else "check again"


def cache_root(env: Mapping[str, str]) -> Path:
    """The control machine's cache of Hub facts."""
    override = env.get("SPARK_TUI_CACHE_DIR")
    base = Path(override) if override else Path(platformdirs.user_cache_dir("spark-tui"))
    return base / "hub"


def hf_files_cache(env: Mapping[str, str]) -> Path:
    """huggingface_hub's own file cache, as it finds it (HF_HUB_CACHE, HF_HOME/hub)."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def _repo_dir(root: Path, repo_id: str) -> Path:
    return root / ("models--" + repo_id.replace("/", "--"))


def _read_cache(root: Path, repo_id: str, revision: str | None) -> HubFacts | None:
    """Cached facts for repo_id at revision (a commit, or a ref resolved when cached)."""
    repo = _repo_dir(root, repo_id)
    sha = revision if revision and _COMMIT.match(revision) else None
    if sha is None:
        ref = repo / "refs" / quote(revision or "main", safe="")
        try:
            sha = ref.read_text(encoding="utf-8").strip()
        except OSError:
            return None
    try:
        doc = json.loads((repo / "facts" / f"{sha}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != _CACHE_VERSION:
        return None
    try:
        facts = HubFacts.from_dict(doc, cached=True)
    except (KeyError, TypeError, ValueError):
        return None
    if revision and revision != facts.revision:
        facts = HubFacts.from_dict({**doc, "requested_revision": revision}, cached=True)
    return facts


def _write_cache(root: Path, facts: HubFacts) -> None:
    repo = _repo_dir(root, facts.repo_id)
    try:
        (repo / "facts").mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        doc = {"version": _CACHE_VERSION, **facts.to_dict()}
        tmp = repo / "facts" / f".{facts.revision}.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(repo / "facts" / f"{facts.revision}.json")
        if facts.requested_revision != facts.revision:
            name = quote(facts.requested_revision or "main", safe="")
            (repo / "refs" / name).write_text(facts.revision, encoding="utf-8")
    except OSError:
        pass  # a cache that cannot be written only costs the next run a fetch


def _problem(code: str, message: str, remedy: str) -> Finding:
    return Finding("warning", code, message, remedy)


def _token_remedy(repo_id: str, token: str | None, again: str | None = None) -> str:
    if token:
        return (
            f"the HF_TOKEN in use has no access to {repo_id}: accept its licence on "
            f"huggingface.co/{repo_id} with that account, or use a token of an account that has"
        )
    return (
        f"accept the licence on huggingface.co/{repo_id}, then `export HF_TOKEN=...` "
        f"(a read token of that account) and {_again(again)}"
    )


@contextmanager
def _quiet_hub() -> Iterator[None]:
    """No progress bars or warnings from huggingface_hub in the check's output."""
    from huggingface_hub.utils import (  # type: ignore[attr-defined]
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    disable_progress_bars()
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
        if not was_disabled:
            enable_progress_bars()


def fetch_model_facts(
    recipe: Recipe, env: Mapping[str, str] | None = None, *, again: str | None = None
) -> HubFacts | Finding:
    """The Hub's facts of the recipe's model at its model_revision, or a Finding saying why
    not (`again`: the user's command, which the remedies repeat)."""
    return fetch_repo_facts(recipe.model, recipe.model_revision, env, again=again)


def model_facts_for(
    recipe: Recipe,
    nodes: list[NodeFacts],
    argv: list[str],
    env: Mapping[str, str] | None = None,
    *,
    waiting: Callable[[str], None] | None = None,
    again: str | None = None,
) -> tuple[ModelFacts, Finding | None]:
    """The model facts for the fit check of `argv` (the rendered serve command): recipe
    metadata and node caches, then the Hub only when a fact the fit needs is still missing;
    with the Hub's finding when it could not answer. `waiting` is told what the Hub is
    asked and how long it may take before it is asked; `again`: the user's command, which
    the remedies repeat."""
    facts = resolve_model_facts(recipe, nodes)
    if not needs_hub(recipe, facts, parse_serve_args(argv)):
        return facts, None
    note = wait_note(recipe.model, recipe.model_revision, env) if waiting else None
    if waiting is not None and note is not None:
        waiting(note)
    hub = fetch_model_facts(recipe, env, again=again)
    if isinstance(hub, Finding):
        return facts, hub
    return resolve_model_facts(recipe, nodes, hub=hub), None


def fetch_repo_facts(
    repo_id: str,
    revision: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    again: str | None = None,
) -> HubFacts | Finding:
    """The Hub's facts of repo_id at revision (None: main), from the cache when it has them;
    at most `wait_seconds` of waiting for the Hub."""
    env = os.environ if env is None else env
    root = cache_root(env)
    cached = _read_cache(root, repo_id, revision)
    at = revision or "main"
    if _truthy(env.get("HF_HUB_OFFLINE")):
        if cached is not None:
            return cached
        return _problem(
            "hub_offline",
            f"HF_HUB_OFFLINE is set and no facts of {repo_id}@{at} are cached on this "
            "machine; no node caches the model either",
            f"{_again(again)} without HF_HUB_OFFLINE (the Hub's facts are then cached here), "
            "download the model to a node (`spark-tui models sync`), or add the missing facts "
            "to the recipe's metadata",
        )
    if cached is not None and revision and _COMMIT.match(revision):
        return cached  # a commit never changes: no need to ask again
    token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None
    endpoint = _endpoint(env)
    limit = wait_seconds(env)
    outcome: list[HubFacts | Exception] = []

    def read() -> None:
        try:
            outcome.append(_fetch(repo_id, revision, endpoint, token, hf_files_cache(env)))
        except Exception as exc:  # every failure becomes a finding; none reaches the cockpit
            outcome.append(exc)

    # A daemon thread: each request has its own timeout, but a Hub that trickles its answers
    # could hold a read far longer; past the limit it is left to end on its own.
    with _quiet_hub():
        reader = threading.Thread(target=read, name="hub-facts", daemon=True)
        reader.start()
        reader.join(limit)
    if not outcome:
        if cached is not None:
            return cached
        return _problem(
            "hub_unreachable",
            f"the Hub at {endpoint} did not answer within {limit:.0f} s for {repo_id}@{at}; "
            "no node caches the model",
            f"check the control machine's network (or HF_ENDPOINT), then {_again(again)}; or "
            "download the model to a node first (`spark-tui models sync`)",
        )
    got = outcome[0]
    if isinstance(got, Exception):
        found = _classify(got, repo_id, at, endpoint, token, again)
        if cached is not None and found.code == "hub_unreachable":
            return cached
        return found
    _write_cache(root, got)
    return got


def _fetch(
    repo_id: str, revision: str | None, endpoint: str, token: str | None, files: Path
) -> HubFacts:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token, library_name="spark-tui")
    info = api.model_info(repo_id, revision=revision, files_metadata=True, timeout=TIMEOUT_S)
    sha = info.sha
    if not sha:
        raise ValueError("model info without a commit sha")
    sizes = {s.rfilename: s.size for s in info.siblings or [] if s.rfilename}
    config_path = api.hf_hub_download(
        repo_id, "config.json", revision=sha, cache_dir=files, etag_timeout=TIMEOUT_S
    )
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise ValueError("config.json is not an object")
    shards = _shards(api, repo_id, sha, sizes, files)
    parameters: dict[str, int] = {}
    modules: set[str] = set()
    for name in shards:
        meta = api.parse_safetensors_file_metadata(repo_id, name, revision=sha, timeout=TIMEOUT_S)
        for kind, count in meta.parameter_count.items():
            parameters[str(kind)] = parameters.get(str(kind), 0) + int(count)
        modules.update(".".join(t.split(".")[:2]) for t in meta.tensors)
    known = [sizes.get(name) for name in shards]
    weight_bytes = sum(s for s in known if s) if known and all(known) else None
    dominant = max(parameters, key=lambda d: parameters[d]) if parameters else None
    gated = bool(getattr(info, "gated", False))
    return HubFacts(
        repo_id=repo_id,
        revision=sha,
        config=config,
        requested_revision=revision,
        weight_bytes=weight_bytes,
        dtype=safetensors_dtype(dominant) if dominant else None,
        parameters=parameters,
        gated=gated,
        modules=tuple(sorted(modules)) if shards else None,
    )


def _shards(
    api: HfApi, repo_id: str, sha: str, sizes: Mapping[str, int | None], files: Path
) -> list[str]:
    """The checkpoint's safetensors files: the index's shards, or the single file."""
    if "model.safetensors.index.json" in sizes:
        path = api.hf_hub_download(
            repo_id,
            "model.safetensors.index.json",
            revision=sha,
            cache_dir=files,
            etag_timeout=TIMEOUT_S,
        )
        index = json.loads(Path(path).read_text(encoding="utf-8"))
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if isinstance(weight_map, dict):
            return sorted({str(v) for v in weight_map.values()})
    if "model.safetensors" in sizes:
        return ["model.safetensors"]
    return sorted(n for n in sizes if n.endswith(".safetensors") and "/" not in n)


def _classify(
    exc: BaseException,
    repo_id: str,
    at: str,
    endpoint: str,
    token: str | None,
    again: str | None = None,
) -> Finding:
    """A finding for a failed fetch; the exception's own text is never shown."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return _problem(
            "hub_gated",
            f"{repo_id} is a gated model and the Hub refused its files "
            + ("to the HF_TOKEN in use" if token else "without a token (HF_TOKEN is not set)"),
            _token_remedy(repo_id, token, again),
        )
    if isinstance(exc, RevisionNotFoundError):
        return _problem(
            "hub_revision_not_found",
            f"{repo_id} has no revision {at} on the Hub",
            "fix the recipe's model_revision (a branch, tag or full commit sha of the repo)",
        )
    if isinstance(exc, RepositoryNotFoundError):
        private = "" if token else " (or it is private or gated and no HF_TOKEN is set)"
        return _problem(
            "hub_repo_not_found",
            f"the Hub has no model {repo_id}{private}",
            "check the recipe's model id on huggingface.co"
            + ("" if token else "; for a private or gated model `export HF_TOKEN=...`"),
        )
    if isinstance(exc, RemoteEntryNotFoundError):
        return _problem(
            "hub_no_config",
            f"{repo_id}@{at} on the Hub has no config.json or safetensors weights to read",
            "add the model facts to the recipe's metadata (num_hidden_layers, "
            "num_attention_heads, num_key_value_heads, head_dim, weight_bytes ...)",
        )
    if isinstance(exc, OfflineModeIsEnabled):
        return _problem(
            "hub_offline",
            f"huggingface_hub is in offline mode; no facts of {repo_id}@{at} are cached here",
            "unset HF_HUB_OFFLINE to let the check read the Hub once, or add the facts to the "
            "recipe's metadata",
        )
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, HfHubHTTPError) and status in (401, 403):
        return _problem(
            "hub_forbidden",
            f"the Hub refused {repo_id} (HTTP {status})",
            _token_remedy(repo_id, token, again),
        )
    what = f"HTTP {status}" if status else type(exc).__name__
    if not isinstance(exc, HfHubHTTPError | OSError | TimeoutError) and not is_transport_error(exc):
        # Not the network: the Hub's answer made no sense to this tool (or a bug here).
        return _problem(
            "hub_error",
            f"could not read the facts of {repo_id}@{at} from the Hub at {endpoint}: {what}",
            "add the missing facts to the recipe's metadata, or download the model to a "
            "node first (`spark-tui models sync`); please report this with the model id",
        )
    return _problem(
        "hub_unreachable",
        f"could not read {repo_id}@{at} from the Hub at {endpoint} ({what}); no node caches "
        "the model",
        f"check the control machine's network (or HF_ENDPOINT), then {_again(again)}; or "
        "download the model to a node first (`spark-tui models sync`)",
    )


def is_transport_error(exc: BaseException) -> bool:
    """A connection-level failure of huggingface_hub's HTTP client (refused, reset, timed
    out, name not resolved), whichever httpx generation the installed version uses (`httpx`,
    `httpx2`): their errors are not OSError, so a plain `except OSError` misses them."""
    return any(
        c.__name__ in ("TransportError", "TimeoutException") and c.__module__.startswith("httpx")
        for c in type(exc).__mro__
    )
