"""A container registry's HTTP API v2, for what a launch needs to know before it pulls: a
repository's tags and a tag's manifest digest (`Docker-Content-Digest`).

Public repositories on ghcr.io and Docker Hub answer anonymously once a bearer token is
fetched from the realm their `WWW-Authenticate` names; a registry without auth (a mirror,
the lab's) answers at once. The digest is asked for with every manifest type Docker
accepts, so it is the digest `docker pull` records for the same tag.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from spark_tui.core.errors import OperationFailed
from spark_tui.core.images import ENDPOINTS_ENV, ImageRef, endpoint_of

MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_NEXT = re.compile(r"<([^>]+)>;\s*rel=\"?next\"?")
# The most tag pages followed (a repository of nightlies lists a few hundred per page).
_MAX_PAGES = 50


class RegistryError(OperationFailed):
    """The registry could not be asked or did not answer as the API says (message, remedy)."""


@dataclass
class Registry:
    """One client for the registries a resolution asks; `endpoints` maps a registry host to
    the base URL that answers for it (a mirror, the lab's registry)."""

    endpoints: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 15.0
    transport: httpx.BaseTransport | None = None
    _tokens: dict[tuple[str, str], str] = field(default_factory=dict)

    def tags(self, ref: ImageRef) -> list[str]:
        """Every tag of `ref`'s repository (following the API's pagination)."""
        url: str | None = f"/v2/{ref.repository}/tags/list"
        out: list[str] = []
        with self._client(ref) as client:
            for _ in range(_MAX_PAGES):
                if url is None:
                    break
                res = self._get(client, ref, "GET", url, "the tag list")
                out += [str(t) for t in (_json(res, ref).get("tags") or [])]
                found = _NEXT.search(res.headers.get("link", ""))
                url = found.group(1) if found else None
        return out

    def digest(self, ref: ImageRef, tag: str) -> str:
        """The manifest digest of `tag` in `ref`'s repository."""
        path = f"/v2/{ref.repository}/manifests/{tag}"
        with self._client(ref) as client:
            res = self._get(client, ref, "HEAD", path, f"the manifest of {tag}")
            digest = str(res.headers.get("docker-content-digest") or "")
            if not digest:  # some registries send it only with the body
                res = self._get(client, ref, "GET", path, f"the manifest of {tag}")
                digest = str(res.headers.get("docker-content-digest") or "")
        if not digest or not digest.startswith("sha256:"):
            raise RegistryError(
                f"{self._where(ref)} gave no digest for {ref.with_tag(tag)}",
                f"pin the image in the recipe by its digest ({ref.name}@sha256:...), "
                "or use another registry endpoint",
            )
        return digest

    # -- plumbing --------------------------------------------------------------------------

    def _client(self, ref: ImageRef) -> httpx.Client:
        base = endpoint_of(ref.registry, self.endpoints)
        return httpx.Client(
            base_url=base,
            timeout=self.timeout,
            transport=self.transport,
            follow_redirects=True,
            headers={"Accept": MANIFEST_TYPES},
        )

    def _where(self, ref: ImageRef) -> str:
        base = endpoint_of(ref.registry, self.endpoints)
        return ref.registry if base == f"https://{ref.registry}" else f"{ref.registry} ({base})"

    def _get(
        self, client: httpx.Client, ref: ImageRef, method: str, url: str, what: str
    ) -> httpx.Response:
        try:
            res = self._send(client, ref, method, url)
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"cannot reach the registry {self._where(ref)} for {what} of {ref.name}: "
                f"{exc.__class__.__name__}: {exc}",
                f"check that this machine reaches {ref.registry}; or set {ENDPOINTS_ENV}="
                f"{ref.registry}=URL to a mirror it does reach; or pin a dated tag in the "
                f"recipe (container: {ref.name}:YYYY-MM-DD), which is used as written",
            ) from None
        if res.status_code == 404:
            raise RegistryError(
                f"{self._where(ref)} does not know {ref.name}: 404 (not found) for {what}",
                f"check the recipe's image name, or that {ref.registry} publishes it",
            )
        if res.status_code in (401, 403):
            raise RegistryError(
                f"{self._where(ref)} refused {what} of {ref.name} ({res.status_code})",
                "the image must be public; or pin a dated tag the nodes already have",
            )
        if res.status_code >= 400:
            raise RegistryError(
                f"{self._where(ref)} answered {res.status_code} for {what} of {ref.name}",
                "try again later, or pin a dated tag in the recipe",
            )
        return res

    def _send(self, client: httpx.Client, ref: ImageRef, method: str, url: str) -> httpx.Response:
        key = (ref.registry, ref.repository)
        headers = {"Authorization": f"Bearer {self._tokens[key]}"} if key in self._tokens else {}
        res = client.request(method, url, headers=headers)
        challenge = res.headers.get("www-authenticate", "")
        if res.status_code != 401 or not challenge.lower().startswith("bearer"):
            return res
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", None)
        if not realm:
            return res
        params.setdefault("scope", f"repository:{ref.repository}:pull")
        answer = client.get(realm, params=params)
        if answer.status_code != 200:
            return res
        token = _json(answer, ref).get("token") or _json(answer, ref).get("access_token")
        if not token:
            return res
        self._tokens[key] = str(token)
        return client.request(method, url, headers={"Authorization": f"Bearer {token}"})


def _json(res: httpx.Response, ref: ImageRef) -> dict[str, Any]:
    try:
        data = res.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise RegistryError(
            f"the registry of {ref.name} answered {res.request.url} with no JSON object",
            "check the registry endpoint: it must speak the registry HTTP API v2",
        )
    return data
