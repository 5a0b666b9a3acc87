"""What a session's evaluation reads besides the probe: the Hub's answers and the image
flag checks, fetched once and kept for the session.

The cockpit evaluates every recipe row synchronously, so `assess` never waits: it uses
what `fetch` has brought in so far. `fetch` runs off the UI's thread (the Hub in a worker
thread, the flag check over the session's connections); the cockpit evaluates again once
it returns, and a launch awaits it before it evaluates, so both give one verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_tui.core.facts import NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.plan import LaunchPlan
from spark_tui.core.recipe import Recipe
from spark_tui.service.evaluate import Evaluation, assess
from spark_tui.service.images import ImageAnswers
from spark_tui.service.model_facts import HubAnswers

# The flag check's notes that it could not be made (the image is not on the head yet, or
# did not answer) or is still under way: asked again on a retry.
UNCHECKED = ("image_not_pulled", "flags_not_checked", "flags_pending")

FlagKey = tuple[str, str, tuple[str, ...], tuple[tuple[str, ...], ...]]


def flag_key(plan: LaunchPlan) -> FlagKey:
    """What a flag check's answer depends on: the head, its image, the mods (they add
    flags) and the serve argvs."""
    from spark_tui.service.image_flags import serve_argvs

    head = plan.head
    argvs = tuple(tuple(a) for a in serve_argvs(plan))
    return head.node, head.container.image, tuple(head.mods), argvs


@dataclass
class Prepared:
    """The Hub's answers, the sentinel images resolved and the flag checks one session has
    (see module doc)."""

    hub: HubAnswers
    images: ImageAnswers = field(default_factory=ImageAnswers)
    flags: dict[FlagKey, list[Finding]] = field(default_factory=dict)
    _inflight: dict[Hashable, asyncio.Task[Any]] = field(default_factory=dict)

    def assess(
        self,
        recipe: Recipe,
        overrides: Mapping[str, Any],
        nodes: Sequence[NodeFacts],
        *,
        held: Mapping[str, int],
        where: str,
        remedy: str | None,
        unpicked: Sequence[str] | None = None,
    ) -> Evaluation:
        """service.evaluate.assess with the answers fetched so far."""
        return assess(
            recipe,
            overrides,
            nodes,
            held=held,
            facts_for=self.hub.facts_for,
            where=where,
            remedy=remedy,
            flags=lambda plan: self.flags.get(flag_key(plan)),
            images=self.images.answer,
            unpicked=unpicked,
        )

    async def fetch(
        self,
        evaluate: Callable[[], Evaluation],
        nodes: Sequence[NodeFacts],
        check_flags: Callable[[LaunchPlan], Awaitable[list[Finding]]] | None,
        *,
        retry: bool = False,
        waiting: Callable[[str], None] | None = None,
    ) -> bool:
        """Fetch what `evaluate()` lacks: the model's Hub facts, the newest nightly a
        sentinel image stands for, then the flag check of its plan (which checks the
        resolved image). True when anything new came in; `waiting` is told what the Hub is
        asked, and how long it may take, before it is asked."""
        evaluation = evaluate()
        recipe = evaluation.recipe
        key = self.hub.key(recipe)
        if retry and isinstance(self.hub.answers.get(key), Finding):
            del self.hub.answers[key]
        new = False
        if self.hub.wanted(recipe, nodes, evaluation.argv):
            new = await self._once(key, self.hub.fetch(recipe, waiting)) or new
            evaluation = evaluate()
        image = recipe.container
        if image and self.images.wanted(image, retry=retry):
            await self._once(("image", image), self.images.fetch(image))
            new = True
            evaluation = evaluate()
        plan = evaluation.plan
        if plan is None or evaluation.problem is not None or check_flags is None:
            return new
        fkey = flag_key(plan)
        found = self.flags.get(fkey)
        if retry and found is not None and any(f.code in UNCHECKED for f in found):
            del self.flags[fkey]
        if fkey not in self.flags:
            self.flags[fkey] = await self._once(fkey, check_flags(plan))
            new = True
        return new

    async def _once(self, key: Hashable, work: Awaitable[Any]) -> Any:
        """`work`, unless the same fetch is under way: then its result."""
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(work)
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        else:
            close = getattr(work, "close", None)
            if close is not None:
                close()  # a coroutine that will not run
        return await asyncio.shield(task)
