"""The same requests to two OpenAI-compatible servers (the stand-in and real vLLM), reduced to
what must agree: status codes, JSON keys and value types (not values: a random model and a
simulated one say different things), SSE framing, and /metrics names and labels."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from spark_tui.ops.smoke import forced_call_body

SERVED = "tiny-qwen2"
# The lab recipe's flags: real vLLM runs them on the tiny local model, the stand-in on a
# model of its catalogue under the same served name.
SERVE_FLAGS = (
    "--served-model-name",
    SERVED,
    "--max-model-len",
    "2048",
    "--max-num-seqs",
    "8",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get current weather for a location.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}


def _msgs(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def requests(model: str) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """name -> (method, path, body): the requests both servers get."""
    chat = {"model": model, "messages": _msgs("Write a haiku about a GPU."), "max_tokens": 16}
    return {
        "health": ("GET", "/health", None),
        "version": ("GET", "/version", None),
        "models": ("GET", "/v1/models", None),
        "chat": ("POST", "/v1/chat/completions", chat),
        "stream": (
            "POST",
            "/v1/chat/completions",
            {**chat, "stream": True, "stream_options": {"include_usage": True}},
        ),
        # The smoke's own forced call (one strict tool, tool_choice "required").
        "tool_required": ("POST", "/v1/chat/completions", forced_call_body(model)),
        "completion": (
            "POST",
            "/v1/completions",
            {"model": model, "prompt": "The GPU", "max_tokens": 8},
        ),
        "err_model": ("POST", "/v1/chat/completions", {**chat, "model": "no-such-model"}),
        "err_max_tokens": ("POST", "/v1/chat/completions", {**chat, "max_tokens": 100000}),
        "err_json": ("POST", "/v1/chat/completions", None),
        "err_path": ("GET", "/v1/no-such-route", None),
    }


def shape(value: Any) -> Any:
    """Keys and types of a JSON value (lists by the shape of their first item)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


@dataclass
class Reply:
    """One reply reduced for comparison."""

    status: int
    content_type: str
    body: Any = None  # shape of the JSON body
    events: list[Any] = field(default_factory=list)  # shapes of SSE data events, in order
    framing: list[str] = field(default_factory=list)  # "data"/"[DONE]"/"blank" per SSE line
    text: str = ""


def _sse(text: str) -> tuple[list[Any], list[str]]:
    events: list[Any] = []
    framing: list[str] = []
    for line in text.split("\n"):
        if line == "":
            framing.append("blank")
        elif line == "data: [DONE]":
            framing.append("[DONE]")
        elif line.startswith("data: "):
            framing.append("data")
            events.append(json.loads(line[6:]))
        else:
            framing.append("other:" + line[:20])
    return events, framing


def send(base: str, model: str, timeout: float = 300) -> dict[str, Reply]:
    out: dict[str, Reply] = {}
    with httpx.Client(base_url=base, timeout=timeout) as client:
        for name, (method, path, body) in requests(model).items():
            if name == "err_json":
                resp = client.post(
                    path, content=b"{not json", headers={"content-type": "application/json"}
                )
            else:
                resp = client.request(method, path, json=body)
            ctype = resp.headers.get("content-type", "").split(";")[0]
            reply = Reply(resp.status_code, ctype, text=resp.text)
            if ctype == "text/event-stream":
                events, reply.framing = _sse(resp.text)
                reply.events = events
            elif resp.content:
                try:
                    reply.body = resp.json()
                except ValueError:
                    reply.body = None
            out[name] = reply
    return out


def stream_summary(events: list[Any]) -> list[str]:
    """The kinds of chunk in order, runs collapsed: role, content, finish, usage."""
    kinds: list[str] = []
    for ev in events:
        choices = ev.get("choices") or []
        if not choices:
            kind = "usage" if ev.get("usage") else "empty"
        else:
            delta = choices[0].get("delta") or {}
            if choices[0].get("finish_reason"):
                kind = "finish"
            elif "role" in delta:
                kind = "role"
            else:
                kind = "content"
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s")


def metric_names(text: str) -> dict[str, set[str]]:
    """vllm:* metric name -> its label names, from a /metrics page."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or not m.group(1).startswith("vllm:"):
            continue
        labels = {kv.split("=", 1)[0] for kv in re.findall(r'(\w+)="', m.group(2) or "")}
        out.setdefault(m.group(1), set()).update(labels)
    return out


def diff_shapes(real: Any, sim: Any, path: str = "") -> list[str]:
    """Where the stand-in's shape differs from real vLLM's (missing or extra keys, types)."""
    out: list[str] = []
    if isinstance(real, dict) and isinstance(sim, dict):
        for k in sorted(set(real) | set(sim)):
            if k not in sim:
                out.append(f"{path}.{k}: missing in the stand-in ({real[k]})")
            elif k not in real:
                out.append(f"{path}.{k}: only in the stand-in ({sim[k]})")
            else:
                out.extend(diff_shapes(real[k], sim[k], f"{path}.{k}"))
        return out
    if isinstance(real, list) and isinstance(sim, list):
        if real and sim:
            return diff_shapes(real[0], sim[0], path + "[]")
        return []
    # null vs a value is allowed both ways (optional fields), other type changes are not.
    if real != sim and "null" not in (real, sim):
        out.append(f"{path}: real {real}, stand-in {sim}")
    return out


def version_problems(real: dict[str, Reply], sim: dict[str, Reply]) -> list[str]:
    """Values the shapes do not compare: /version's release (the stand-in adds the local
    label `+sparktui.sim`, which marks it simulated) and the system_fingerprint built from it."""
    out: list[str] = []
    versions = {}
    for who, replies in (("real", real), ("stand-in", sim)):
        body = replies["version"].body
        version = body.get("version") if isinstance(body, dict) else None
        if not isinstance(version, str):
            out.append(f"/version of {who}: {body!r}")
            continue
        versions[who] = version
        chat = replies["chat"].body
        fingerprint = chat.get("system_fingerprint") if isinstance(chat, dict) else None
        # vLLM 0.32's "full" fingerprint: version, layout beyond one rank (tp2 ...), hash.
        layout = r"(-(tp|pp|dp)\d+)*(-ep)?"
        if not re.fullmatch(rf"vllm-{re.escape(version)}{layout}-[0-9a-f]{{8}}", str(fingerprint)):
            out.append(f"system_fingerprint of {who}: {fingerprint!r} (version {version})")
    if len(versions) == 2:
        real_release = versions["real"].split("+", 1)[0]
        sim_release = versions["stand-in"].split("+", 1)[0]
        if real_release != sim_release:
            out.append(f"/version: stand-in {versions['stand-in']}, real {versions['real']}")
    return out


@dataclass
class Family:
    """One metric family of a /metrics page: its type, label names, histogram buckets and
    the sum of its samples (per sample name), for what must agree between two servers."""

    kind: str
    labels: set[str] = field(default_factory=set)
    buckets: tuple[str, ...] = ()
    totals: dict[str, float] = field(default_factory=dict)


def families(text: str) -> dict[str, Family]:
    """vllm:* family name -> Family, from a Prometheus text page (`_created` gauges are
    families of their own, as prometheus_client declares them)."""
    out: dict[str, Family] = {}
    kinds: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE vllm:"):
            _hash, _type, name, kind = line.split(" ", 3)
            kinds[name] = kind
            out[name] = Family(kind)
            continue
        m = _SAMPLE.match(line)
        if not m or not m.group(1).startswith("vllm:"):
            continue
        sample = m.group(1)
        name = _family_of(sample, kinds)
        fam = out[name]
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        fam.labels.update(k for k in pairs if k != "le")
        if sample.endswith("_bucket") and "le" in pairs and pairs["le"] != "+Inf":
            if pairs["le"] not in fam.buckets:
                fam.buckets = (*fam.buckets, pairs["le"])
        value = float(line.rsplit(" ", 1)[1].replace("+Inf", "inf"))
        fam.totals[sample] = fam.totals.get(sample, 0.0) + value
    return out


def _family_of(sample: str, kinds: dict[str, str]) -> str:
    if sample in kinds:
        return sample
    for suffix in ("_total", "_bucket", "_count", "_sum"):
        base = sample.removesuffix(suffix)
        if base != sample and base in kinds:
            return base
    raise ValueError(f"sample {sample} has no # TYPE line")


def moved(before: dict[str, Family], after: dict[str, Family]) -> set[str]:
    """The families whose samples changed between two pages (`_created` gauges excepted)."""
    return {
        name
        for name, fam in after.items()
        if not name.endswith("_created") and name in before and fam.totals != before[name].totals
    }


def family_problems(real: dict[str, Family], sim: dict[str, Family]) -> list[str]:
    """Where the stand-in's families differ from real vLLM's: missing or extra names, types,
    label names and histogram buckets."""
    out: list[str] = []
    for name in sorted(set(real) - set(sim)):
        out.append(f"{name} ({real[name].kind}): missing in the stand-in")
    for name in sorted(set(sim) - set(real)):
        out.append(f"{name} ({sim[name].kind}): only in the stand-in")
    for name in sorted(set(real) & set(sim)):
        r, s = real[name], sim[name]
        if r.kind != s.kind:
            out.append(f"{name}: type {s.kind}, real vLLM {r.kind}")
        if r.labels != s.labels:
            out.append(f"{name}: labels {sorted(s.labels)}, real vLLM {sorted(r.labels)}")
        if r.buckets != s.buckets:
            out.append(f"{name}: buckets {s.buckets}, real vLLM {r.buckets}")
    return out


def metric_total(page: str, sample: str, **labels: str) -> float:
    """The sum of a sample's values over its label sets (those with `labels` only)."""
    total = 0.0
    for line in page.splitlines():
        if line.startswith(sample + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def relations(page: str) -> dict[str, tuple[float, float]]:
    """Pairs that real vLLM keeps equal on every page."""
    t = metric_total
    finished = t(page, "vllm:request_success_total") - t(
        page, "vllm:request_success_total", finished_reason="abort"
    )
    by_source = t(page, "vllm:prompt_tokens_by_source_total")
    return {
        "prompt tokens: counter vs per-request histogram": (
            t(page, "vllm:prompt_tokens_total"),
            t(page, "vllm:request_prompt_tokens_sum"),
        ),
        "prompt tokens: counter vs sum by source": (t(page, "vllm:prompt_tokens_total"), by_source),
        "generation tokens: counter vs per-request histogram": (
            t(page, "vllm:generation_tokens_total"),
            t(page, "vllm:request_generation_tokens_sum"),
        ),
        "finished requests vs TTFT observations": (
            finished,
            t(page, "vllm:time_to_first_token_seconds_count"),
        ),
        "finished requests vs e2e observations": (
            finished,
            t(page, "vllm:e2e_request_latency_seconds_count"),
        ),
        "ITL observations vs tokens after the first": (
            t(page, "vllm:inter_token_latency_seconds_count"),
            t(page, "vllm:generation_tokens_total") - finished,
        ),
        "cached prompt tokens vs prefix cache hits": (
            t(page, "vllm:prompt_tokens_cached_total"),
            t(page, "vllm:prefix_cache_hits_total"),
        ),
    }


def cache_block_size(page: str) -> str:
    """The KV block size a server's page reports (vllm:cache_config_info's block_size)."""
    m = re.search(r'^vllm:cache_config_info\{[^}]*\bblock_size="(\d+)"', page, re.M)
    if not m:
        raise ValueError("no vllm:cache_config_info with a block_size on the page")
    return m.group(1)
