"""Model facts for the fit check: recipe metadata, the nodes' caches, then the Hub.

`hub_facts_for` is the headless form (`check`, `plan`): it asks the Hub (through
remote.hub, which caches on this machine and answers from that cache alone when
HF_HUB_OFFLINE is set) only when the metadata and the node caches leave out a fact the fit
needs. `HubAnswers` is the session's form: the cockpit evaluates every recipe row
synchronously, so the evaluation only reads answers already fetched, and `fetch` gets the
missing ones in a worker thread (the launch awaits it before it evaluates; the cockpit
evaluates again once it returns). Both give the same facts for the same recipe, nodes and
environment, so `check`, the fit panel and `launch` reach the same verdict.

huggingface_hub is imported only when the Hub is really asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_tui.core.facts import ModelFacts, NodeFacts
from spark_tui.core.fit import Finding
from spark_tui.core.recipe import Recipe

if TYPE_CHECKING:
    from spark_tui.core.model_facts import HubFacts

# Where a recipe's model is read from the Hub: its id and pinned revision.
HubKey = tuple[str, str | None]
PENDING = "hub_pending"


def hub_facts_for(
    recipe: Recipe,
    nodes: list[NodeFacts],
    argv: list[str],
    *,
    waiting: Callable[[str], None] | None = None,
    again: str | None = None,
) -> tuple[ModelFacts, Finding | None]:
    """The model facts of `recipe` for `argv`, asking the Hub (this environment's HF_*
    variables) when a fact the fit needs is still missing; with the Hub's finding when it
    could not answer. `waiting` is told what the Hub is asked and how long it may take
    before it is asked; `again`: the user's command, which the remedies repeat."""
    from spark_tui.remote.hub import model_facts_for

    return model_facts_for(recipe, nodes, argv, waiting=waiting, again=again)


def local_facts_for(
    recipe: Recipe, nodes: list[NodeFacts], argv: list[str]
) -> tuple[ModelFacts, Finding | None]:
    """The model facts from the recipe's metadata and the node caches alone (a plan, which
    does not depend on them, never waits for the Hub)."""
    from spark_tui.core.model_facts import resolve_model_facts

    return resolve_model_facts(recipe, nodes), None


def needs_hub(recipe: Recipe, nodes: Sequence[NodeFacts], argv: Sequence[str]) -> bool:
    """Whether the recipe's metadata and the node caches leave out a fact the fit needs
    that the Hub could give."""
    from spark_tui.core.model_facts import needs_hub as lacks
    from spark_tui.core.model_facts import resolve_model_facts
    from spark_tui.core.serve_args import parse_serve_args

    facts = resolve_model_facts(recipe, nodes)
    return lacks(recipe, facts, parse_serve_args(list(argv)))


@dataclass
class HubAnswers:
    """The Hub's answers one session has fetched, per model and revision: facts, or the
    finding that says why there are none. `env` gives the HF_* variables a fetch sees."""

    env: Callable[[], Mapping[str, str]]
    answers: dict[HubKey, HubFacts | Finding] = field(default_factory=dict)

    def facts_for(
        self, recipe: Recipe, nodes: list[NodeFacts], argv: list[str]
    ) -> tuple[ModelFacts, Finding | None]:
        """Like `hub_facts_for`, from the answers fetched so far (never waits): a model
        whose answer is not in yet gets an info finding saying it is on its way."""
        from spark_tui.core.model_facts import resolve_model_facts

        facts = resolve_model_facts(recipe, nodes)
        if not needs_hub(recipe, nodes, argv):
            return facts, None
        answer = self.answers.get(self.key(recipe))
        if answer is None:
            return facts, Finding(
                "info",
                PENDING,
                f"the facts of {recipe.model} are being read from the Hub (no node caches it)",
                "wait a moment: the verdict follows once they are in",
            )
        if isinstance(answer, Finding):
            return facts, answer
        return resolve_model_facts(recipe, nodes, hub=answer), None

    def wanted(self, recipe: Recipe, nodes: Sequence[NodeFacts], argv: Sequence[str]) -> bool:
        """Whether evaluating the recipe on these nodes needs an answer not fetched yet."""
        return self.key(recipe) not in self.answers and needs_hub(recipe, nodes, argv)

    @staticmethod
    def key(recipe: Recipe) -> HubKey:
        """The model and revision an answer is kept under."""
        return recipe.model, recipe.model_revision

    async def fetch(self, recipe: Recipe, waiting: Callable[[str], None] | None = None) -> bool:
        """Fetch the recipe's model facts from the Hub (or, offline, its cache on this
        machine) in a worker thread, once per model and revision. True when a new answer
        came in. `waiting` is told what the Hub is asked and how long it may take, before
        it is asked."""
        import asyncio

        from spark_tui.remote.hub import fetch_model_facts, wait_note

        key = self.key(recipe)
        if key in self.answers:
            return False
        env = dict(self.env())
        note = wait_note(recipe.model, recipe.model_revision, env) if waiting else None
        if waiting is not None and note is not None:
            waiting(note)
        answer = await asyncio.to_thread(fetch_model_facts, recipe, env)
        self.answers[key] = answer
        return True
