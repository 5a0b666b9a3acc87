"""The simulated engine's OpenAI API, checked with the official `openai` sync and async clients
and raw HTTP (SSE framing, /metrics, errors)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import openai
import pytest
from engine_harness import Engine, free_port, recipe_argv, serve_argv

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
WEATHER_PROMPT = [{"role": "user", "content": "Use get_weather to look up the weather in Boston."}]
HAIKU = [{"role": "user", "content": "Write a haiku about a GPU."}]


class Served:
    """A running engine and its base URL."""

    def __init__(self, engine: Engine, port: int, model: str, key: str = "EMPTY") -> None:
        self.engine = engine
        self.base = f"http://127.0.0.1:{port}"
        self.model = model
        self.key = key

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base + "/v1", api_key=self.key, max_retries=0)

    def aclient(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base + "/v1", api_key=self.key, max_retries=0)


@pytest.fixture(scope="module")
def agent() -> Iterator[Served]:
    """The agent-ready Qwen3.6 recipe: reasoning parser qwen3, tools via qwen3_xml."""
    port = free_port()
    argv, env = recipe_argv("qwen3.6-35b-a3b-nvfp4", host="127.0.0.1", port=port)
    engine = Engine(argv, env)
    try:
        engine.wait_healthy(port)
        yield Served(engine, port, "nvidia/Qwen3.6-35B-A3B-NVFP4")
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def plain() -> Iterator[Served]:
    """A model served without tool flags, behind an API key."""
    port = free_port()
    engine = Engine(
        serve_argv(
            "Qwen/Qwen3-8B",
            port,
            "--served-model-name",
            "qwen8",
            "--max-model-len",
            "4096",
            "--api-key",
            "sekret",
        )
    )
    try:
        engine.wait_healthy(port)
        yield Served(engine, port, "qwen8", key="sekret")
    finally:
        engine.stop()


def test_models_list_sync(agent: Served) -> None:
    models = agent.client().models.list()
    ids = [m.id for m in models.data]
    assert ids == [agent.model]
    raw = httpx.get(agent.base + "/v1/models").json()
    assert raw["object"] == "list"
    assert raw["data"][0]["max_model_len"] == 262144
    assert raw["data"][0]["owned_by"] == "vllm"


async def test_models_list_async(agent: Served) -> None:
    models = await agent.aclient().models.list()
    assert [m.id for m in models.data] == [agent.model]


def test_chat_plain_with_reasoning(agent: Served) -> None:
    reply = agent.client().chat.completions.create(model=agent.model, messages=HAIKU, temperature=0)
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.content and "GPU" in choice.message.content
    reasoning = getattr(choice.message, "reasoning", None)
    assert reasoning and "haiku" in reasoning
    assert "<think>" not in choice.message.content
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.id.startswith("chatcmpl-")


async def test_chat_streamed_async_equals_plain(agent: Served) -> None:
    client = agent.aclient()
    plain = await client.chat.completions.create(model=agent.model, messages=HAIKU, temperature=0)
    stream = await client.chat.completions.create(
        model=agent.model,
        messages=HAIKU,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    content, reasoning, roles, finish, usage = "", "", [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning", None) or ""
            finish = choice.finish_reason or finish
    assert roles == ["assistant"]
    assert content == plain.choices[0].message.content
    assert reasoning == getattr(plain.choices[0].message, "reasoning", None)
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == plain.usage.completion_tokens


def test_chat_streamed_sync_sse_framing(agent: Served) -> None:
    body = {"model": agent.model, "messages": HAIKU, "temperature": 0, "stream": True}
    with httpx.stream("POST", agent.base + "/v1/chat/completions", json=body, timeout=10) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        text = "".join(resp.iter_text())
    events = text.split("\n\n")
    assert events[-1] == ""
    assert all(e.startswith("data: ") for e in events[:-1])
    assert events[-2] == "data: [DONE]"
    first = json.loads(events[0][6:])
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    last = json.loads(events[-3][6:])
    assert last["choices"][0]["finish_reason"] == "stop"
    # the openai client parses the same stream without error
    chunks = list(agent.client().chat.completions.create(**body))
    assert chunks[0].choices[0].delta.role == "assistant"


def test_tool_call_sync(agent: Served) -> None:
    reply = agent.client().chat.completions.create(
        model=agent.model, messages=WEATHER_PROMPT, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"location": "Boston"}
    assert calls[0].id.startswith("chatcmpl-tool-")
    assert choice.message.content is None


async def test_tool_call_streamed_async(agent: Served) -> None:
    stream = await agent.aclient().chat.completions.create(
        model=agent.model, messages=WEATHER_PROMPT, tools=[WEATHER_TOOL], stream=True
    )
    name, args, finish = "", "", None
    async for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                if call.function and call.function.name:
                    name = call.function.name
                args += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    assert name == "get_weather"
    assert json.loads(args) == {"location": "Boston"}
    assert finish == "tool_calls"


def test_tool_choice_auto_needs_the_flags(plain: Served) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        plain.client().chat.completions.create(
            model=plain.model, messages=WEATHER_PROMPT, tools=[WEATHER_TOOL], tool_choice="auto"
        )
    assert info.value.status_code == 400
    assert (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        in str(info.value)
    )
    body = info.value.body
    assert isinstance(body, dict) and body.get("type") == "BadRequestError"


async def test_tool_choice_auto_needs_the_flags_async(plain: Served) -> None:
    with pytest.raises(openai.BadRequestError):
        await plain.aclient().chat.completions.create(
            model=plain.model, messages=WEATHER_PROMPT, tools=[WEATHER_TOOL]
        )


def test_api_key_is_enforced(plain: Served) -> None:
    bad = openai.OpenAI(base_url=plain.base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    assert httpx.get(plain.base + "/health").status_code == 200
    assert [m.id for m in plain.client().models.list().data] == ["qwen8"]


def test_max_tokens_gives_length(plain: Served) -> None:
    reply = plain.client().chat.completions.create(
        model=plain.model, messages=HAIKU, max_tokens=3, temperature=0
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 3


def test_echo_and_unknown_model(plain: Served) -> None:
    client = plain.client()
    msgs = [{"role": "user", "content": 'Reply with exactly "spark-ok".'}]
    reply = client.chat.completions.create(
        model=plain.model,
        messages=msgs,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert reply.choices[0].message.content == "spark-ok"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=msgs)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=plain.model, messages=msgs, max_tokens=5000)
    assert "max_tokens=5000 cannot be greater than max_model_len=4096" in str(info.value)


def test_completions(plain: Served) -> None:
    client = plain.client()
    out = client.completions.create(model=plain.model, prompt="The GB10 has", max_tokens=8)
    assert out.object == "text_completion"
    assert out.choices[0].finish_reason in ("length", "stop")
    assert out.usage is not None and 0 < out.usage.completion_tokens <= 8
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=plain.model, prompt="The GB10 has", max_tokens=8, stream=True, temperature=0
        )
        if c.choices
    )
    assert streamed


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    assert found, f"{name} {labels} not in metrics"
    return total


def test_metrics_parse_and_move(agent: Served) -> None:
    before = httpx.get(agent.base + "/metrics").text
    assert re.search(r'^vllm:num_requests_running\{engine="0",model_name="[^"]+"\} ', before, re.M)
    for line in before.splitlines():
        if line and not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            float(value.replace("+Inf", "inf"))
            assert name_labels.startswith("vllm:")
    gen0 = _metric(before, "vllm:generation_tokens_total", engine="0")
    prompt0 = _metric(before, "vllm:prompt_tokens_total")
    ok0 = _metric(before, "vllm:request_success_total")
    ttft0 = _metric(before, "vllm:time_to_first_token_seconds_count")
    agent.client().chat.completions.create(model=agent.model, messages=HAIKU, max_tokens=20)
    after = httpx.get(agent.base + "/metrics").text
    assert _metric(after, "vllm:generation_tokens_total") > gen0
    assert _metric(after, "vllm:prompt_tokens_total") > prompt0
    assert _metric(after, "vllm:request_success_total") == ok0 + 1
    assert _metric(after, "vllm:time_to_first_token_seconds_count") == ttft0 + 1
    assert _metric(after, "vllm:inter_token_latency_seconds_bucket", le="+Inf") > 0
    for name in ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        _metric(after, name, model_name=agent.model)


def test_version_and_access_log(agent: Served) -> None:
    assert httpx.get(agent.base + "/version").json()["version"].endswith("+sparktui.sim")
    agent.engine.wait_for_line('"GET /version HTTP/1.1" 200 OK')
    assert "spark-tui simulated engine (no GPU)" in agent.engine.output
    assert "Application startup complete." in agent.engine.output
    assert re.search(
        r"\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_utils\.py:\d+\] "
        r"non-default args: \{'model_tag': ",
        agent.engine.output,
    )
