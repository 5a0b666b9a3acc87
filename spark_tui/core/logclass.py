"""Classify vLLM log lines (errors, warnings, progress, readiness, startup milestones) and
pick the few lines that explain a failure.

Built against the real logs in the shared reference folder: vLLM's own
`LEVEL MM-DD HH:MM:SS [file.py:N] message` lines behind `(Proc pid=N)` prefixes,
uvicorn's `INFO:     ...`, tqdm bars joined by carriage returns, NCCL's
`host:pid:tid [n] NCCL WARN ...`, torch's `[rank1]:[E ProcessGroupNCCL.cpp:N]` and bare
Python tracebacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The marker the prelaunch wrapper prints before each mod and on failure.
from spark_tui.core.prelaunch import MARK as PRELAUNCH_MARK

KINDS = ("error", "warning", "progress", "ready", "phase", "info", "debug")


@dataclass(frozen=True)
class LineClass:
    """What one log line means.

    `kind` is one of KINDS. `progress` is 0..1 for progress lines. `detail` is short: for
    errors a cause code (see _KNOWN_CAUSES: free_memory, kv_cache_too_small, no_kv_memory,
    port_in_use, tp_heads, cuda_oom, nccl, nccl_timeout, gated_repo, worker_died,
    driver_oom, engine_start, unknown_flag, usage_error) or "error" / "exception" /
    "traceback"; for progress the bar's
    label and count; for phases the message. `scope` refines the kind: for `ready` "api"
    (the head's API server is up) or "worker" (a headless worker finished its startup);
    for `progress` "weights", "cuda_graphs" or "other"; for `phase` the milestone's name;
    "access" for an HTTP access-log line (its `detail` then "METHOD PATH STATUS" when 2xx-4xx).
    """

    kind: str
    progress: float | None = None
    detail: str | None = None
    scope: str | None = None


# ANSI colour codes: real (ESC), as quoted in issues ("^[[31m"), or a bare leftover
# "[36m" at the start of a line.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ANSI_QUOTED = re.compile(r"\^\[\[[0-9;]*m")
_ANSI_BARE_START = re.compile(r"^`?\[[0-9;]+m")
_TIME_PREFIX = re.compile(r"^\[\d{4}-\d{2}-\d{2}[T ][\d:.]+Z?\]\s*")
_PROC_PREFIX = re.compile(r"^\((?:[\w.-]+ pid=\d+(?:, ip=[\d.]+)?|raylet)\)\s?")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:")
_LEVEL = re.compile(r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::\s+|\s+(?:\d\d-\d\d [\d:.]+ )?)")
# "[file.py:123] " or the older "file.py:123] " after a vLLM level and timestamp.
_SOURCE = re.compile(r"^\[?[\w./-]+\.py:\d+\]\s?")
# torch / c10d: "[E ProcessGroupNCCL.cpp:563] ..." or "[W612 12:49:03.666 ProcessGroupNCCL.cpp:1647]".
_TORCH_LEVEL = re.compile(r"^\[([EWI])[\d :.]*\S*\.(?:cpp|h|hpp):\d+\]")
_NCCL = re.compile(r"\bNCCL (INFO|WARN|ERROR)\b")
# Ray's own logs: its CLI ("2026-12-01 22:00:21,556<TAB>SUCC scripts.py:1085 -- ...") and its
# C++ parts ("[2026-12-01 22:04:45,403 W 17895 17895] rpc_client.h:153: ...").
_RAY_PY = re.compile(
    r"^\d{4}-\d{2}-\d{2} [\d:,.]+\s+(DEBUG|INFO|SUCC|WARNING|ERROR|CRITICAL)\s+[\w.]+:\d+ -- "
)
_RAY_CPP = re.compile(r"^\[\d{4}-\d{2}-\d{2} [\d:,.]+ ([DIWEF]) \d+ \d+\] [\w.]+:\d+: ")
_RAY_LEVELS = {
    "DEBUG": "debug",
    "INFO": "info",
    "SUCC": "info",
    "WARNING": "warning",
    "ERROR": "error",
    "CRITICAL": "error",
    "D": "debug",
    "I": "info",
    "W": "warning",
    "E": "error",
    "F": "error",
}

_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::\s|:?$)"
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
# An exception raised without a message ("NotImplementedError"): only the frame that raised
# it says what failed, so that frame is kept beside it.
_BARE_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)\s*$")
# vLLM's dump of the engine's config and scheduler state when it crashes: evidence for a bug
# report, never the cause, and a single line of thousands of characters.
_STATE_DUMP = re.compile(r"\[dump_input\.py:\d+\]")

# Messages that name a known cause of failure: vLLM's and its neighbours' own wording.
_KNOWN_CAUSES: tuple[tuple[str, str], ...] = (
    ("free_memory", r"Free memory on device .*is less than desired"),
    ("kv_cache_too_small", r"KV cache is needed"),
    ("no_kv_memory", r"No available memory for the cache blocks"),
    ("port_in_use", r"[Aa]ddress already in use|EADDRINUSE"),
    ("tp_heads", r"must be divisible by"),
    ("cuda_oom", r"CUDA out of memory|OutOfMemoryError"),
    ("nccl", r"NCCL WARN|NCCL ERROR|ncclInternalError|ncclSystemError|ncclRemoteError"),
    ("nccl_timeout", r"Watchdog caught collective operation timeout"),
    ("gated_repo", r"[Gg]ated repo|is gated\.|401 Client Error|is restricted\. You must"),
    ("worker_died", r"died unexpectedly|worker died or was killed|EngineDeadError"),
    ("driver_oom", r"NV_ERR_NO_MEMORY"),
    ("engine_start", r"EngineCore failed to start|Engine core initialization failed"),
    # argparse refusing the command line (exit 2, no level prefix): an unknown flag, or any
    # other usage error ("vllm: error: argument --dtype: invalid choice: ...").
    ("unknown_flag", r"^vllm\b[\w -]*: error: unrecognized arguments: "),
    ("usage_error", r"^vllm\b[\w -]*: error: "),
    # Ray's own: a node that cannot reach the head's GCS, a Ray port taken, a Ray node lost.
    (
        "ray_gcs_unreachable",
        r"Failed to connect to GCS at address|Timed out while waiting for GCS to become available",
    ),
    ("ray_head_not_ready", r"No node info found for head node in GCS"),
    ("ray_port_in_use", r"is trying to use a port number \d+ that is used by other components"),
    ("ray_node_died", r"Some Ray subprocesses exited unexpectedly|has been marked dead because"),
)
# Causes that follow from an earlier, more specific error.
_CONSEQUENCES = ("engine_start", "worker_died")
_KNOWN_RE = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in _KNOWN_CAUSES))
_PYDANTIC_ERROR = re.compile(r"\bValue error, ")

_READY_API = "Application startup complete"
# A headless worker has no API server: the last line of its startup is the JIT monitor
# switching on after CUDA graph capture (see vllm_multinode_tp2_worker_rank1_headless.log).
_READY_WORKER = "Kernel JIT monitor activated"

# tqdm bars: "Loading safetensors checkpoint shards:  45% Completed | 5/11 [...]" and
# "Capturing CUDA graphs (FULL):  50%|#####     | 1/2 [...]".
_TQDM = re.compile(
    r"(?P<label>[A-Za-z][^:%|\r]*?):\s*(?P<pct>\d{1,3})%(?:\s*Completed)?\s*\|"
    r"(?:[^|\d\r]*\|)?\s*(?P<n>\d+)/(?P<total>\d+)"
)

_PHASES: tuple[tuple[str, str], ...] = (
    ("weights_loaded", r"Model loading took|Loading weights took"),
    ("loading", r"Starting to load model|Loading model from scratch"),
    ("distributed_init", r"distributed_init_method=|headless multiproc executor|DP group leader"),
    ("rank_assigned", r"is assigned as DP rank"),
    ("nccl", r"vLLM is using nccl==|NCCL version \d|NET/IB ?: Using"),
    ("engine_init", r"Initializing a V1 LLM engine|Initializing an LLM engine"),
    ("compile", r"torch\.compile took"),
    ("memory_profile", r"Free memory on device .*on startup\. Desired"),
    # The CPU build says "CPU KV cache size" and sizes it from VLLM_CPU_KVCACHE_SPACE.
    ("kv_cache", r"[GC]PU KV cache size|Available KV cache memory|GiB for KV cache on node"),
    ("cuda_graphs", r"Graph capturing finished"),
    ("engine_ready", r"init engine \(profile, create kv cache, warmup model\) took"),
    ("api_starting", r"Starting vLLM API server|Starting vLLM server on"),
    ("ray", r"Ray runtime started"),
)
# The phases in the order a rank goes through them, for telling how far a rank got.
STARTUP_ORDER = (
    "ray",
    "engine_init",
    "distributed_init",
    "nccl",
    "rank_assigned",
    "loading",
    "weights_loaded",
    "compile",
    "memory_profile",
    "kv_cache",
    "cuda_graphs",
    "engine_ready",
    "api_starting",
)
_PHASE_RE = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in _PHASES))

_HTTP_ACCESS = re.compile(r'"(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP/[\d.]+" (\d{3})')
_NEGATIVE_KV = "Available KV cache memory: -"
_BARE_WARNING = re.compile(
    r"^Warning:|^\[transformers\]|\b(?:User|Future|Deprecation|Runtime)Warning\b|\bWARNING\b"
)


def clean(line: str) -> str:
    """The line without ANSI colours, trailing newline or carriage-return padding."""
    # Substring checks first: most lines carry no colour, and this runs per log line.
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "^[[" in line:
        line = _ANSI_QUOTED.sub("", line)
    if line[:1] in "`[":
        line = _ANSI_BARE_START.sub("", line)
    return line.rstrip("\r\n ")


@dataclass(frozen=True)
class _Parsed:
    body: str  # the message, prefixes removed
    level: str | None  # "error" | "warning" | "info" | "debug" when the line states one
    process: str  # the "(Proc pid=N)" prefix, for telling interleaved streams apart


def _parse(line: str) -> _Parsed:
    text = clean(line).lstrip("`")
    if text[:2] == "20" or text[:2] == "[2":
        m = _RAY_PY.match(text) or _RAY_CPP.match(text)
        if m:
            return _Parsed(text[m.end() :], _RAY_LEVELS[m.group(1)], "")
    if text[:1] == "[":
        text = _TIME_PREFIX.sub("", text)
    process = ""
    while True:
        m = _PROC_PREFIX.match(text)
        if not m:
            break
        process += m.group(0)
        text = text[m.end() :]
    text = _RANK_PREFIX.sub("", text)
    level: str | None = None
    m = _LEVEL.match(text)
    if m:
        word = m.group(1)
        level = {"WARN": "warning", "WARNING": "warning", "CRITICAL": "error"}.get(
            word, word.lower()
        )
        text = text[m.end() :]
        s = _SOURCE.match(text)
        if s:
            text = text[s.end() :]
        return _Parsed(text, level, process)
    m = _TORCH_LEVEL.match(text)
    if m:
        level = {"E": "error", "W": "warning", "I": "info"}[m.group(1)]
        return _Parsed(text[m.end() :].lstrip(), level, process)
    m = _NCCL.search(text) if "NCCL" in text else None
    if m:
        level = {"INFO": "debug", "WARN": "error", "ERROR": "error"}[m.group(1)]
        return _Parsed(text, level, process)
    return _Parsed(text, None, process)


def _progress(body: str) -> LineClass | None:
    matches = list(_TQDM.finditer(body))
    if not matches:
        return None
    last = matches[-1]  # carriage-return joined bars: the latest update counts
    n, total = int(last.group("n")), int(last.group("total"))
    value = n / total if total > 0 else int(last.group("pct")) / 100
    label = last.group("label").strip()
    low = label.lower()
    scope = "weights" if "shard" in low or "weight" in low else "other"
    if "cuda graph" in low:
        scope = "cuda_graphs"
    return LineClass("progress", min(max(value, 0.0), 1.0), f"{label} {n}/{total}", scope)


def _known_cause(body: str) -> str | None:
    m = _KNOWN_RE.search(body)
    return m.lastgroup if m else None


def classify(line: str) -> LineClass:
    """Classify one vLLM log line."""
    p = _parse(line)
    body = p.body
    if p.level is None and body.startswith(PRELAUNCH_MARK):
        # The prelaunch wrapper's own markers: a failed mod is the rank's error.
        if " failed with exit code " in body:
            return LineClass("error", detail="prelaunch")
        return LineClass("phase", detail=body.strip()[:200], scope="prelaunch")
    if p.level == "error":
        return LineClass("error", detail=_known_cause(body) or "error")
    if p.level == "warning":
        cause = _known_cause(body) if "Ray" in body or "GCS" in body else None
        return LineClass("warning", detail=cause if cause else "warning")
    if p.level == "debug":
        if _PHASE_RE.search(body):
            return _phase(body)
        return LineClass("debug")
    if p.level is None:
        if _TRACEBACK.search(body):
            return LineClass("error", detail="traceback")
        if _EXCEPTION.match(body) or _PYDANTIC_ERROR.search(body):
            return LineClass("error", detail=_known_cause(body) or "exception")
        cause = _known_cause(body)
        if cause:
            return LineClass("error", detail=cause)
        if _FRAME.match(body):
            return LineClass("error", detail="traceback")
    # An INFO line, or a line with no level that is not an error.
    if _READY_API in body:
        return LineClass("ready", detail="API server is up", scope="api")
    if _READY_WORKER in body:
        return LineClass("ready", detail="worker finished startup", scope="worker")
    if "%" in body:
        prog = _progress(body)
        if prog is not None:
            return prog
    if _NEGATIVE_KV in body:
        return LineClass("warning", detail="negative KV cache memory")
    if _PHASE_RE.search(body):
        return _phase(body)
    m = _HTTP_ACCESS.search(body) if " HTTP/" in body else None
    if m:
        # An access-log line: `detail` is "METHOD PATH STATUS", `scope` "access".
        detail = f"{m.group(1)} {m.group(2)} {m.group(3)}"
        kind = "warning" if m.group(3)[0] == "5" else "debug"
        return LineClass(kind, detail=detail if kind == "debug" else "HTTP 5xx", scope="access")
    if p.level is None and _BARE_WARNING.search(body):
        return LineClass("warning", detail="warning")
    return LineClass("info")


def _phase(body: str) -> LineClass:
    m = _PHASE_RE.search(body)
    name = m.lastgroup if m else None
    return LineClass("phase", detail=body.strip()[:200], scope=name)


class StreamClassifier:
    """Classifies the lines of one log stream, keeping track of open tracebacks.

    A bare traceback's code lines carry nothing that marks them; inside a traceback
    (per process prefix, since engine and API server lines interleave) every line is
    classed like the traceback until its exception line.
    """

    def __init__(self) -> None:
        self._open: dict[str, str] = {}  # process prefix -> kind of its open traceback

    def classify(self, line: str) -> LineClass:
        p = _parse(line)
        open_kind = self._open.get(p.process)
        if open_kind is not None:
            if p.level is None and not _EXCEPTION.match(p.body):
                return LineClass(open_kind, detail="traceback")
            del self._open[p.process]
        result = classify(line)
        if _TRACEBACK.search(p.body) and result.kind in ("error", "warning"):
            if p.level is None:
                self._open[p.process] = result.kind
        return result


def _is_structure(body: str) -> bool:
    """Traceback scaffolding: the header, frames, source lines and caret markers."""
    return bool(
        _TRACEBACK.search(body)
        or _FRAME.match(body)
        or _CARETS.match(body)
        or body[:1].isspace()
        or not body.strip()
        or body.strip() in ("...", "^")
    )


def explain_failure(lines: list[str], max_lines: int = 6) -> list[str]:
    """The few lines that explain a failure: error lines and the exception messages at
    the end of tracebacks (with their wrapped continuation), never the whole traceback.

    Known causes (memory, KV cache, heads vs TP, ports, NCCL, gated repos) come first
    when there are more candidates than `max_lines`; the result keeps log order.
    """
    candidates: list[tuple[int, int, str]] = []  # (score, index, cleaned line)
    seen: set[str] = set()
    wrapping = False  # the previous kept line was an exception message that may wrap
    last_frame: dict[str, tuple[int, str]] = {}  # process -> its last traceback frame line
    tracker = StreamClassifier()
    for index, raw in enumerate(lines):
        p = _parse(raw)
        kind = tracker.classify(raw).kind
        body = p.body.strip()
        text = clean(raw).strip()
        if _FRAME.match(p.body):
            last_frame[p.process] = (index, text)
        if _STATE_DUMP.search(raw):
            continue
        is_exception = bool(_EXCEPTION.match(p.body) or _PYDANTIC_ERROR.search(p.body))
        if wrapping and p.level is None and body[:1].islower():
            # A wrapped exception message ("... is less than" / "desired GPU memory ...").
            if body not in seen:
                seen.add(body)
                candidates.append((2, index, text))
            continue
        wrapping = False
        if kind != "error":
            continue
        if _is_structure(p.body) and not is_exception:
            continue
        if body in seen:
            continue
        seen.add(body)
        wrapping = is_exception
        frame = last_frame.get(p.process)
        if _BARE_EXCEPTION.match(body) and frame is not None and frame[1] not in seen:
            seen.add(frame[1])
            candidates.append((2, frame[0], frame[1]))
        cause = _known_cause(body)
        # A known cause outranks the generic "engine failed" consequence lines.
        score = 3 if cause and cause not in _CONSEQUENCES else (2 if is_exception else 1)
        candidates.append((score, index, text))
    if len(candidates) > max_lines:
        keep = sorted(candidates, key=lambda c: (-c[0], c[1]))[:max_lines]
        candidates = sorted(keep, key=lambda c: c[1])
    return [c[2] for c in candidates]
