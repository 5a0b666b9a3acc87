"""Prompts of an exact token count for the served model, built before a level starts.

A prompt is one user message: the run's salt, then the shared prefix (the same words for
every request of the run, so the server's prefix cache can reuse them), then the request's
own number and words (the context depth's tokens are among them: a conversation's earlier
turns, different for each request), then a workload file's real text, if any.

The count is the server's own: vLLM's `/tokenize` with the same messages applies the same
chat template as `/v1/chat/completions`, so the words are added or removed until it says
the requested number (template included, as `usage.prompt_tokens` counts). A server without
`/tokenize` gets a word count scaled by what the warm-up's `usage` said, and the lengths
are approximate (the result says so)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from spark_tui.core.workload import RequestShape, Workload

# Short common English words: one token each (with their leading space) in the tokenizers of
# the usual open models and in the stand-in's, so a word more is a token more.
WORDS = (
    "the of and to in is was for on that with as by at from his it an were are which this "
    "be or has had not but its new have one after who they first two her been also their "
    "other time all more there when into some only over most many can world city year "
    "people state part used made three where"
).split()
# Rounds of add-or-remove words before a prompt's length is taken as it is.
ADJUST_ROUNDS = 6


def words(rng: random.Random, n: int) -> str:
    """`n` words drawn by `rng`, each with its leading space (the same rng state, the same
    words: a shorter draw is the start of a longer one)."""
    return "".join(" " + rng.choice(WORDS) for _ in range(max(0, n)))


@dataclass
class Prompt:
    """One request's message text and the prompt tokens the server will count (None when
    the server cannot say before the request)."""

    content: str
    tokens: int | None


class PromptBuilder:
    """Builds each request's prompt for one benchmark run (see the module doc)."""

    def __init__(
        self, client: httpx.AsyncClient, base: str, model: str, workload: Workload, salt: str
    ) -> None:
        self.client, self.base, self.model = client, base, model
        self.workload, self.salt = workload, salt
        self.tokenizer: bool | None = None  # None: not tried yet
        self.words_per_token = 1.0
        self._prefix_rng_seed = f"{workload.seed}:prefix"

    async def count(self, content: str) -> int | None:
        """The prompt tokens of this message as the server's chat template and tokenizer
        count them, None when the server has no usable `/tokenize`."""
        if self.tokenizer is False:
            return None
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
        }
        try:
            resp = await self.client.post(self.base + "/tokenize", json=body, timeout=30.0)
            count = resp.json().get("count") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            count = None
        if not isinstance(count, int):
            self.tokenizer = False
            return None
        self.tokenizer = True
        return count

    def _text(self, shape: RequestShape, shared: int, own: int) -> str:
        prefix = words(random.Random(self._prefix_rng_seed), shared)
        body = words(random.Random(f"{self.workload.seed}:{shape.index}"), own)
        text = f"{self.salt}{prefix} {shape.index}:{body}"
        return f"{text}\n\n{shape.text}" if shape.text else text

    async def build(self, shape: RequestShape, depth: int) -> Prompt:
        """The prompt for one request at one context depth."""
        share = self.workload.shared_prefix
        if shape.text is not None:
            # A real prompt: its own length (as the tokenizer counts it) is the base.
            base = await self.count(shape.text)
            base = base if base is not None else round(len(shape.text.split()) / 0.75)
            shared = round(share * base)
            plain = await self.count(self._text(shape, shared, 0))
            target = None if plain is None else plain + depth
            own = depth
        else:
            assert shape.prompt_tokens is not None
            target = shape.prompt_tokens + depth
            # The template, salt and number take their tokens first; the shared prefix is
            # cut to what is left, so a short prompt still has its length.
            plain = await self.count(self._text(shape, 0, 0))
            room = target - plain if plain is not None else target
            shared = max(0, min(round(share * shape.prompt_tokens), room))
            own = max(
                0, round((room - shared) * self.words_per_token) - (0 if plain is not None else 4)
            )
        content = self._text(shape, shared, own)
        if target is None:
            return Prompt(content, None)
        best: tuple[int, str, int] | None = None
        for _ in range(ADJUST_ROUNDS):
            count = await self.count(content)
            if count is None:
                return Prompt(content, None)
            if best is None or abs(count - target) < abs(best[0] - target):
                best = (count, content, own)
            if count == target or (count > target and own == 0):
                break
            own = max(0, own + target - count)
            content = self._text(shape, shared, own)
        assert best is not None
        return Prompt(best[1], best[0])

    def calibrate(self, requested: int, measured: int) -> None:
        """Without `/tokenize`: scale the words per token by what `usage` said of a prompt
        built for `requested` tokens."""
        if measured > 0:
            self.words_per_token *= requested / measured
