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
