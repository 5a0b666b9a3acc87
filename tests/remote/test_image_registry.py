"""Resolving sentinel images against a real registry server (Debian's docker-registry on a
loopback port), through the registry HTTP API v2 as ghcr.io speaks it."""

from __future__ import annotations

import pytest

from spark_tui.core.errors import SparkError
from spark_tui.core.images import NIGHTLY_REPOSITORY, newest_nightly, parse_endpoints, parse_ref
from spark_tui.ops.images import configured_endpoints, resolve_image
from spark_tui.remote.registry import Registry, RegistryError

REPO = "spark-arena/dgx-vllm-eugr-nightly"


def test_latest_resolves_to_the_newest_nightly_tag_and_its_digest(
    local_registry: tuple[str, dict[str, str]],
) -> None:
    base, digests = local_registry
    got = resolve_image(f"{NIGHTLY_REPOSITORY}:latest", Registry({"ghcr.io": base}))
    assert got is not None
    assert got.tag == "2026-12-02"
    assert got.image == f"{NIGHTLY_REPOSITORY}:2026-12-02"
    assert got.digest == digests["new"] != digests["old"]
    assert got.requested == f"{NIGHTLY_REPOSITORY}:latest"


@pytest.mark.parametrize(
    "sentinel",
    [
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:latest",
        "eugr/spark-vllm:latest",
        "docker.io/eugr/spark-vllm:latest",
    ],
)
def test_the_tf5_variant_and_docker_hub_name_resolve_the_same_way(
    local_registry: tuple[str, dict[str, str]], sentinel: str
) -> None:
    base, digests = local_registry
    got = resolve_image(sentinel, Registry({"ghcr.io": base}))
    assert got is not None
    assert (got.image, got.digest) == (f"{NIGHTLY_REPOSITORY}:2026-12-02", digests["new"])
    assert got.requested == sentinel


@pytest.mark.parametrize(
    "image",
    [
        f"{NIGHTLY_REPOSITORY}:2026-11-28",  # a pinned nightly
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:2026-11-28",
        "eugr/spark-vllm-b12x:nightly-20261015",
        "nvcr.io/nvidia/vllm:26.05.post1-py3",
        "vllm/vllm-openai:latest",  # :latest of an image that is no sentinel
    ],
)
def test_other_tags_are_used_as_written_without_asking_a_registry(image: str) -> None:
    # A closed port: any request would fail, so None proves none was made.
    assert resolve_image(image, Registry({"ghcr.io": "http://127.0.0.1:9"})) is None


def test_an_unreachable_registry_is_an_error_with_a_remedy() -> None:
    registry = Registry({"ghcr.io": "http://127.0.0.1:9"}, timeout=2.0)
    with pytest.raises(RegistryError) as err:
        resolve_image(f"{NIGHTLY_REPOSITORY}:latest", registry)
    assert "cannot reach the registry ghcr.io (http://127.0.0.1:9)" in err.value.message
    assert "SPARK_TUI_REGISTRY_ENDPOINTS=ghcr.io=URL" in err.value.remedy
    assert f"container: {NIGHTLY_REPOSITORY}:YYYY-MM-DD" in err.value.remedy


def test_a_repository_the_registry_lacks_is_named(
    local_registry: tuple[str, dict[str, str]],
) -> None:
    base, _ = local_registry
    with pytest.raises(RegistryError) as err:
        Registry({"ghcr.io": base}).tags(parse_ref("ghcr.io/spark-arena/none:latest"))
    assert err.value.message == (
        f"ghcr.io ({base}) does not know ghcr.io/spark-arena/none: 404 (not found) for the tag list"
    )
    assert "check the recipe's image name" in err.value.remedy


def test_nightly_tags_are_dates() -> None:
    tags = ["latest", "2026-03-01", "20260402", "nightly-20260315", "2026-13-01", "v0.32"]
    assert newest_nightly(tags) == "20260402"
    assert newest_nightly(["latest", "main"]) is None


def test_the_endpoints_setting() -> None:
    assert parse_endpoints("ghcr.io=http://10.77.0.2, docker.io=https://mirror:5000/") == {
        "ghcr.io": "http://10.77.0.2",
        "docker.io": "https://mirror:5000",
    }
    assert configured_endpoints({}) == {}
    with pytest.raises(SparkError) as err:
        parse_endpoints("ghcr.io")
    assert "SPARK_TUI_REGISTRY_ENDPOINTS=ghcr.io=http://" in err.value.remedy


def test_a_public_repository_answers_once_an_anonymous_token_is_fetched() -> None:
    # ghcr.io's flow for a public image: 401 with a Bearer challenge, a token from the
    # realm it names (scope: pull of that repository), then the answer with the token.
    import httpx

    digest = "sha256:" + "c" * 64
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        if request.url.path == "/token":
            assert request.url.params["scope"] == f"repository:{REPO}:pull"
            assert request.url.params["service"] == "ghcr.io"
            return httpx.Response(200, json={"token": "anon"})
        if request.headers.get("authorization") != "Bearer anon":
            challenge = f'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:{REPO}:pull"'
            return httpx.Response(401, headers={"www-authenticate": challenge})
        if request.url.path.endswith("/tags/list"):
            return httpx.Response(200, json={"name": REPO, "tags": ["2026-12-01", "latest"]})
        return httpx.Response(200, headers={"docker-content-digest": digest})

    registry = Registry(transport=httpx.MockTransport(answer))
    got = resolve_image("eugr/spark-vllm:latest", registry)
    assert got is not None and (got.tag, got.digest) == ("2026-12-01", digest)
    # One token, reused for the manifest.
    assert seen.count("GET /token") == 1
    assert seen[-1] == f"HEAD /v2/{REPO}/manifests/2026-12-01"
