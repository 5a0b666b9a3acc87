"""Run history: every launch, smoke run and benchmark, one JSON file each, secrets masked.

Files live in `platformdirs.user_data_dir("spark-tui")/history/` (or `$SPARK_TUI_DATA_DIR/
history/`). A run carries what a person needs to start the same service again and to
compare numbers: recipe, overrides and settings, image digests, model revision, each node's
network values, the full rendered commands and the results. The first run of a recipe on a
cluster is its baseline.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets as _random
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from spark_tui.core.errors import InputError
from spark_tui.core.plan import is_secret_name
from spark_tui.core.workload import comparable_config

KINDS = ("launch", "smoke", "bench", "sweep")
# Per-node values worth keeping to reproduce the network setup (seed 004, Step 3).
NETWORK_KEYS = (
    "MN_IF_NAME",
    "UCX_NET_DEVICES",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "NCCL_IGNORE_CPU_AFFINITY",
    "OMPI_MCA_btl_tcp_if_include",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "HEAD_IP",
    "MASTER_PORT",
    "VLLM_HOST_IP",
)

# -- secrets --------------------------------------------------------------------------------


def _is_reference(value: str) -> bool:
    v = value.strip().strip("'\"")
    return v.startswith("${") or v.startswith("$") or v in ("", "***")


def secret_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret values present in the environment -> their variable name (longest first)."""
    env = os.environ if env is None else env
    # Short values would match ordinary text; HF_TOKEN is masked whatever its length.
    found = {
        v: k
        for k, v in env.items()
        if is_secret_name(k) and isinstance(v, str) and (len(v) >= 8 or k == "HF_TOKEN" and v)
    }
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


_ASSIGN = re.compile(r"(?<![\w$.\-])([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s'\";]+)")
_FLAG_VALUE = re.compile(r"(--[A-Za-z0-9][\w-]*)(=|\s+)(\"[^\"]*\"|'[^']*'|[^\s'\";]+)")


def mask_text(text: str, values: Mapping[str, str] | None = None) -> str:
    """A string with secret values replaced: `NAME=v` -> `NAME=${NAME}`, literals -> `${NAME}`."""
    values = secret_values() if values is None else values
    for value, name in values.items():
        text = text.replace(value, "${" + name + "}")

    def assign(m: re.Match[str]) -> str:
        name, value = m.group(1), m.group(2)
        if is_secret_name(name) and not _is_reference(value):
            return f"{name}=${{{name}}}"
        return m.group(0)

    def flag(m: re.Match[str]) -> str:
        name, sep, value = m.groups()
        if is_secret_name(name) and not _is_reference(value) and not value.startswith("-"):
            return f"{name}{sep}***"
        return m.group(0)

    return _FLAG_VALUE.sub(flag, _ASSIGN.sub(assign, text))


def mask_secrets(obj: Any, values: Mapping[str, str] | None = None) -> Any:
    """A copy of a JSON-like value with every secret masked.

    Values under a secret-named key become `${NAME}` (env-style names) or `***`; in argv
    lists the value after a secret flag (`--api-key v`) becomes `***`; every string has the
    current secret values of the environment (HF_TOKEN and friends) replaced by `${NAME}`.
    """
    values = secret_values() if values is None else values
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if (
                isinstance(k, str)
                and is_secret_name(k)
                and isinstance(v, str | int | float)
                and not isinstance(v, bool)
                and not (isinstance(v, str) and _is_reference(v))
            ):
                out[k] = "${" + k + "}" if re.fullmatch(r"[A-Z_][A-Z0-9_]*", k) else "***"
            else:
                out[k] = mask_secrets(v, values)
        return out
    if isinstance(obj, list | tuple):
        items = [mask_secrets(v, values) for v in obj]
        for i, item in enumerate(items[:-1]):
            nxt = items[i + 1]
            if (
                isinstance(item, str)
                and item.startswith("--")
                and "=" not in item
                and is_secret_name(item)
                and isinstance(nxt, str)
                and not nxt.startswith("-")
                and not _is_reference(nxt)
            ):
                items[i + 1] = "***"
        return items
    if isinstance(obj, str):
        return mask_text(obj, values)
    return obj


# -- the run record -------------------------------------------------------------------------


class RankLog(BaseModel):
    """The tail of one rank's log, kept when its launch failed or its cluster was stopped."""

    rank: int
    node: str
    path: str  # the file that holds the lines
    reason: str | None = None


class Run(BaseModel):
    """One recorded launch, smoke run or benchmark (its JSON file, as pydantic reads it)."""

    # Older files may carry keys this version no longer writes: ignored, not refused.
    model_config = ConfigDict(extra="ignore", validate_assignment=False)

    id: str
    time: str
    kind: str
    recipe: str | None = None
    cluster_id: str | None = None
    cluster_key: str | None = None  # node addresses in rank order (see cluster_key())
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    model: str | None = None
    model_revision: str | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    settings_hash: str | None = None
    image: str | None = None
    image_digests: dict[str, str] = Field(default_factory=dict)
    # A sentinel image resolved before the launch: {requested, image, tag, digest}.
    image_resolved: dict[str, str] | None = None
    network: dict[str, dict[str, str]] = Field(default_factory=dict)
    commands: list[dict[str, Any]] = Field(default_factory=list)
    shell: str | None = None
    base_url: str | None = None
    launch_id: str | None = None  # the launch a smoke run or benchmark measured
    # Settings that differ from the recipe's defaults ({name, before, after}).
    changed: list[dict[str, Any]] = Field(default_factory=list)
    ok: bool | None = None
    results: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    # Recorded on simulated Sparks (the demo): never a real cluster's figure.
    simulated: bool = False
    # Why the run failed (a rank's reason), and each rank's kept log tail.
    failure: str | None = None
    rank_logs: list[RankLog] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-able data (the file's content)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Run:
        """A run from its file's content (today's and earlier versions')."""
        return cls.model_validate(dict(d))

    def summary(self) -> str:
        """What happened, in a few words, for a list."""
        if self.kind == "smoke":
            checks = self.results.get("checks") or []
            passed = sum(1 for c in checks if c.get("ok"))
            return f"{passed}/{len(checks)} checks passed"
        if self.kind == "bench":
            levels = (self.results.get("bench") or {}).get("levels") or []
            parts = []
            for lv in levels:
                tps = (lv.get("figures") or {}).get("total_output_tps")
                if tps is not None:
                    parts.append(f"c{lv.get('concurrency')} {tps:.1f} tok/s")
            return ", ".join(parts) or "no level finished"
        if self.kind == "sweep":
            sweep = self.results.get("sweep") or {}
            rows = sweep.get("rows") or []
            return f"{sweep.get('setting')}: {len(rows)} value(s), {sweep.get('best_text', '')}"
        if self.kind == "launch":
            ranks = len(self.commands)
            return f"{ranks} rank(s)" + (f", {self.image}" if self.image else "")
        return ""


def settings_hash(settings: Mapping[str, Any]) -> str:
    """A short stable hash of the settings (the same as in container labels when absent)."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def cluster_key(addresses: Iterable[str]) -> str:
    """The cluster a run used: its nodes' addresses in rank order."""
    return ",".join(addresses)


def _now() -> datetime:
    return datetime.now(UTC)


def _new_id(kind: str, when: datetime) -> str:
    return f"{when.strftime('%Y%m%dT%H%M%S')}-{kind[0]}{_random.token_hex(3)}"


def data_dir() -> Path:
    """Where spark-tui keeps its data: $SPARK_TUI_DATA_DIR or the platform's user data dir."""
    override = os.environ.get("SPARK_TUI_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("spark-tui"))


class History:
    """The run records in one folder."""

    def __init__(self, root: Path | str | None = None, *, simulated: bool = False) -> None:
        self.root = Path(root) if root is not None else data_dir() / "history"
        # The demo's store: every run it records is marked simulated.
        self.simulated = simulated

    @classmethod
    def demo(cls) -> History:
        """The demo's own store, apart from the real one: its clusters live on loopback
        addresses that the next demo or `spark-tui sim` reuses, so its runs and baselines
        must never meet a real (or another simulated) cluster's."""
        return cls(data_dir() / "demo" / "history", simulated=True)

    # -- storage --------------------------------------------------------------------------

    def save(self, run: Run) -> Run:
        """Write the run (masked) atomically; returns the masked run as stored."""
        if self.simulated:
            run.simulated = True
        data = mask_secrets(run.to_dict())
        _write_private(self.root / f"{run.id}.json", json.dumps(data, indent=2, default=str))
        return Run.from_dict(data)

    def list_runs(self, kind: str | None = None) -> list[Run]:
        """Every run, oldest first (unreadable files are skipped)."""
        if not self.root.is_dir():
            return []
        runs = []
        for path in sorted(self.root.glob("*.json")):
            try:
                runs.append(Run.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError):
                continue
        runs.sort(key=lambda r: (r.time, r.id))
        return [r for r in runs if kind is None or r.kind == kind]

    def get_run(self, run_id: str) -> Run:
        """The run with this id, or the only one whose id starts with it."""
        path = self.root / f"{run_id}.json"
        if path.is_file():
            try:
                return Run.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                raise InputError(
                    f"run record {path} cannot be read: {exc}",
                    "move the file away (or restore it from a backup), then try again",
                ) from None
        matches = [r for r in self.list_runs() if r.id.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise InputError(
                f"no run {run_id!r} in {self.root}", "list the runs with `spark-tui history`"
            )
        raise InputError(
            f"{run_id!r} names {len(matches)} runs", "give more characters of the run id"
        )

    def bench_of(self, run_id: str) -> Run:
        """The benchmark named by the id: the run itself, or the last benchmark of a launch."""
        run = self.get_run(run_id)
        if run.kind == "bench":
            return run
        if run.kind == "launch":
            benches = [r for r in self.list_runs("bench") if r.launch_id == run.id]
            if benches:
                return benches[-1]
        raise InputError(
            f"run {run.id} is a {run.kind} run with no benchmark",
            "pick a benchmark run (kind bench in `spark-tui history`)",
        )

    # -- the baseline a user picked, per recipe and cluster --------------------------------

    def _baselines_path(self) -> Path:
        return self.root / "baselines.json"

    def _baselines(self) -> dict[str, str]:
        try:
            text = self._baselines_path().read_text(encoding="utf-8")
            return Baselines.model_validate_json(text).root
        except (OSError, ValidationError):
            return {}

    def _write_baselines(self, data: dict[str, str]) -> None:
        text = Baselines(dict(sorted(data.items()))).model_dump_json(indent=2)
        _write_private(self._baselines_path(), text)

    @staticmethod
    def _baseline_key(recipe: str | None, cluster_key: str | None) -> str:
        return f"{recipe or ''}|{cluster_key or ''}"

    def pin_baseline(self, run_id: str) -> Run:
        """Make this benchmark (or a launch's last one) the baseline of its recipe on its
        cluster: tuning compares with it until it is reset."""
        run = self.bench_of(run_id)
        data = self._baselines()
        data[self._baseline_key(run.recipe, run.cluster_key)] = run.id
        self._write_baselines(data)
        return run

    def reset_baseline(self, recipe: str, cluster_key: str | None = None) -> list[str]:
        """Forget the picked baseline of the recipe (on one cluster, or on all); the next
        tuning step measures a new one. Returns the run ids that were baselines."""
        data = self._baselines()
        gone = [
            k
            for k in data
            if k.split("|", 1)[0] == recipe
            and (cluster_key is None or k == self._baseline_key(recipe, cluster_key))
        ]
        ids = [data.pop(k) for k in gone]
        self._write_baselines(data)
        return ids

    def pinned_baseline(self, recipe: str | None, cluster_key: str | None) -> Run | None:
        """The baseline the user picked for the recipe on the cluster, if any (and kept)."""
        run_id = self._baselines().get(self._baseline_key(recipe, cluster_key))
        if run_id is None:
            return None
        try:
            return self.get_run(run_id)
        except InputError:
            return None

    def repeats_of(self, run: Run) -> list[Run]:
        """Benchmarks with the same recipe, cluster, settings and benchmark config as `run`."""
        cfg = (run.results.get("bench") or {}).get("config")
        return [
            r
            for r in self.list_runs(run.kind)
            if r.recipe == run.recipe
            and r.cluster_key == run.cluster_key
            and r.settings_hash == run.settings_hash
            and comparable_config((r.results.get("bench") or {}).get("config") or {})
            == comparable_config(cfg or {})
        ]

    # -- recording ------------------------------------------------------------------------

    def record_launch(
        self,
        plan: Any,
        overrides: Mapping[str, Any] | None = None,
        digests: Mapping[str, str] | None = None,
        revision: str | None = None,
        *,
        shell: str | None = None,
        changed: list[dict[str, Any]] | None = None,
        ok: bool | None = None,
        results: Mapping[str, Any] | None = None,
        notes: list[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> Run:
        """Record a launch from its plan (a `LaunchPlan` or its `plan --json` dict).

        `changed` defaults to the settings that differ from the recipe's `defaults` (its
        settings with no override), so a plain launch reads as the recipe's own whatever
        ran before it."""
        if hasattr(plan, "to_dict"):
            if shell is None and hasattr(plan, "to_shell"):
                try:
                    shell = plan.to_shell()
                except ImportError:  # the shell export is optional for a record
                    shell = None
            plan = plan.to_dict()
        when = _now()
        ranks = sorted(plan.get("ranks") or [], key=lambda r: r.get("rank", 0))
        settings = dict(plan.get("settings") or {})
        nodes = [
            {"name": r.get("node"), "address": r.get("address"), "rank": r.get("rank")}
            for r in ranks
        ]
        network: dict[str, dict[str, str]] = {}
        commands = []
        for r in ranks:
            env = dict(r.get("env") or {})
            net = {k: str(env[k]) for k in NETWORK_KEYS if k in env}
            argv = [str(a) for a in r.get("argv") or []]
            for flag in ("--master-addr", "--master-port"):
                if flag in argv[:-1]:
                    net[flag] = argv[argv.index(flag) + 1]
            network[str(r.get("node"))] = net
            commands.append(
                {
                    k: r.get(k)
                    for k in (
                        "rank",
                        "role",
                        "node",
                        "address",
                        "container_name",
                        "image",
                        "argv",
                        "env",
                        "mounts",
                        "docker",
                        "labels",
                    )
                    if k in r
                }
            )
        image = plan.get("image") or next((r.get("image") for r in ranks if r.get("image")), None)
        shash = plan.get("settings_hash") or _label_hash(ranks) or settings_hash(settings)
        run = Run(
            id=_new_id("launch", when),
            time=when.isoformat(timespec="milliseconds"),
            kind="launch",
            recipe=plan.get("recipe") if isinstance(plan.get("recipe"), str) else _name(plan),
            cluster_id=plan.get("cluster_id"),
            cluster_key=cluster_key(str(n["address"] or n["name"]) for n in nodes),
            nodes=nodes,
            model=plan.get("model") or _served_model(ranks),
            model_revision=revision,
            overrides=dict(overrides or {}),
            settings=settings,
            settings_hash=shash,
            image=image,
            image_digests=dict(digests or {}),
            image_resolved=plan.get("image_resolved") or None,
            network=network,
            commands=commands,
            shell=shell,
            base_url=_endpoint_url(plan.get("endpoint")),
            changed=list(changed or []),
            ok=ok,
            results=dict(results or {}),
            notes=list(notes or []) + [str(n) for n in plan.get("notes") or []],
        )
        if changed is None:
            run.changed = _differences(dict(defaults or {}), settings) if defaults else []
        return self.save(run)

    def keep_rank_logs(
        self,
        run_id: str,
        rank: int,
        node: str,
        lines: Iterable[str],
        reason: str | None = None,
        *,
        failed: bool = False,
    ) -> Path:
        """Keep the tail of one rank's log beside the run (secrets masked) and name it in
        the run: its containers may be gone, the lines and why it ended stay. `failed`
        marks the run failed with `reason` (the first reason given stays the run's)."""
        run = self.get_run(run_id)
        safe_node = re.sub(r"[^\w.-]", "_", node)
        path = self.root / "logs" / run.id / f"rank{rank}-{safe_node}.log"
        values = secret_values()
        _write_private(path, "\n".join(mask_text(line, values) for line in lines))
        kept = RankLog(rank=rank, node=node, path=str(path), reason=reason)
        run.rank_logs = sorted(
            [r for r in run.rank_logs if r.rank != rank] + [kept], key=lambda r: r.rank
        )
        if failed:
            run.ok = False
            run.failure = run.failure or reason
        self.save(run)
        return path

    def mark_failed(self, run_id: str, reason: str) -> Run:
        """The run failed (kept with the first reason given)."""
        run = self.get_run(run_id)
        run.ok = False
        run.failure = run.failure or reason
        return self.save(run)

    def launch_of(self, cluster_id: str, recipe: str | None = None) -> Run | None:
        """The latest launch record of this cluster id (and recipe, when given)."""
        for run in reversed(self.list_runs("launch")):
            if run.cluster_id == cluster_id and (recipe is None or run.recipe == recipe):
                return run
        return None

    def _measured(
        self,
        kind: str,
        launch: Run | None,
        base_url: str | None,
        recipe: str | None = None,
        cluster_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Run:
        when = _now()
        run = Run(id=_new_id(kind, when), time=when.isoformat(timespec="milliseconds"), kind=kind)
        run.base_url = base_url
        if launch is None and cluster_id:
            launch = self.launch_of(cluster_id, recipe)
        if launch is not None:
            for name in (
                "recipe",
                "cluster_id",
                "cluster_key",
                "nodes",
                "model",
                "model_revision",
                "overrides",
                "settings",
                "settings_hash",
                "image",
                "image_digests",
                "image_resolved",
                "network",
                "changed",
            ):
                setattr(run, name, getattr(launch, name))
            run.launch_id = launch.id
            run.base_url = base_url or launch.base_url
        else:
            run.recipe = recipe
            run.cluster_id = cluster_id
            run.overrides = dict(overrides or {})
            run.cluster_key = base_url
        return run

    def record_smoke(
        self,
        results: Iterable[Any],
        *,
        launch: Run | None = None,
        base_url: str | None = None,
        model: str | None = None,
        recipe: str | None = None,
        cluster_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Run:
        """Record a smoke run (`SmokeResult`s or their dicts), tied to its launch when known.

        Without `launch`, the latest launch record of `cluster_id` is used when there is one.
        """
        checks = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]
        run = self._measured("smoke", launch, base_url, recipe, cluster_id, overrides)
        run.model = model or run.model
        run.ok = bool(checks) and all(c.get("ok") for c in checks)
        run.results = {"checks": checks}
        return self.save(run)

    def record_bench(
        self,
        result: Any,
        *,
        launch: Run | None = None,
        base_url: str | None = None,
        recipe: str | None = None,
        cluster_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Run:
        """Record a benchmark (`BenchResult` or its dict), tied to its launch when known."""
        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        run = self._measured(
            "bench", launch, base_url or data.get("base_url"), recipe, cluster_id, overrides
        )
        run.model = data.get("model") or run.model
        run.ok = not data.get("cancelled") and all(
            lv.get("errors", 0) == 0 for lv in data.get("levels") or []
        )
        run.results = {"bench": data}
        return self.save(run)

    def record_sweep(
        self, sweep: Mapping[str, Any], *, launch: Run | None = None, run_id: str | None = None
    ) -> Run:
        """Record a sweep (its result as a dict), or update the record `run_id` as the
        sweep goes on: the record always holds the rows measured so far."""
        if run_id is not None:
            run = self.get_run(run_id)
        else:
            run = self._measured("sweep", launch, None, sweep.get("recipe"))
        run.ok = bool(sweep.get("done")) and sweep.get("best") is not None
        run.results = {"sweep": dict(sweep)}
        return self.save(run)


def _endpoint_url(endpoint: Any) -> str | None:
    if isinstance(endpoint, str):
        return endpoint
    if isinstance(endpoint, Mapping) and endpoint.get("base_url"):
        return str(endpoint["base_url"])
    return None


def _label_hash(ranks: list[dict[str, Any]]) -> str | None:
    for r in ranks:
        for key, value in (r.get("labels") or {}).items():
            if "settings" in key and "hash" in key:
                return str(value)
    return None


def _name(plan: Mapping[str, Any]) -> str | None:
    recipe = plan.get("recipe")
    if isinstance(recipe, Mapping):
        return str(recipe.get("name")) if recipe.get("name") else None
    return None


def _served_model(ranks: list[dict[str, Any]]) -> str | None:
    for r in ranks:
        argv = r.get("argv") or []
        if len(argv) > 2 and argv[0] == "vllm" and argv[1] == "serve":
            return str(argv[2])
    return None


def _differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = list(before) + [k for k in after if k not in before]
    return [
        {"name": k, "before": before.get(k), "after": after.get(k)}
        for k in keys
        if before.get(k) != after.get(k)
    ]


def changed_settings(run: Run, baseline: Run) -> list[dict[str, Any]]:
    """The settings (and image) that differ between a run and its baseline."""
    out = _differences(baseline.settings, run.settings)
    if not baseline.settings and not run.settings:
        out = _differences(baseline.overrides, run.overrides)
    if baseline.image_digests and run.image_digests and baseline.image_digests != run.image_digests:
        out.append({"name": "image", "before": baseline.image_digests, "after": run.image_digests})
    return out


class Baselines(RootModel[dict[str, str]]):
    """`baselines.json`: "recipe|cluster key" -> the run id picked as its baseline."""


def _write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only, atomically (a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")
    os.replace(tmp, path)
