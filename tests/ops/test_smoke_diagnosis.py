"""Smoke-check diagnoses against a scripted server (httpx.MockTransport) built from real replies.

The end-to-end checks against the simulated engine are in test_sim_smoke.py; these pin the
mapping from each way a server misbehaves to its cause and remedy.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx

from spark_tui.ops.smoke import (
    UNREACHABLE_CAUSE,
    WEATHER_TOOL,
    all_passed,
    run_smoke,
    server_unreachable,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODEL = "gemma4-aeon-uncensored"


def fixture_json(name: str) -> Any:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads("\n".join(x for x in text.splitlines() if not x.startswith("# source:")))


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return "data: " + json.dumps(body) + "\n\n"


def stream_of(pieces: list[str], reasoning: list[str] = ()) -> bytes:  # type: ignore[assignment]
    out = chunk({"role": "assistant", "content": ""})
    out += "".join(chunk({"reasoning": r}) for r in reasoning)
    out += "".join(chunk({"content": p}) for p in pieces)
    out += chunk({"content": ""}, "stop") + "data: [DONE]\n\n"
    return out.encode()


class Server:
    """A scripted OpenAI-compatible server; attributes choose how it misbehaves."""

    def __init__(self) -> None:
        self.answer = "Silicon hums all night"
        self.reasoning = ""
        self.finish = "stop"
        self.tool_mode = "ok"  # ok | missing_flags | plain | text_call
        self.stream_pieces: list[str] | None = None
        self.requests: list[dict[str, Any]] = []

    def chat_reply(self, content: str | None, finish: str, **message: Any) -> dict[str, Any]:
        reply = fixture_json("vllm_api_chat_completion_gb10.json")
        reply["choices"][0]["message"].update(content=content, **message)
        reply["choices"][0]["finish_reason"] = finish
        return reply

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/health":
            return httpx.Response(200)
        if path == "/v1/models":
            return httpx.Response(200, json=fixture_json("vllm_api_v1_models_gb10.json"))
        body = json.loads(request.content)
        self.requests.append(body)
        if body.get("tools"):
            return self.tool_reply()
        if body.get("stream"):
            pieces = self.stream_pieces
            if pieces is None:
                words = self.answer.split(" ")
                pieces = [w + " " for w in words[:-1]] + words[-1:]
            return httpx.Response(
                200, content=stream_of(pieces), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(
            200, json=self.chat_reply(self.answer, self.finish, reasoning=self.reasoning or None)
        )

    def tool_reply(self) -> httpx.Response:
        if self.tool_mode == "missing_flags":
            msg = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            return httpx.Response(
                400,
                json={
                    "error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}
                },
            )
        if self.tool_mode == "plain":
            return httpx.Response(200, json=self.chat_reply("It is sunny in Boston.", "stop"))
        if self.tool_mode == "text_call":
            text = '<tool_call>{"name": "get_weather", "arguments": {"location": "Boston"}}</tool_call>'
            return httpx.Response(200, json=self.chat_reply(text, "stop"))
        reply = fixture_json("vllm_api_chat_completion_tool_calls_v0271.json")
        call = reply["choices"][0]["message"]["tool_calls"][0]
        call["function"] = {"name": "get_weather", "arguments": '{"location": "Boston"}'}
        return httpx.Response(200, json=reply)


async def smoke(server: Server, **kw: Any) -> dict[str, Any]:
    results = await run_smoke("http://spark-a:8000/v1", transport=httpx.MockTransport(server), **kw)
    return {r.name: r for r in results}


async def test_healthy_server_passes_every_check_with_the_playbook_requests() -> None:
    server = Server()
    res = await smoke(server)
    assert all_passed(list(res.values())), {k: (v.detail, v.cause) for k, v in res.items()}
    assert list(res) == ["health", "models", "chat", "tool_call", "streaming"]
    assert res["models"].data["model"] == MODEL  # the first of the three aliases
    chat, tool, stream_req, plain_req = server.requests
    assert chat["messages"] == [{"role": "user", "content": "Write a haiku about a GPU."}]
    assert chat["max_tokens"] == 4096
    assert tool["tools"] == [WEATHER_TOOL] and tool["tool_choice"] == "auto"
    assert tool["messages"][0]["content"] == "Use get_weather to look up the weather in Boston."
    assert stream_req["stream"] is True and stream_req["temperature"] == 0
    assert "stream" not in plain_req and plain_req["temperature"] == 0
    assert res["tool_call"].detail.startswith('get_weather({"location": "Boston"})')
    for r in res.values():
        assert r.latency_s > 0 and r.request.url.startswith("http://spark-a:8000/")


async def test_missing_auto_tool_choice_400_is_mapped_to_the_flags() -> None:
    server = Server()
    server.tool_mode = "missing_flags"
    res = await smoke(server, tool_call_parser="glm47")
    tool = res["tool_call"]
    assert not tool.ok
    assert "--enable-auto-tool-choice" in tool.cause
    assert "--tool-call-parser glm47" in tool.remedy and "chat template" in tool.remedy
    assert all(res[n].ok for n in ("health", "models", "chat", "streaming"))


async def test_plain_text_answer_is_diagnosed() -> None:
    server = Server()
    server.tool_mode = "plain"
    tool = (await smoke(server, model=MODEL))["tool_call"]
    assert not tool.ok and "plain text" in tool.cause
    assert "--enable-auto-tool-choice" in tool.remedy and "--tool-call-parser" in tool.remedy


async def test_call_written_as_text_points_at_the_parser() -> None:
    server = Server()
    server.tool_mode = "text_call"
    tool = (await smoke(server))["tool_call"]
    assert not tool.ok and "wrong --tool-call-parser" in tool.cause


async def test_length_finish_spent_on_reasoning_is_explained() -> None:
    server = Server()
    server.answer, server.reasoning, server.finish = "", "Let me think " * 50, "length"
    chat = (await smoke(server))["chat"]
    assert not chat.ok
    assert "max_tokens=4096" in chat.cause and "reasoning" in chat.cause
    assert "raise max_tokens" in chat.remedy


async def test_reasoning_expected_but_mixed_into_content() -> None:
    server = Server()
    server.answer = "<think>GPU haiku...</think>Silicon hums"
    chat = (await smoke(server, expect_reasoning=True))["chat"]
    assert not chat.ok and "no reasoning parser" in chat.cause
    assert "--reasoning-parser" in chat.remedy
    server.answer, server.reasoning = "Silicon hums", "The user wants a haiku."
    chat = (await smoke(server, expect_reasoning=True))["chat"]
    assert chat.ok and "reasoning" in chat.detail


async def test_scrambled_stream_gets_the_pitfall_steps() -> None:
    server = Server()
    server.stream_pieces = ["Silicon ", "all ", "hums ", "night"]  # tokens out of order
    stream = (await smoke(server))["streaming"]
    assert not stream.ok
    assert "scrambled" in stream.cause
    assert "without streaming" in stream.remedy and "--enforce-eager" in stream.remedy
    assert stream.data["differs_at"] == len("Silicon ")


async def test_unknown_requested_model_fails_models_but_keeps_testing() -> None:
    res = await smoke(Server(), model="nvidia/GLM-5.3-Flash-FP4-Local")
    assert not res["models"].ok and "--served-model-name" in res["models"].remedy
    assert res["chat"].ok  # sent to the id the server does list


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_stopped_server_fails_every_check_as_unreachable() -> None:
    results = await run_smoke(f"http://127.0.0.1:{closed_port()}", "m", timeout=5)
    assert len(results) == 5 and server_unreachable(results)
    for r in results:
        assert not r.ok and r.cause == UNREACHABLE_CAUSE
        assert "spark-tui status" in r.remedy and "ssh -N -L" in r.remedy
