"""Which image a launch runs and when a node pulls it.

A sentinel image (core.images) is resolved before the launch to the newest dated nightly
tag of the authoritative repository and that tag's digest; every node then pulls that tag
unless it already holds that very digest, and a node that ends with another digest is
named before any rank starts. Any other image is used as written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spark_tui.core.facts import ImageInfo
from spark_tui.core.images import (
    ENDPOINTS_ENV,
    NIGHTLY_REPOSITORY,
    ResolvedImage,
    is_sentinel,
    newest_nightly,
    parse_endpoints,
    parse_ref,
)

if TYPE_CHECKING:
    # The registry's HTTP client is loaded when a sentinel is resolved: a launch checks
    # and pulls its images without it.
    from spark_tui.remote.registry import Registry


def configured_endpoints(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The registry endpoints this environment sets (`SPARK_TUI_REGISTRY_ENDPOINTS`)."""
    return parse_endpoints((os.environ if env is None else env).get(ENDPOINTS_ENV))


def resolve_image(image: str, registry: Registry | None = None) -> ResolvedImage | None:
    """The newest published nightly `image` stands for, with its digest (None: `image` is
    no sentinel and is used as written). Raises RegistryError (message, remedy) when the
    registry cannot say."""
    if not is_sentinel(image):
        return None
    if registry is None:
        from spark_tui.remote.registry import Registry

        registry = Registry(configured_endpoints())
    ref = parse_ref(NIGHTLY_REPOSITORY)
    # No dated tag published (yet): `latest` itself, pinned by its digest.
    tag = newest_nightly(registry.tags(ref)) or "latest"
    return ResolvedImage(image.strip(), ref.with_tag(tag), tag, registry.digest(ref, tag))


def needs_pull(have: ImageInfo | None, resolved: ResolvedImage | None) -> bool:
    """Whether a node holding `have` (None: nothing by that name) pulls before the launch:
    when it lacks the image, or holds another digest than the resolved one."""
    if have is None:
        return True
    return resolved is not None and have.digest != resolved.digest
