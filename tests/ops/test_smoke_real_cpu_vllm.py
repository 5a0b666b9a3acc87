"""Smoke against replies of real vLLM 0.32 (CPU build, the lab's tiny random model): a small
max_model_len caps max_tokens (vLLM answers 400 above it), and a model that answers tools in
plain text is told apart from broken tool calling by a forced call (tool_choice required)."""

from __future__ import annotations

from typing import Any

import httpx
from test_smoke_diagnosis import Server, fixture_json, smoke  # type: ignore[import-not-found]

from spark_tui.ops.smoke import FORCED_TOOL


class CpuServer(Server):
    """Lists max_model_len 2048 like the lab's recipe; refuses max_tokens above it as vLLM
    does; answers `auto` tools in plain text and a forced call with real vLLM's reply."""

    def __init__(self, forced_ok: bool = True) -> None:
        super().__init__()
        self.forced_ok = forced_ok

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=fixture_json("vllm-0.32.0-cpu-v1-models.json"))
        if request.url.path.endswith("/completions"):
            import json

            body = json.loads(request.content)
            if body.get("max_tokens", 0) > 2048:
                self.requests.append(body)
                msg = (
                    f"max_tokens={body['max_tokens']} cannot be greater than max_model_len=2048. "
                    "Please request fewer output tokens."
                )
                err = {
                    "message": msg,
                    "type": "BadRequestError",
                    "param": "max_tokens",
                    "code": 400,
                }
                return httpx.Response(400, json={"error": err})
        return super().__call__(request)

    def tool_reply(self) -> httpx.Response:
        body = self.requests[-1]
        if body.get("tool_choice") == "required" and self.forced_ok:
            return httpx.Response(200, json=fixture_json("vllm-0.32.0-cpu-forced-tool-call.json"))
        return httpx.Response(200, json=self.chat_reply("ically surircumNo 200www he", "length"))


async def test_max_tokens_stays_within_the_served_context() -> None:
    server = CpuServer()
    res = await smoke(server)
    assert res["chat"].ok and res["streaming"].ok, (res["chat"].detail, res["chat"].cause)
    assert all(r["max_tokens"] <= 2048 for r in server.requests)


async def test_plain_text_with_a_working_forced_call_blames_the_model() -> None:
    server = CpuServer()
    tool = (await smoke(server))["tool_call"]
    assert not tool.ok
    assert "does not call tools on its own" in tool.cause
    assert 'get_weather({"location": "Boston"})' in tool.cause
    forced: dict[str, Any] = next(r for r in server.requests if r.get("tool_choice") == "required")
    assert forced["tools"] == [FORCED_TOOL] and forced["max_tokens"] <= 256
    # One call only: vLLM then ends its grammar after the call (no second call to run into
    # the token budget).
    assert forced["parallel_tool_calls"] is False
    assert "--enable-auto-tool-choice" not in tool.remedy


async def test_plain_text_and_no_forced_call_still_points_at_the_setup() -> None:
    tool = (await smoke(CpuServer(forced_ok=False)))["tool_call"]
    assert not tool.ok and "plain text" in tool.cause and "forced call" in tool.cause
    assert "--enable-auto-tool-choice" in tool.remedy
