"""Smoke and bench send the server's API key (given, or VLLM_API_KEY), and a 401 names
the variable to set."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from spark_tui.ops.smoke import API_KEY_ENV, api_key_or_env, run_smoke

KEY = "sk-test-123"


def _server(seen: list[str | None]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return httpx.Response(401, json={"error": "Unauthorized"})
        return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})

    return httpx.MockTransport(handle)


def _models_check(transport: httpx.MockTransport, api_key: str | None = None):  # type: ignore[no-untyped-def]
    async def run():  # type: ignore[no-untyped-def]
        return await run_smoke(
            "http://127.0.0.1:8000", "m", api_key=api_key, checks=("models",), transport=transport
        )

    return asyncio.run(run())[0]


def test_key_from_the_environment_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, KEY)
    seen: list[str | None] = []
    result = _models_check(_server(seen))
    assert result.ok, result
    assert seen == [f"Bearer {KEY}"]


def test_401_names_the_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    result = _models_check(_server([]))
    assert not result.ok
    assert "401" in (result.cause or "")
    assert f"export {API_KEY_ENV}=" in (result.remedy or "")
    assert "--api-key" not in (result.remedy or "")


def test_given_key_wins_and_empty_means_none() -> None:
    env = {API_KEY_ENV: "from-env"}
    assert api_key_or_env("given", env) == "given"
    assert api_key_or_env(None, env) == "from-env"
    assert api_key_or_env("", env) is None
    assert api_key_or_env(None, {}) is None
