"""Smoke checks of a running OpenAI-compatible server: health, models, chat, tool call, streaming.

The checks follow Step 5 of NVIDIA's two-Spark vLLM playbook (the exact chat and `get_weather`
requests) and the streaming pitfall (missing or scrambled tokens) in the vLLM-on-Spark notes.
Each check is a `SmokeResult` with the client-side latency, the request sent, an excerpt of
the answer and, on failure, the likely cause and the remedy.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic.dataclasses import dataclass as record

from spark_tui.core.errors import InputError
from spark_tui.core.timeouts import SMOKE_TIMEOUT_S
from spark_tui.ops.events import Emit, ResultEvent
from spark_tui.ops.json_records import RECORD_CONFIG, JsonRecord

CHECKS = ("health", "models", "chat", "tool_call", "streaming")
HAIKU_PROMPT = "Write a haiku about a GPU."
WEATHER_PROMPT = "Use get_weather to look up the weather in Boston."
# The playbook's tool declaration, byte for byte.
WEATHER_TOOL: dict[str, Any] = {
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
# Enough for a reasoning model to think and still answer (the playbook's value).
MAX_TOKENS = 4096
# Context kept free for the prompt (with the tool declaration) when max_tokens is capped
# to a small max_model_len.
PROMPT_ROOM = 512
# The playbook's tool made strict, with its one argument fixed: a forced call
# (tool_choice "required") must then come back as exactly get_weather({"location": "Boston"})
# whatever the model, which tells the server's tool calling apart from the model's will.
FORCED_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get current weather for a location.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string", "enum": ["Boston"]}},
            "required": ["location"],
            "additionalProperties": False,
        },
    },
}
FORCED_MAX_TOKENS = 256


def forced_call_body(model: str | None, max_tokens: int = FORCED_MAX_TOKENS) -> dict[str, Any]:
    """The forced call's request: one call (`parallel_tool_calls` false, which vLLM turns
    into a grammar that ends after the first call) of the strict tool, so the server's
    output is that call and nothing else."""
    return {
        "model": model or "<model-id>",
        "messages": [{"role": "user", "content": WEATHER_PROMPT}],
        "tools": [FORCED_TOOL],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_tokens": max_tokens,
    }


EXCERPT_CHARS = 400
CONNECT_TIMEOUT_S = 5.0

UNREACHABLE_CAUSE = "server not reachable"
UNREACHABLE_REMEDY = (
    "is the cluster running? check with `spark-tui status --inventory FILE`; "
    "when the API is reached through an SSH forward, make sure it is open "
    "(ssh -N -L 8000:127.0.0.1:8000 USER@HEAD) and that --base-url names its local port"
)

# Tool-call parsers for common model families (vLLM tool-calling guide); used in remedies only.
_TOOL_PARSERS = (
    ("glm-4.5", "glm45"),
    ("glm-4.6", "glm45"),
    ("glm", "glm47"),
    ("qwen3", "qwen3_xml (or qwen3_coder for Qwen3-Coder)"),
    ("qwen2.5", "hermes"),
    ("gpt-oss", "openai"),
    ("llama-4", "llama4_pythonic"),
    ("llama", "llama3_json"),
    ("mistral", "mistral"),
    ("deepseek", "deepseek_v3"),
    ("gemma", "gemma4 (Gemma 4) or pythonic"),
    ("nemotron", "qwen3_coder (Nemotron 3) or llama3_json"),
    ("kimi", "kimi_k2"),
)
_REASONING_MARKERS = ("<think>", "</think>", "<|channel|>analysis")


@record(config=RECORD_CONFIG)
class SmokeRequest:
    """What a check sent: method, URL and an excerpt of the JSON body."""

    method: str
    url: str
    body: str | None = None


@record(config=RECORD_CONFIG)
class SmokeResult(JsonRecord):
    """One smoke check: pass or fail, client-side latency, request, answer excerpt, diagnosis."""

    name: str
    ok: bool
    latency_s: float
    request: SmokeRequest
    response_excerpt: str = ""
    detail: str = ""
    cause: str | None = None
    remedy: str | None = None
    # Figures a caller may show: status code, finish_reason, model id, tool call, ...
    data: dict[str, Any] = field(default_factory=dict)

    def to_event(self) -> ResultEvent:
        return ResultEvent(kind="smoke", payload=self.to_dict())

    def summary(self) -> str:
        """One line for a terminal: name, verdict, latency and what was seen."""
        verdict = "ok" if self.ok else "FAIL"
        return f"{self.name:<10} {verdict:<4} {_fmt_latency(self.latency_s):>8}  {self.detail}"


def _fmt_latency(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


# The variable vLLM reads its API key from; spark-tui's launch passes `--api-key` as it.
API_KEY_ENV = "VLLM_API_KEY"
API_KEY_REMEDY = (
    f"export {API_KEY_ENV}=<the key the server was launched with> in this shell and run "
    "again (smoke and bench send it as the bearer token)"
)


def api_key_or_env(api_key: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to send: the one given, else VLLM_API_KEY of this process's environment
    (the variable vLLM itself reads); an empty string means none."""
    if api_key is not None:
        return api_key or None
    env = os.environ if environ is None else environ
    return env.get(API_KEY_ENV) or None


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The Authorization header for `api_key` (resolved with api_key_or_env)."""
    key = api_key_or_env(api_key)
    return {"Authorization": f"Bearer {key}"} if key else {}


def normalize_base_url(base_url: str) -> str:
    """`http://h:8000`, `http://h:8000/` and `http://h:8000/v1` all name the same server."""
    url = base_url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    if "://" not in url:
        url = "http://" + url
    remedy = "pass the server's address, e.g. --base-url http://127.0.0.1:8000"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise InputError(f"not a URL: {base_url!r} ({exc})", remedy) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError(f"not an http(s) server address: {base_url!r}", remedy)
    return url


def tool_parser_hint(model: str | None) -> str:
    """The tool-call parser vLLM documents for this model's family, or a generic pointer."""
    low = (model or "").lower()
    for key, parser in _TOOL_PARSERS:
        if key in low:
            return parser
    return "the parser the vLLM tool-calling guide names for your model family"


def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _body_excerpt(body: dict[str, Any] | None) -> str | None:
    return None if body is None else _excerpt(json.dumps(body, ensure_ascii=False), 300)


def _error_message(resp: httpx.Response) -> str:
    """The message of an OpenAI/vLLM error body (`{"error": {...}}` or `{"message": ...}`)."""
    try:
        data = resp.json()
    except ValueError:
        return resp.text.strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if data.get("message"):
            return str(data["message"])
        if data.get("detail"):
            return str(data["detail"])
    return resp.text.strip()


def _reasoning_of(obj: dict[str, Any]) -> str:
    """Reasoning text: newer vLLM calls it `reasoning`, older `reasoning_content`."""
    for key in ("reasoning", "reasoning_content"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


class _Unreachable(Exception):
    """The server did not accept a connection."""


class _Checker:
    """Runs the checks in order against one server with one httpx client."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str | None,
        expect_reasoning: bool | None,
        tool_call_parser: str | None,
        max_tokens: int,
    ) -> None:
        self.client = client
        self.base = base_url
        self.requested_model = model
        self.model = model
        self.expect_reasoning = expect_reasoning
        self.tool_call_parser = tool_call_parser
        self.max_tokens = max_tokens
        self.unreachable: str | None = None

    # -- plumbing -------------------------------------------------------------------------

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[httpx.Response, float]:
        start = time.perf_counter()
        try:
            resp = await self.client.request(method, self.base + path, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return resp, time.perf_counter() - start

    def _unreachable_result(
        self, name: str, req: SmokeRequest, why: str, latency: float, sent: bool = True
    ) -> SmokeResult:
        if self.unreachable is None:
            self.unreachable = why
        detail = (
            f"no connection to {self.base} ({why})"
            if sent
            else f"not sent: {self.base} did not accept a connection ({self.unreachable})"
        )
        return SmokeResult(
            name,
            False,
            latency,
            req,
            detail=detail,
            cause=UNREACHABLE_CAUSE,
            remedy=UNREACHABLE_REMEDY,
        )

    def _http_failure(
        self, name: str, req: SmokeRequest, resp: httpx.Response, latency: float
    ) -> SmokeResult:
        msg = _error_message(resp)
        cause = f"HTTP {resp.status_code}: {_excerpt(msg, 200)}"
        remedy = "read the head rank's log (`spark-tui logs --rank 0`) for the matching error"
        low = msg.lower()
        if resp.status_code == 404 and "model" in low:
            cause = f"the model id {self.model!r} is not served"
            remedy = "use an id listed by /v1/models (or pass --model with one of them)"
        elif resp.status_code in (502, 503, 504):
            cause = f"HTTP {resp.status_code}: the server (or a proxy in front of it) is not ready"
            remedy = "wait for 'Application startup complete.' in the head rank's log, then retry"
        elif resp.status_code == 401:
            cause = "HTTP 401: the server requires an API key"
            remedy = API_KEY_REMEDY
        return SmokeResult(
            name,
            False,
            latency,
            req,
            response_excerpt=_excerpt(resp.text),
            detail=f"HTTP {resp.status_code}",
            cause=cause,
            remedy=remedy,
            data={"status": resp.status_code},
        )

    def _timeout_result(self, name: str, req: SmokeRequest, latency: float) -> SmokeResult:
        return SmokeResult(
            name,
            False,
            latency,
            req,
            detail=f"no answer within {latency:.0f} s",
            cause="the server accepted the connection but did not answer in time",
            remedy=(
                "the server may still be compiling or be overloaded: check the head rank's log, "
                "then retry with a longer timeout"
            ),
        )

    async def run(self, name: str) -> SmokeResult:
        method, path, body = self._request_for(name)
        req = SmokeRequest(method, self.base + path, _body_excerpt(body))
        if self.unreachable is not None:
            return self._unreachable_result(name, req, self.unreachable, 0.0, sent=False)
        if name in ("chat", "tool_call", "streaming") and not self.model:
            return SmokeResult(
                name,
                False,
                0.0,
                req,
                detail="not sent: no model id (the models check found none)",
                cause="no served model id to address",
                remedy="fix the models check first, or pass --model with the served id",
            )
        start = time.perf_counter()
        try:
            check: Callable[[SmokeRequest], Awaitable[SmokeResult]] = getattr(
                self, f"_check_{name}"
            )
            return await check(req)
        except _Unreachable as exc:
            return self._unreachable_result(name, req, str(exc), time.perf_counter() - start)
        except httpx.TimeoutException:
            return self._timeout_result(name, req, time.perf_counter() - start)
        except httpx.HTTPError as exc:
            return SmokeResult(
                name,
                False,
                time.perf_counter() - start,
                req,
                detail=f"{type(exc).__name__}: {exc}",
                cause="the HTTP exchange broke off",
                remedy="check the head rank's log and the SSH forward, then retry",
            )

    def _chat_body(self, prompt: str, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model or "<model-id>",
            "messages": [{"role": "user", "content": prompt}],
        }
        body.update(extra)
        body["max_tokens"] = self.max_tokens
        return body

    def _request_for(self, name: str) -> tuple[str, str, dict[str, Any] | None]:
        if name == "health":
            return "GET", "/health", None
        if name == "models":
            return "GET", "/v1/models", None
        if name == "chat":
            return "POST", "/v1/chat/completions", self._chat_body(HAIKU_PROMPT)
        if name == "tool_call":
            return (
                "POST",
                "/v1/chat/completions",
                self._chat_body(WEATHER_PROMPT, tools=[WEATHER_TOOL], tool_choice="auto"),
            )
        if name == "streaming":
            return (
                "POST",
                "/v1/chat/completions",
                self._chat_body(HAIKU_PROMPT, temperature=0, stream=True),
            )
        raise ValueError(f"unknown smoke check {name!r}")

    # -- the checks -----------------------------------------------------------------------

    async def _check_health(self, req: SmokeRequest) -> SmokeResult:
        resp, latency = await self._send("GET", "/health")
        if resp.status_code == 200:
            return SmokeResult(
                "health", True, latency, req, _excerpt(resp.text), "HTTP 200", data={"status": 200}
            )
        if resp.status_code == 503:
            return SmokeResult(
                "health",
                False,
                latency,
                req,
                _excerpt(resp.text),
                "HTTP 503",
                cause="the server is up but not ready (still loading, or its engine died)",
                remedy=(
                    "wait for 'Application startup complete.' in the head rank's log; if a rank "
                    "failed, read `spark-tui logs` for why"
                ),
                data={"status": 503},
            )
        return self._http_failure("health", req, resp, latency)

    def _fit_max_tokens(self, data: Any) -> None:
        """vLLM refuses max_tokens above the served max_model_len with a 400: keep the
        requests within the context the server lists (room left for the prompt)."""
        try:
            lens = [int(m["max_model_len"]) for m in data.get("data", []) if "max_model_len" in m]
        except (AttributeError, TypeError, ValueError, KeyError):
            return
        if lens and min(lens) - PROMPT_ROOM < self.max_tokens:
            self.max_tokens = max(16, min(lens) - PROMPT_ROOM)

    async def _check_models(self, req: SmokeRequest) -> SmokeResult:
        resp, latency = await self._send("GET", "/v1/models")
        if resp.status_code != 200:
            return self._http_failure("models", req, resp, latency)
        try:
            data = resp.json()
            ids = [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            ids = []
        base = SmokeResult("models", False, latency, req, _excerpt(resp.text), data={"ids": ids})
        self._fit_max_tokens(data)
        if not ids:
            base.detail = "no model listed"
            base.cause = "the server lists no model"
            base.remedy = "check the head rank's log: the model did not load"
            return base
        if self.requested_model is None:
            self.model = ids[0]
            base.ok = True
            base.detail = f"serving {ids[0]}" + (f" (+{len(ids) - 1} aliases)" if ids[1:] else "")
            base.data["model"] = ids[0]
            return base
        if self.requested_model in ids:
            base.ok = True
            base.detail = f"serving {self.requested_model}"
            base.data["model"] = self.requested_model
            return base
        # Keep testing with what the server does serve, so the other checks still say something.
        self.model = ids[0]
        base.detail = f"{self.requested_model} not listed; served: {', '.join(ids)}"
        base.cause = "the served model id differs from the recipe's model"
        base.remedy = (
            "clients must use a listed id: pass --model with one of them, or relaunch with "
            f"--served-model-name {self.requested_model}"
        )
        base.data["model"] = ids[0]
        return base

    async def _post_json(self, body: dict[str, Any]) -> tuple[httpx.Response, float]:
        return await self._send("POST", "/v1/chat/completions", body)

    async def _check_chat(self, req: SmokeRequest) -> SmokeResult:
        _, _, body = self._request_for("chat")
        resp, latency = await self._post_json(body or {})
        if resp.status_code != 200:
            return self._http_failure("chat", req, resp, latency)
        choice, message = _first_choice(resp)
        finish = choice.get("finish_reason")
        content = message.get("content") or ""
        reasoning = _reasoning_of(message)
        usage = _usage(resp)
        data = {
            "finish_reason": finish,
            "content_chars": len(content),
            "reasoning_chars": len(reasoning),
            "completion_tokens": usage.get("completion_tokens"),
        }
        result = SmokeResult("chat", False, latency, req, _excerpt(resp.text), data=data)
        shown = " ".join(content.split())[:60]
        if finish == "length":
            spent = "reasoning" if reasoning and not content.strip() else "the reply"
            result.detail = f"finish_reason length after {usage.get('completion_tokens')} tokens"
            result.cause = (
                f"the reply hit max_tokens={self.max_tokens} before the answer was complete "
                f"(the model spent its budget on {spent})"
            )
            result.remedy = (
                "raise max_tokens (reasoning models need room for reasoning plus the answer), "
                "or lower the reasoning effort; check --max-model-len leaves room for output"
            )
            return result
        if not content.strip():
            result.detail = f"empty answer (finish_reason {finish})"
            result.cause = "the server answered 200 with no content"
            result.remedy = (
                "if the reasoning holds the whole answer, check the --reasoning-parser for this "
                "model; otherwise read the head rank's log"
            )
            return result
        leaked = [m for m in _REASONING_MARKERS if m in content]
        if self.expect_reasoning and not reasoning:
            result.detail = f"answer with no separate reasoning (finish_reason {finish})"
            result.cause = (
                "reasoning markers in the content: no reasoning parser split them out"
                if leaked
                else "the recipe sets a reasoning parser but the answer carries no reasoning"
            )
            result.remedy = (
                "relaunch with the recipe's --reasoning-parser for this model family; "
                "clients read message.reasoning (older vLLM: reasoning_content)"
            )
            return result
        result.ok = finish in ("stop", None)
        if not result.ok:
            result.detail = f"unexpected finish_reason {finish!r}"
            result.cause = f"the reply ended with finish_reason {finish!r} instead of stop"
            result.remedy = "read the head rank's log for an abort or error during generation"
            return result
        result.detail = f"finish_reason {finish}: {shown!r}" + (
            f" (+{len(reasoning)} chars of reasoning)" if reasoning else ""
        )
        if leaked and not self.expect_reasoning:
            result.detail += f"; note: {leaked[0]} appears in the content"
        return result

    async def _check_tool_call(self, req: SmokeRequest) -> SmokeResult:
        _, _, body = self._request_for("tool_call")
        resp, latency = await self._post_json(body or {})
        parser = self.tool_call_parser or tool_parser_hint(self.model)
        setup_remedy = (
            f"relaunch with --enable-auto-tool-choice and --tool-call-parser {parser} "
            "(the recipe's parser for this model family) and a chat template that renders "
            "tools (the model's own, or --chat-template); the same flags on every rank"
        )
        if resp.status_code != 200:
            msg = _error_message(resp)
            if "auto" in msg.lower() and "tool" in msg.lower():
                return SmokeResult(
                    "tool_call",
                    False,
                    latency,
                    req,
                    _excerpt(resp.text),
                    detail=f"HTTP {resp.status_code}: {_excerpt(msg, 160)}",
                    cause=(
                        "the server was started without automatic tool choice "
                        "(--enable-auto-tool-choice / --tool-call-parser missing)"
                    ),
                    remedy=setup_remedy,
                    data={"status": resp.status_code},
                )
            return self._http_failure("tool_call", req, resp, latency)
        choice, message = _first_choice(resp)
        finish = choice.get("finish_reason")
        calls = message.get("tool_calls") or []
        content = message.get("content") or ""
        result = SmokeResult(
            "tool_call",
            False,
            latency,
            req,
            _excerpt(resp.text),
            data={"finish_reason": finish, "tool_calls": len(calls)},
        )
        if not calls:
            result.detail = f"plain-text answer, no tool_calls (finish_reason {finish})"
            if "get_weather" in content or "<tool_call>" in content or '"name"' in content:
                result.cause = (
                    "the model wrote the call as text: the tool-call parser did not "
                    "recognise its format (wrong --tool-call-parser for this model)"
                )
                result.remedy = setup_remedy
                return result
            forced = await self._forced_call()
            result.data["forced_call"] = forced
            if forced.get("ok"):
                result.cause = (
                    "the model does not call tools on its own: it answered in plain text, "
                    'while a forced call (tool_choice "required") came back parsed as '
                    f"get_weather({forced.get('arguments')}), so the server's tool calling "
                    "(--enable-auto-tool-choice, the parser, the chat template) works"
                )
                result.remedy = (
                    "use a model that calls tools when asked (an instruct model with tool "
                    "support); with this one, clients must force calls with tool_choice"
                )
                return result
            result.cause = (
                "the model answered in plain text: tool calling is not set up "
                "(parser, --enable-auto-tool-choice or chat template), or the model "
                'does not support tools; a forced call (tool_choice "required") failed '
                f"too: {forced.get('detail')}"
            )
            result.remedy = setup_remedy
            return result
        call = calls[0] if isinstance(calls[0], dict) else {}
        fn = call.get("function") or {}
        name = fn.get("name")
        raw_args = fn.get("arguments") or ""
        try:
            args = json.loads(raw_args) if isinstance(raw_args, str) else dict(raw_args)
        except (ValueError, TypeError):
            args = None
        result.data.update({"function": name, "arguments": raw_args})
        if name != "get_weather":
            result.detail = f"tool call for {name!r}, not get_weather"
            result.cause = "the parser produced a call for a tool that was not declared"
            result.remedy = f"check --tool-call-parser ({parser}) matches the model family"
            return result
        if args is None:
            result.detail = f"get_weather with arguments that are not JSON: {raw_args!r}"
            result.cause = "the tool-call parser produced malformed arguments"
            result.remedy = f"check --tool-call-parser ({parser}) and the chat template"
            return result
        if "boston" not in json.dumps(args).lower():
            result.detail = f"get_weather({raw_args}) does not name Boston"
            result.cause = "the call's arguments lost the location from the prompt"
            result.remedy = f"check --tool-call-parser ({parser}) and the chat template"
            return result
        if finish != "tool_calls":
            result.detail = f"get_weather({raw_args}) but finish_reason {finish!r}"
            result.cause = "a tool call came back without finish_reason tool_calls"
            result.remedy = f"update the image or check --tool-call-parser ({parser})"
            return result
        result.ok = True
        result.detail = f"get_weather({raw_args}), finish_reason tool_calls"
        return result

    async def _forced_call(self) -> dict[str, Any]:
        """A call with tool_choice "required" on a strict tool: does the server parse one?"""
        body = forced_call_body(self.model, min(self.max_tokens, FORCED_MAX_TOKENS))
        try:
            resp, _latency = await self._post_json(body)
        except httpx.HTTPError as exc:
            return {"ok": False, "detail": f"request failed: {exc}"}
        if resp.status_code != 200:
            return {
                "ok": False,
                "detail": f"HTTP {resp.status_code}: {_excerpt(_error_message(resp), 160)}",
            }
        choice, message = _first_choice(resp)
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        fn = (calls[0].get("function") or {}) if calls else {}
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            args = None
        ok = fn.get("name") == "get_weather" and isinstance(args, dict)
        detail = (
            f"get_weather({raw}), finish_reason {choice.get('finish_reason')}"
            if ok
            else f"no parsed call (finish_reason {choice.get('finish_reason')})"
        )
        return {"ok": ok, "arguments": raw, "detail": detail}

    async def _check_streaming(self, req: SmokeRequest) -> SmokeResult:
        _, _, body = self._request_for("streaming")
        stream_body = dict(body or {})
        plain_body = {k: v for k, v in stream_body.items() if k != "stream"}
        start = time.perf_counter()
        try:
            async with self.client.stream(
                "POST", self.base + "/v1/chat/completions", json=stream_body
            ) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    return self._http_failure("streaming", req, resp, time.perf_counter() - start)
                lines = [line async for line in resp.aiter_lines()]
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _Unreachable(f"{type(exc).__name__}: {exc}") from exc
        latency = time.perf_counter() - start
        parsed = parse_sse_chat(lines)
        excerpt = _excerpt(
            "\n".join(lines[:3] + ["..."] + lines[-3:]) if len(lines) > 6 else "\n".join(lines)
        )
        data: dict[str, Any] = {
            "chunks": parsed.chunks,
            "finish_reason": parsed.finish_reason,
            "content_chars": len(parsed.content),
        }
        result = SmokeResult("streaming", False, latency, req, excerpt, data=data)
        if parsed.problems:
            result.detail = "malformed stream: " + "; ".join(parsed.problems[:3])
            result.cause = "the SSE stream is not well-formed"
            result.remedy = (
                "if a proxy sits between you and the server, make sure it does not buffer or "
                "rewrite text/event-stream; otherwise try without streaming and read the head "
                "rank's log"
            )
            return result
        resp2, _ = await self._post_json(plain_body)
        if resp2.status_code != 200:
            return self._http_failure("streaming", req, resp2, latency)
        _, message = _first_choice(resp2)
        plain_content = message.get("content") or ""
        plain_reasoning = _reasoning_of(message)
        diffs = []
        if parsed.content != plain_content:
            diffs.append(("content", parsed.content, plain_content))
        if parsed.reasoning != plain_reasoning:
            diffs.append(("reasoning", parsed.reasoning, plain_reasoning))
        if diffs:
            what, streamed, plain = diffs[0]
            at = _first_difference(streamed, plain)
            result.detail = (
                f"streamed {what} differs from the non-streamed reply at character {at} "
                f"(streamed {len(streamed)} chars, plain {len(plain)})"
            )
            result.data["differs_at"] = at
            result.cause = (
                "missing or scrambled tokens in the streamed reply (a known vLLM issue with "
                "some large MoE models; the non-streamed reply is the reference)"
            )
            result.remedy = (
                "1) retry without streaming: clients that can, turn stream off; "
                "2) relaunch with --enforce-eager on every rank (slower) and run the smoke "
                "checks again; 3) if eager fixes it, compare the image and vLLM version with "
                "a known-good one before treating it as a model problem"
            )
            return result
        result.ok = True
        result.detail = (
            f"{parsed.chunks} chunks, [DONE], finish_reason {parsed.finish_reason}; "
            "matches the non-streamed reply"
        )
        return result


def _first_choice(resp: httpx.Response) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        data = resp.json()
        choice = data["choices"][0]
        return choice, choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError):
        return {}, {}


def _usage(resp: httpx.Response) -> dict[str, Any]:
    try:
        usage = resp.json().get("usage") or {}
        return usage if isinstance(usage, dict) else {}
    except (ValueError, AttributeError):
        return {}


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


@dataclass
class SSEChat:
    """A streamed chat completion reassembled: text, finish reason and what was wrong."""

    content: str = ""
    reasoning: str = ""
    role: str | None = None
    finish_reason: str | None = None
    chunks: int = 0
    content_chunks: int = 0
    done: bool = False
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)


_SSE_FIELD = re.compile(r"^(data|event|id|retry):")


def parse_sse_chat(lines: list[str]) -> SSEChat:
    """Reassemble an SSE chat stream, noting every way it departs from vLLM's shape."""
    out = SSEChat()
    for raw in lines:
        line = raw.rstrip("\r")
        if not line or line.startswith(":"):
            continue
        if not _SSE_FIELD.match(line):
            out.problems.append(f"not an SSE field line: {line[:60]!r}")
            continue
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if out.done:
            out.problems.append("data after [DONE]")
            continue
        if payload == "[DONE]":
            out.done = True
            continue
        try:
            chunk = json.loads(payload)
        except ValueError:
            out.problems.append(f"chunk {out.chunks + 1} is not JSON: {payload[:60]!r}")
            continue
        out.chunks += 1
        if not isinstance(chunk, dict):
            out.problems.append(f"chunk {out.chunks} is not an object")
            continue
        if "error" in chunk:
            out.problems.append(f"error in stream: {str(chunk['error'])[:120]}")
            continue
        if chunk.get("object") not in (None, "chat.completion.chunk"):
            out.problems.append(f"chunk {out.chunks} has object {chunk.get('object')!r}")
        if isinstance(chunk.get("usage"), dict):
            out.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("role"):
                if out.role is None and (out.content or out.reasoning):
                    out.problems.append("role delta after content")
                out.role = out.role or delta["role"]
            text = delta.get("content")
            if isinstance(text, str) and text:
                out.content += text
                out.content_chunks += 1
            # vLLM sends both names with the same text in some versions: take one.
            rtext = delta.get("reasoning")
            if not isinstance(rtext, str) or not rtext:
                rtext = delta.get("reasoning_content")
            if isinstance(rtext, str) and rtext:
                out.reasoning += rtext
            for tc in delta.get("tool_calls") or []:
                slot = out.tool_calls.setdefault(
                    int(tc.get("index", 0)), {"name": "", "arguments": ""}
                )
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["name"] = fn["name"]
                if fn.get("arguments"):
                    slot["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
    if out.chunks == 0:
        out.problems.append("no chunks")
    if out.role is None and out.chunks:
        out.problems.append("no role delta")
    if out.chunks and not out.content and not out.tool_calls:
        out.problems.append("no content deltas")
    if out.chunks and out.finish_reason is None:
        out.problems.append("no finish_reason")
    if not out.done:
        out.problems.append("stream did not end with data: [DONE]")
    return out


async def run_smoke(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    expect_reasoning: bool | None = None,
    tool_call_parser: str | None = None,
    max_tokens: int = MAX_TOKENS,
    timeout: float = SMOKE_TIMEOUT_S,
    checks: tuple[str, ...] = CHECKS,
    transport: httpx.AsyncBaseTransport | None = None,
    emit: Emit[SmokeResult] | None = None,
) -> list[SmokeResult]:
    """Run the checks in order (health, models, chat, tool, stream) and return their
    results; `emit` gets each result as soon as it is known.

    `api_key` None sends VLLM_API_KEY from the environment when it is set.
    """
    headers = auth_headers(api_key)
    base = normalize_base_url(base_url)
    limits = httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S))
    results: list[SmokeResult] = []
    # trust_env off: an http_proxy in the environment must not intercept a loopback forward.
    async with httpx.AsyncClient(
        timeout=limits, headers=headers, trust_env=False, transport=transport
    ) as client:
        checker = _Checker(client, base, model, expect_reasoning, tool_call_parser, max_tokens)
        for name in checks:
            result = await checker.run(name)
            results.append(result)
            if emit is not None:
                emit(result)
    return results


def all_passed(results: list[SmokeResult]) -> bool:
    """True when there is at least one result and every one passed."""
    return bool(results) and all(r.ok for r in results)


def server_unreachable(results: list[SmokeResult]) -> bool:
    """True when every check failed because the server did not accept a connection."""
    return bool(results) and all(r.cause == UNREACHABLE_CAUSE for r in results)
