"""The image a launch runs, for `evaluate`: a sentinel image (the newest published nightly)
resolved to its dated tag and digest, or the finding that says why it could not be.

`resolve_now` is the headless form (`plan`, `check`: one registry round trip). `ImageAnswers`
is the session's: the cockpit evaluates synchronously, so an evaluation reads the answers
fetched so far and `fetch` asks the registry in a worker thread (a launch awaits it before
it evaluates). Both give the same answer for the same image and environment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.core.fit import Finding
from spark_tui.core.images import ResolvedImage, is_sentinel

# An image answer: resolved, a finding (not resolved, or not yet), or None (used as written).
ImageAnswer = ResolvedImage | Finding | None
ImagesFor = Callable[[str], ImageAnswer]
UNRESOLVED = "image_unresolved"
PENDING = "image_resolving"


def unresolved(image: str, exc: SparkError) -> Finding:
    """The warning a sentinel that could not be resolved gives (a launch refuses it)."""
    return Finding(
        "warning",
        UNRESOLVED,
        f"{image} stands for the newest published nightly, which could not be resolved: "
        f"{exc.message}",
        exc.remedy,
    )


def resolve_answer(image: str) -> ImageAnswer:
    """The registry's answer for `image` now (None: not a sentinel, used as written)."""
    if not is_sentinel(image):
        return None
    from spark_tui.ops.images import resolve_image

    try:
        return resolve_image(image)
    except SparkError as exc:
        return unresolved(image, exc)


def refuse_unresolved(findings: list[Finding]) -> None:
    """A launch never runs a sentinel it could not resolve: the nodes would each pull
    whatever `latest` is when they get to it."""
    for f in findings:
        if f.code == UNRESOLVED:
            raise OperationFailed(f"launch refused: {f.message}", f.remedy)


_RESOLVED: dict[tuple[str, str], ImageAnswer] = {}


def resolve_now(image: str) -> ImageAnswer:
    """`resolve_answer`, asked once per image and endpoints setting in this process (a
    headless command evaluates more than once)."""
    import os

    from spark_tui.core.images import ENDPOINTS_ENV

    key = (image, os.environ.get(ENDPOINTS_ENV, ""))
    if key not in _RESOLVED:
        _RESOLVED[key] = resolve_answer(image)
    return _RESOLVED[key]


@dataclass
class ImageAnswers:
    """The resolutions one session has fetched (see module doc). Not `enabled`: every image
    is used as written (simulated Sparks hold the images they were given)."""

    enabled: bool = True
    answers: dict[str, ResolvedImage | Finding] = field(default_factory=dict)

    def answer(self, image: str) -> ImageAnswer:
        """The answer fetched so far; a sentinel not asked yet gets an info finding."""
        if not self.enabled or not is_sentinel(image):
            return None
        found = self.answers.get(image)
        if found is None:
            return Finding(
                "info",
                PENDING,
                f"resolving {image} to the newest published nightly",
                "wait for the registry's answer",
            )
        return found

    def runs(self, image: str | None) -> str | None:
        """The image a launch of `image` runs: a sentinel's resolved tag (None while it is
        not resolved: its `latest` is not what will run), any other image as written."""
        answer = self.answer(image) if image else None
        if isinstance(answer, ResolvedImage):
            return answer.image
        return None if isinstance(answer, Finding) else image

    async def to_run(self, image: str) -> str:
        """The image a launch of `image` runs, asking the registry when it has not answered
        (an image sync puts that on the nodes); a sentinel it cannot resolve raises."""
        if self.wanted(image, retry=True):
            await self.fetch(image)
        answer = self.answer(image)
        if isinstance(answer, Finding):
            raise OperationFailed(answer.message, answer.remedy)
        return answer.image if answer is not None else image

    def wanted(self, image: str | None, *, retry: bool = False) -> bool:
        """Whether the registry is still to be asked about `image`."""
        if not image or not self.enabled or not is_sentinel(image):
            return False
        found = self.answers.get(image)
        return found is None or (retry and isinstance(found, Finding))

    async def fetch(self, image: str) -> None:
        """Ask the registry (in a worker thread: the client blocks)."""
        import asyncio  # not at import: the headless plan never needs an event loop

        answer = await asyncio.to_thread(resolve_answer, image)
        if answer is not None:
            self.answers[image] = answer
