"""The container images a simulated node holds: every bundled recipe's image, with digests."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from spark_tui.sim.nodes.bundled import bundled_recipes

# 2026-01-15T00:00:00Z: one fixed creation time keeps outputs deterministic.
_CREATED = 1768435200
_IMAGE_ENV = ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def split_ref(ref: str) -> tuple[str, str | None, str | None]:
    """`repo[:tag][@digest]` -> (repo, tag, digest); a registry port is not a tag."""
    digest = None
    if "@" in ref:
        ref, _, digest = ref.partition("@")
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :], digest
    return ref, None, digest


@dataclass(frozen=True)
class SimImage:
    """A simulated local image: tag, id and repo digest (simulated, derived from the name)."""

    repo: str
    tag: str | None
    id: str
    digest: str
    size: int = 18_612_301_824
    created: int = _CREATED
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.tag}" if self.tag else f"{self.repo}@{self.digest}"

    @property
    def repo_tags(self) -> list[str]:
        return [f"{self.repo}:{self.tag}"] if self.tag else []

    @property
    def repo_digests(self) -> list[str]:
        return [f"{self.repo}@{self.digest}"]

    @property
    def env(self) -> list[str]:
        return list(_IMAGE_ENV)

    def matches(self, ref: str) -> bool:
        """Does `ref` (as Docker accepts it: name[:tag], name@digest, id, id prefix) name me?"""
        if ref in (self.id, self.id.removeprefix("sha256:")):
            return True
        bare = ref.removeprefix("sha256:")
        if len(bare) >= 12 and self.id.removeprefix("sha256:").startswith(bare):
            return True
        repo, tag, digest = split_ref(ref)
        repo = repo.removeprefix("docker.io/").removeprefix("library/")
        if repo != self.repo.removeprefix("docker.io/").removeprefix("library/"):
            return False
        if digest:
            return digest == self.digest
        return (tag or "latest") == self.tag


def make_image(ref: str, salt: str = "") -> SimImage:
    """The simulated image for `ref` on a node; a non-empty `salt` gives other digests."""
    repo, tag, pinned = split_ref(ref)
    # A node that differs cannot hold a pinned digest: it has another build of the repo.
    digest = None if salt else pinned
    if not tag and not pinned:
        tag = "latest"
    return SimImage(
        repo=repo,
        tag=tag,
        id=_sha(f"simulated image config {repo}:{tag}@{digest} {salt}"),
        digest=digest or _sha(f"simulated image manifest {repo}:{tag} {salt}"),
        labels={
            "org.opencontainers.image.description": "simulated image (spark-tui sim)",
            "org.opencontainers.image.ref.name": "ubuntu",
            "org.opencontainers.image.version": "24.04",
        },
    )


def bundled_image_refs() -> list[str]:
    """The container image of every bundled recipe, sorted, without repeats."""
    return sorted({r.container for r in bundled_recipes() if r.container})
