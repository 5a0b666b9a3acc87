"""The simulated engine's OpenAI-compatible HTTP API (head only), on the standard library's
ThreadingHTTPServer (HTTP/1.1, keep-alive, chunked SSE streams, many concurrent clients).

Shapes follow shared/reference/vllm_api_*: compact JSON, `data: {...}\\n\\n` SSE frames with the
role delta first and `data: [DONE]` last, `reasoning` separated when --reasoning-parser is set,
tool calls only with --enable-auto-tool-choice and --tool-call-parser (otherwise vLLM's 400),
errors as `{"error": {"message", "type", "param", "code"}}`, 401 `{"error": "Unauthorized"}`
when --api-key is set. Access lines are logged like uvicorn's.
"""

from __future__ import annotations

import json
import secrets
import socketserver
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spark_tui.sim.engine import VERSION, generate
from spark_tui.sim.engine.catalogue import ModelSpec
from spark_tui.sim.engine.logs import Channel
from spark_tui.sim.engine.parser_metrics import ToolParserMetrics
from spark_tui.sim.engine.replicas import MetricsText, RequestQueue
from spark_tui.sim.engine.scheduler import Request

ROUTES: list[tuple[str, str]] = [
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/docs/oauth2-redirect", "GET, HEAD"),
    ("/redoc", "GET, HEAD"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/load", "GET"),
    ("/version", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/v1/models", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/invocations", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
]

AUTO_TOOL_ERROR = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


# Fixed per process, like a build's hash in vLLM's fingerprint.
_BUILD_ID = secrets.token_hex(4)


# The routes that need the engine (a broken engine fails them; /health does not notice).
_ENGINE_ROUTES = ("/v1/chat/completions", "/v1/completions", "/invocations", "/tokenize")


def fingerprint(args: Any = None) -> str:
    """vLLM's system_fingerprint ("full" mode, vLLM 0.32's default): its version, the
    parallel layout beyond one rank (tp2, pp2, dp2, ep) and a short hash of the config."""
    parts = [f"vllm-{VERSION}"]
    for flag, tag in (
        ("tensor_parallel_size", "tp"),
        ("pipeline_parallel_size", "pp"),
        ("data_parallel_size", "dp"),
    ):
        size = int(getattr(args, flag, 1) or 1)
        if size > 1:
            parts.append(f"{tag}{size}")
    if getattr(args, "enable_expert_parallel", False):
        parts.append("ep")
    parts.append(_BUILD_ID)
    return "-".join(parts)


def usage(prompt_tokens: int, completion_tokens: int, *, details: bool = False) -> dict[str, Any]:
    """A response's `usage`, in vLLM's key order; a whole (not streamed) response also names
    the token details it does not fill."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if details:
        out["prompt_tokens_details"] = None
        out["completion_tokens_details"] = None
    return out


class ApiError(Exception):
    """An error answered as vLLM's error JSON."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


class Group:
    """Consecutive generated tokens of one channel, streamed as one delta."""

    def __init__(self, channel: str, tool_index: int, text: str, count: int) -> None:
        self.channel = channel
        self.tool_index = tool_index
        self.text = text
        self.count = count


def group_pieces(pieces: list[generate.Piece]) -> list[Group]:
    """One step's tokens as deltas: same-channel runs joined, each tool header on its own."""
    out: list[Group] = []
    for p in pieces:
        last = out[-1] if out else None
        if (
            last is not None
            and p.channel != "tool_header"
            and last.channel == p.channel
            and last.tool_index == p.tool_index
        ):
            last.text += p.text
            last.count += 1
        else:
            out.append(Group(p.channel, p.tool_index, p.text, 1))
    return out


def dumps(obj: Any) -> bytes:
    """Compact JSON as pydantic's model_dump_json writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class ApiState:
    """What the HTTP handlers need: the served model, the flags, the engine."""

    def __init__(
        self,
        spec: ModelSpec,
        args: Any,
        served_names: list[str],
        max_model_len: int,
        scheduler: RequestQueue,
        metrics: MetricsText,
        channel: Channel,
    ) -> None:
        self.spec = spec
        self.args = args
        self.fingerprint = fingerprint(args)
        self.served_names = served_names
        self.max_model_len = max_model_len
        self.scheduler = scheduler
        self.metrics = metrics
        self.channel = channel
        self.ready = False
        self.dead_reason: str | None = None
        # Real vLLM keeps /health at 200 after its engine core died; requests then get 500.
        self.health_despite_dead = False
        # Set when a worker rank was lost after ready: real vLLM's head keeps answering
        # /health 200 until a request needs the engine; that request then fails (its
        # collective with the dead worker does) and the head exits: `broken_request` tells
        # the serve loop. `lost_peer` looks at the workers' connections right then, so a
        # request that comes before the loss was noticed fails too.
        self.engine_broken: str | None = None
        self.broken_request = False
        self.lost_peer: Callable[[], str | None] | None = None
        self.created = int(time.time())
        self.api_keys = list(args.api_key or [])
        self.access_log = not args.disable_uvicorn_access_log
        self.tools_enabled = bool(args.enable_auto_tool_choice and args.tool_call_parser)
        self.tool_parser = (
            ToolParserMetrics(served_names[0], args.tool_call_parser, self.tools_enabled)
            if args.tool_call_parser
            else None
        )
        self.reasoning_parser = bool(args.reasoning_parser)
        self.default_template_kwargs: dict[str, Any] = dict(args.default_chat_template_kwargs or {})
        self.in_flight = 0
        self.lock = threading.Lock()


class SimHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that binds without a reverse DNS lookup, like uvicorn."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


def make_server(host: str, port: int) -> SimHTTPServer:
    """Bind the API socket (raises OSError EADDRINUSE when the port is taken) and start
    answering at once: 503 until the engine is ready."""
    server = SimHTTPServer((host, port), Handler, bind_and_activate=False)
    try:
        server.server_bind()
        server.server_activate()
    except OSError:
        server.server_close()
        raise
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    ).start()
    return server


class Handler(BaseHTTPRequestHandler):
    """One HTTP connection."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    state: ApiState | None = None

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's access log: uvicorn-style lines are written by `_access`."""

    def version_string(self) -> str:
        return "uvicorn"

    # --- plumbing ---------------------------------------------------------------------
    def _access(self, status: int) -> None:
        st = self.state
        if st is None or not st.access_log:
            return
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        host, port = self.client_address[:2]
        st.channel.uvicorn(
            f'{host}:{port} - "{self.command} {self.path} HTTP/1.1" {status} {phrase}'
        )

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response_only(status)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-length", str(len(body)))
        if ctype:  # vLLM's /health answers an empty body with no content type
            self.send_header("content-type", ctype)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()
        self._access(status)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, dumps(obj))

    def _error(self, err: ApiError) -> None:
        self._json(err.status, err.body())

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw.decode("utf-8") or "{}")
        except json.JSONDecodeError as exc:
            # vLLM 0.32 answers with its request validator's (pydantic's) wording.
            raise ApiError(
                400,
                "1 validation error:\n  {'type': 'json_invalid', 'loc': 'body."
                f"{exc.pos}', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', "
                f"'ctx': {{'error': '{exc.msg}'}}}}",
                "Bad Request",
                f"body.{exc.pos}",
            ) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"Invalid JSON body: {exc}") from exc
        if not isinstance(data, dict):
            raise ApiError(400, "The request body must be a JSON object.")
        return data

    def _engine_broken(self) -> None:
        """The first request after a worker's loss: 500 as vLLM answers, then the head goes."""
        st = self.state
        assert st is not None
        message = "EngineCore encountered an issue. See stack trace (above) for the root cause."
        st.dead_reason = message
        with st.lock:
            st.broken_request = True
        self._error(ApiError(500, message, "InternalServerError"))

    def _authorised(self) -> bool:
        st = self.state
        if st is None or not st.api_keys or not self.path.startswith("/v1"):
            return True
        auth = self.headers.get("authorization", "")
        return any(auth == f"Bearer {key}" for key in st.api_keys)

    # --- routes -----------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self.do_GET()

    def _starting(self, path: str) -> None:
        """Answer while the engine is still starting (no state yet): not ready."""
        if path in ("/health", "/ping"):
            self._send(503, b"")
        else:
            self._error(ApiError(503, "The server is starting up.", "ServiceUnavailableError"))

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        st = self.state
        path = self.path.split("?", 1)[0]
        if st is None:
            self._starting(path)
            return
        if not self._authorised():
            self._json(401, {"error": "Unauthorized"})
            return
        if path in ("/health", "/ping"):
            if st.ready and (st.dead_reason is None or st.health_despite_dead):
                self._send(200, b"", "")
            else:
                self._send(503, b"", "")
            return
        if path == "/version":
            self._json(200, {"version": VERSION})
            return
        if path == "/load":
            self._json(200, {"server_load": st.in_flight})
            return
        if path == "/metrics":
            # The API server's own family comes after the engines', as on vLLM's page.
            page = st.metrics.render() + (st.tool_parser.render() if st.tool_parser else "")
            self._send(200, page.encode(), "text/plain; version=0.0.4; charset=utf-8")
            return
        if not st.ready:
            self._error(ApiError(503, "The server is starting up.", "ServiceUnavailableError"))
            return
        if path == "/v1/models":
            self._json(200, self._models())
            return
        self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        st = self.state
        path = self.path.split("?", 1)[0]
        try:
            body = self._body()
        except ApiError as err:
            self._error(err)
            return
        if st is None:
            self._starting(path)
            return
        if not self._authorised():
            self._json(401, {"error": "Unauthorized"})
            return
        if path == "/ping":
            self._send(200 if st.ready else 503, b"")
            return
        if st.ready and st.dead_reason is not None and st.health_despite_dead:
            self._error(ApiError(500, st.dead_reason, "InternalServerError"))
            return
        if not st.ready or st.dead_reason is not None:
            reason = st.dead_reason or "The server is starting up."
            self._error(ApiError(503, reason, "ServiceUnavailableError"))
            return
        if st.engine_broken is None and path in _ENGINE_ROUTES and st.lost_peer is not None:
            lost = st.lost_peer()
            if lost is not None:
                with st.lock:
                    st.engine_broken = st.engine_broken or lost
        if st.engine_broken is not None and path in _ENGINE_ROUTES:
            self._engine_broken()
            return
        try:
            if path in ("/v1/chat/completions", "/invocations"):
                self._chat(body)
            elif path == "/v1/completions":
                self._completion(body)
            elif path == "/tokenize":
                self._tokenize(body)
            else:
                self._json(404, {"detail": "Not Found"})
        except ApiError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _models(self) -> dict[str, Any]:
        st = self.state
        assert st is not None
        data = []
        for name in st.served_names:
            perm = {
                "id": "modelperm-" + secrets.token_hex(8),
                "object": "model_permission",
                "created": st.created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": st.created,
                    "owned_by": "vllm",
                    "root": st.args.model,
                    "parent": None,
                    "max_model_len": st.max_model_len,
                    "permission": [perm],
                }
            )
        return {"object": "list", "data": data}

    def _check_model(self, body: dict[str, Any]) -> str:
        st = self.state
        assert st is not None
        model = body.get("model")
        if model is None:
            return st.served_names[0]
        if model in st.served_names or model == st.args.model:
            return str(model)
        raise ApiError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {', '.join(st.served_names)}.",
            "NotFoundError",
            "model",
        )

    def _max_tokens(self, body: dict[str, Any], prompt_len: int, default: int | None) -> int:
        st = self.state
        assert st is not None
        limit = st.max_model_len
        if prompt_len >= limit:
            raise ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your prompt "
                f"contains at least {prompt_len} input tokens, which exceeds this limit even "
                "without any output tokens. Please reduce the length of the input prompt. "
                f"(parameter=input_tokens, value={prompt_len})",
                param="input_tokens",
            )
        value = body.get("max_completion_tokens")
        if value is None:
            value = body.get("max_tokens")
        if value is None:
            value = default if default is not None else limit - prompt_len
        try:
            value = int(value)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, "max_tokens must be an integer", param="max_tokens") from exc
        if value < 1:
            raise ApiError(
                400,
                f"max_tokens must be at least 1, got {value}. (parameter=max_tokens, value={value})",
                param="max_tokens",
            )
        if value > limit:
            raise ApiError(
                400,
                f"max_tokens={value} cannot be greater than max_model_len={limit}. Please request "
                f"fewer output tokens. (parameter=max_tokens, value={value})",
                param="max_tokens",
            )
        # vLLM 0.32 accepts a request whose prompt plus max_tokens passes max_model_len and
        # stops it at the context's end.
        return min(value, limit - prompt_len)

    # --- chat -------------------------------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> None:
        st = self.state
        assert st is not None
        model = self._check_model(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list", param="messages")
        tools = body.get("tools") or []
        tool_choice = body.get("tool_choice")
        if tool_choice is None:
            tool_choice = "auto" if tools else "none"
        if tool_choice == "auto" and not st.tools_enabled:
            raise ApiError(400, AUTO_TOOL_ERROR)
        prompt_text = generate.render_chat(messages, tools or None)
        prompt_pieces = generate.tokenize(prompt_text)
        prompt_len = len(prompt_pieces)
        max_tokens = self._max_tokens(body, prompt_len, None)
        kwargs = dict(st.default_template_kwargs)
        kwargs.update(body.get("chat_template_kwargs") or {})
        thinking = bool(kwargs.get("enable_thinking", kwargs.get("thinking", True)))
        last = next((m for m in reversed(messages) if m.get("role") == "user"), messages[-1])
        user_text = generate.message_text(last.get("content"))
        rng = generate.make_rng(prompt_text, body.get("temperature"), body.get("seed"))
        reply = generate.Reply()
        if tools and tool_choice != "none" and messages[-1].get("role") != "tool":
            func = generate.choose_tool(tools, user_text, tool_choice)
            if func is not None:
                reply.tool_calls = [
                    generate.make_tool_call(func, user_text, prompt_text + str(time.time_ns()))
                ]
        if not reply.tool_calls:
            if messages[-1].get("role") == "tool":
                result = generate.message_text(messages[-1].get("content"))
                reply.content = f"Here is what the tool returned: {result.strip()[:200]}"
            else:
                reply.content = generate.compose_text(user_text, rng)
        if st.spec.reasons and thinking:
            reply.reasoning = generate.compose_reasoning(
                user_text, reply.tool_calls[0] if reply.tool_calls else None
            )
        stops = body.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        if reply.content:
            reply.content, reply.stop_reason = generate.apply_stop(reply.content, stops)
        pieces = generate.pieces_for(reply, reasoning_in_content=not st.reasoning_parser)
        pieces, finish = self._fit_length(
            body, pieces, rng, max_tokens, "tool_calls" if reply.tool_calls else "stop"
        )
        req = Request(
            "chatcmpl-" + secrets.token_hex(8),
            generate.token_ids(prompt_pieces),
            pieces,
            finish,
            reply.stop_reason,
            max_tokens=max_tokens,
        )
        stream = bool(body.get("stream"))
        options = body.get("stream_options") or {}
        parser = (
            st.tool_parser if st.tool_parser and st.tool_parser.parses(tools, tool_choice) else None
        )
        with st.lock:
            st.in_flight += 1
        try:
            st.scheduler.submit(req)
            if stream:
                self._chat_stream(req, model, reply, prompt_len, options, parser)
            else:
                self._chat_plain(req, model, reply, prompt_len, parser)
        finally:
            with st.lock:
                st.in_flight -= 1

    def _fit_length(
        self,
        body: dict[str, Any],
        pieces: list[generate.Piece],
        rng: Any,
        max_tokens: int,
        natural: str,
    ) -> tuple[list[generate.Piece], str]:
        """Apply ignore_eos / min_tokens / max_tokens to the planned tokens."""
        if body.get("ignore_eos"):
            want = max_tokens
        else:
            want = min(int(body.get("min_tokens") or 0), max_tokens)
        while len(pieces) < want:
            more = generate.tokenize(generate.continuation(rng))
            pieces = pieces + [generate.Piece(t, "content") for t in more]
        if body.get("ignore_eos"):
            return pieces[:max_tokens], "length"
        if len(pieces) > max_tokens:
            return pieces[:max_tokens], "length"
        return pieces, natural

    def _fingerprint(self) -> str:
        st = self.state
        return st.fingerprint if st is not None else fingerprint()

    def _collect(self, req: Request) -> tuple[list[generate.Piece], str, str | None]:
        st = self.state
        assert st is not None
        got: list[generate.Piece] = []
        while True:
            kind, value = req.events.get()
            if kind == "tokens":
                got.extend(value)
            elif kind == "done":
                return got, value[0], value[1]
            elif kind == "error":
                raise ApiError(500, str(value), "InternalServerError")

    def _chat_plain(
        self,
        req: Request,
        model: str,
        reply: generate.Reply,
        prompt_len: int,
        parser: ToolParserMetrics | None,
    ) -> None:
        got, finish, stop_reason = self._collect(req)
        reasoning = "".join(p.text for p in got if p.channel == "reasoning") or None
        content = "".join(p.text for p in got if p.channel == "content")
        calls = []
        for index, call in enumerate(reply.tool_calls):
            if any(p.channel == "tool_header" and p.tool_index == index for p in got):
                args = "".join(
                    p.text for p in got if p.channel == "tool_args" and p.tool_index == index
                )
                calls.append(
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": args},
                    }
                )
        message = {
            "role": "assistant",
            "content": content or None,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "reasoning": reasoning,
        }
        if parser is not None:  # once for the one choice
            parser.record(streaming=False, tool_called=bool(calls))
        if calls:  # vLLM leaves the key out when there is no call
            message = {**message, "tool_calls": calls}
            message["reasoning"] = message.pop("reasoning")
        body = {
            "id": req.request_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": stop_reason,
                    "token_ids": None,
                    "routed_experts": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": self._fingerprint(),
            "usage": usage(prompt_len, len(got), details=True),
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "prompt_text": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }
        self._json(200, body)

    def _start_stream(self) -> None:
        self.send_response_only(200)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self._access(200)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, obj: Any) -> None:
        self._chunk(b"data: " + dumps(obj) + b"\n\n")

    def _end_stream(self) -> None:
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chat_stream(
        self,
        req: Request,
        model: str,
        reply: generate.Reply,
        prompt_len: int,
        options: dict[str, Any],
        parser: ToolParserMetrics | None,
    ) -> None:
        st = self.state
        assert st is not None
        created = int(time.time())
        include_usage = bool(options.get("include_usage"))
        continuous = bool(options.get("continuous_usage_stats"))
        count = 0

        def chunk(choice: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": req.request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [choice],
            }
            if extra:
                out.update(extra)
            if include_usage and continuous:
                out["usage"] = usage(prompt_len, count)
            return out

        try:
            self._start_stream()
            self._event(
                chunk(
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    },
                    {"prompt_token_ids": None, "prompt_text": None},
                )
            )
            while True:
                kind, value = req.events.get()
                if kind == "error":
                    self._event(
                        {
                            "error": {
                                "message": str(value),
                                "type": "InternalServerError",
                                "param": None,
                                "code": 500,
                            }
                        }
                    )
                    break
                if kind == "done":
                    finish, stop_reason = value
                    self._event(
                        chunk(
                            {
                                "index": 0,
                                # vLLM 0.32's closing chunk carries no content.
                                "delta": {},
                                "logprobs": None,
                                "finish_reason": finish,
                                "stop_reason": stop_reason,
                                "token_ids": None,
                            }
                        )
                    )
                    if include_usage:
                        self._event(
                            {
                                "id": req.request_id,
                                "object": "chat.completion.chunk",
                                "created": created,
                                "model": model,
                                "choices": [],
                                "usage": usage(prompt_len, count),
                                "system_fingerprint": self._fingerprint(),
                            }
                        )
                    break
                for piece in group_pieces(value):
                    count += piece.count
                    if parser is not None and piece.channel != "reasoning":
                        # Once per delta past the reasoning (the reasoning parser has those).
                        parser.record(streaming=True, tool_called=piece.channel != "content")
                    if piece.channel == "reasoning":
                        delta: dict[str, Any] = {"reasoning": piece.text}
                    elif piece.channel == "tool_header":
                        call = reply.tool_calls[piece.tool_index]
                        delta = {
                            "tool_calls": [
                                {
                                    "id": call.call_id,
                                    "type": "function",
                                    "index": piece.tool_index,
                                    "function": {"name": call.name},
                                }
                            ]
                        }
                    elif piece.channel == "tool_args":
                        delta = {
                            "tool_calls": [
                                {"index": piece.tool_index, "function": {"arguments": piece.text}}
                            ]
                        }
                    else:
                        delta = {"content": piece.text}
                    self._event(
                        chunk(
                            {
                                "index": 0,
                                "delta": delta,
                                "logprobs": None,
                                "finish_reason": None,
                                "token_ids": None,
                            }
                        )
                    )
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            st.scheduler.abort(req)

    # --- completions ------------------------------------------------------------------
    def _completion(self, body: dict[str, Any]) -> None:
        st = self.state
        assert st is not None
        model = self._check_model(body)
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        if isinstance(prompt, list):
            prompt_pieces = [str(t) for t in prompt]
            prompt_text = " ".join(prompt_pieces)
        else:
            prompt_text = str(prompt)
            prompt_pieces = generate.tokenize(prompt_text)
        prompt_len = max(1, len(prompt_pieces))
        max_tokens = self._max_tokens(body, prompt_len, 16)
        rng = generate.make_rng(prompt_text, body.get("temperature"), body.get("seed"))
        text = " " + generate.compose_text(prompt_text, rng)
        stops = body.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        text, stop_reason = generate.apply_stop(text, stops)
        pieces = [generate.Piece(t, "content") for t in generate.tokenize(text)]
        pieces, finish = self._fit_length(body, pieces, rng, max_tokens, "stop")
        req = Request(
            "cmpl-" + secrets.token_hex(8),
            generate.token_ids(prompt_pieces) or [0],
            pieces,
            finish,
            stop_reason,
            max_tokens=max_tokens,
        )
        with st.lock:
            st.in_flight += 1
        try:
            st.scheduler.submit(req)
            if body.get("stream"):
                self._completion_stream(req, model, prompt_len, body.get("stream_options") or {})
                return
            got, finish, stop_reason = self._collect(req)
            self._json(
                200,
                {
                    "id": req.request_id,
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "text": "".join(p.text for p in got),
                            "logprobs": None,
                            "finish_reason": finish,
                            "stop_reason": stop_reason,
                            "prompt_logprobs": None,
                            "prompt_token_ids": None,
                            "token_ids": None,
                            "routed_experts": None,
                        }
                    ],
                    "service_tier": None,
                    "system_fingerprint": self._fingerprint(),
                    "usage": usage(prompt_len, len(got), details=True),
                    "kv_transfer_params": None,
                    "ec_transfer_params": None,
                    "metrics": None,
                },
            )
        finally:
            with st.lock:
                st.in_flight -= 1

    def _completion_stream(
        self, req: Request, model: str, prompt_len: int, options: dict[str, Any]
    ) -> None:
        st = self.state
        assert st is not None
        created = int(time.time())
        count = 0

        def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "id": req.request_id,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": choices,
            }

        try:
            self._start_stream()
            while True:
                kind, value = req.events.get()
                if kind == "done":
                    finish, stop_reason = value
                    self._event(
                        chunk(
                            [
                                {
                                    "index": 0,
                                    "text": "",
                                    "logprobs": None,
                                    "finish_reason": finish,
                                    "stop_reason": stop_reason,
                                }
                            ]
                        )
                    )
                    if options.get("include_usage"):
                        self._event({**chunk([]), "usage": usage(prompt_len, count)})
                    break
                if kind == "tokens":
                    count += len(value)
                    self._event(
                        chunk(
                            [
                                {
                                    "index": 0,
                                    "text": "".join(p.text for p in value),
                                    "logprobs": None,
                                    "finish_reason": None,
                                    "stop_reason": None,
                                }
                            ]
                        )
                    )
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            st.scheduler.abort(req)

    def _tokenize(self, body: dict[str, Any]) -> None:
        st = self.state
        assert st is not None
        if "messages" in body:
            text = generate.render_chat(body["messages"], body.get("tools"))
        else:
            text = str(body.get("prompt", ""))
        pieces = generate.tokenize(text)
        self._json(
            200,
            {
                "count": len(pieces),
                "max_model_len": st.max_model_len,
                "tokens": generate.token_ids(pieces),
                "token_strs": None,
            },
        )


def bind_handler(state: ApiState) -> None:
    """Attach the state to the handler class (one API server per process)."""
    Handler.state = state
