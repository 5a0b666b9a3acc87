"""Image references and sentinel images: the names that mean "the newest published nightly".

A recipe naming the Spark Arena nightly at `:latest` (or its `-tf5` variant, or Docker Hub's
`eugr/spark-vllm:latest`) asks for the newest published nightly, as sparkrun reads it. Before
a launch that name is resolved to a dated nightly tag of the authoritative repository and
that tag's manifest digest, so every node runs the same, named build. Any other tag is used as
written. Pure: the registry is asked by remote.registry.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_tui.core.errors import InputError

if TYPE_CHECKING:
    from spark_tui.core.plan import LaunchPlan

# The tf5 and plain nightlies are built identically now, so every sentinel resolves within
# the one authoritative repository (as sparkrun does).
NIGHTLY_REPOSITORY = "ghcr.io/spark-arena/dgx-vllm-eugr-nightly"
SENTINELS = frozenset(
    {
        NIGHTLY_REPOSITORY + ":latest",
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:latest",
        "eugr/spark-vllm:latest",
        "docker.io/eugr/spark-vllm:latest",
    }
)
DOCKER_HUB = "docker.io"
# Where Docker Hub's registry API answers (docker.io itself does not).
DOCKER_HUB_API = "https://registry-1.docker.io"
# A published nightly is tagged with its date: `2026-03-01` (also `20260301`, `nightly-...`).
_NIGHTLY_TAG = re.compile(r"^(?:nightly-)?(\d{4})-?(\d{2})-?(\d{2})$")
# The registry endpoints setting: `HOST=URL[,HOST=URL...]`.
ENDPOINTS_ENV = "SPARK_TUI_REGISTRY_ENDPOINTS"
# A label on every rank's container: the sentinel a resolved image was asked for as.
REQUESTED_LABEL = "spark-tui.image-requested"
DIGEST_LABEL = "spark-tui.image-digest"


@dataclass(frozen=True)
class ImageRef:
    """An image reference split as Docker reads it: registry host, repository, tag, digest."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """The repository as written in a reference (Docker Hub's without its host)."""
        if self.registry == DOCKER_HUB:
            return self.repository.removeprefix("library/")
        return f"{self.registry}/{self.repository}"

    def with_tag(self, tag: str) -> str:
        return f"{self.name}:{tag}"


def parse_ref(image: str) -> ImageRef:
    """`image` split into registry, repository, tag and digest (Docker's rules: the first
    path component is a registry host when it has a dot or a port, or is `localhost`)."""
    text = image.strip()
    rest, _, digest = text.partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
    tag = None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, _, tag = path.rpartition(":")
    if not path or not re.fullmatch(r"[a-z0-9._/-]+", path):
        raise InputError(
            f"{image!r} is not an image reference", "write it as REGISTRY/NAME:TAG, e.g. vllm:1"
        )
    if registry == DOCKER_HUB and "/" not in path:
        path = "library/" + path
    return ImageRef(registry, path, tag, digest or None)


def is_sentinel(image: str | None) -> bool:
    """Whether `image` names the newest published nightly (a sentinel at `:latest`)."""
    return bool(image) and str(image).strip() in SENTINELS


def nightly_date(tag: str) -> datetime.date | None:
    """The date a nightly tag carries, or None when `tag` is not a dated nightly tag."""
    found = _NIGHTLY_TAG.match(tag)
    if found is None:
        return None
    try:
        return datetime.date(*(int(g) for g in found.groups()))
    except ValueError:
        return None


def newest_nightly(tags: Iterable[str]) -> str | None:
    """The newest dated nightly tag among `tags` (None when none is dated)."""
    dated = [(d, t) for t in tags if (d := nightly_date(t)) is not None]
    return max(dated)[1] if dated else None


@dataclass(frozen=True)
class ResolvedImage:
    """A sentinel resolved: the image asked for, the tag it stands for and that tag's
    manifest digest (what `docker pull` records as the image's repo digest)."""

    requested: str
    image: str  # REPOSITORY:TAG, what every node pulls and runs
    tag: str
    digest: str

    @property
    def short_digest(self) -> str:
        return self.digest.removeprefix("sha256:")[:12]

    def describe(self) -> str:
        """One line: the tag and digest, and what it was asked for as."""
        return f"{self.image} ({self.digest}), the newest nightly for {self.requested}"

    def to_dict(self) -> dict[str, str]:
        return {
            "requested": self.requested,
            "image": self.image,
            "tag": self.tag,
            "digest": self.digest,
        }


def parse_endpoints(text: str | None) -> dict[str, str]:
    """The registry endpoints setting (`HOST=URL,...`) as {host: base URL}."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        host, sep, url = item.partition("=")
        url = url.strip().rstrip("/")
        if not sep or not host.strip() or not re.match(r"^https?://[^/\s]+", url):
            raise InputError(
                f"{ENDPOINTS_ENV}: {item.strip()!r} is not HOST=URL",
                f"set {ENDPOINTS_ENV}=ghcr.io=http://ADDRESS:PORT (several: comma-separated)",
            )
        out[host.strip()] = url
    return out


def endpoint_of(registry: str, endpoints: Mapping[str, str]) -> str:
    """The base URL where `registry`'s HTTP API v2 answers (a configured one wins)."""
    if registry in endpoints:
        return endpoints[registry]
    if registry == DOCKER_HUB:
        return DOCKER_HUB_API
    return f"https://{registry}"


def pin_image(plan: LaunchPlan, resolved: ResolvedImage) -> None:
    """Every rank of `plan` runs the resolved tag; its containers carry the sentinel and the
    digest as labels (what `status` shows of a running cluster)."""
    plan.image_resolved = resolved
    for rank in plan.ranks:
        rank.container.image = resolved.image
        rank.container.labels[REQUESTED_LABEL] = resolved.requested
        rank.container.labels[DIGEST_LABEL] = resolved.digest


def running_image(image: str | None, labels: Mapping[str, str]) -> ResolvedImage | None:
    """What a rank's container labels say its image was resolved from (None: the image was
    used as written, or the container predates resolution)."""
    requested, digest = labels.get(REQUESTED_LABEL), labels.get(DIGEST_LABEL)
    if not image or not requested or not digest:
        return None
    return ResolvedImage(requested, image, image.rpartition(":")[2], digest)


def image_line(image: str | None, labels: Mapping[str, str]) -> str:
    """A rank's image as `status` and the cockpit show it: the tag, and for a resolved
    sentinel its digest and what it was asked for as."""
    found = running_image(image, labels)
    if found is None:
        return image or "?"
    return f"{found.image}  {found.digest}  (the newest nightly for {found.requested})"
