"""The API server's own `vllm:` family beside the engines' (vllm/parser/metrics.py in vLLM
0.32): `vllm:tool_call_parser_invocations_total`, served only with --tool-call-parser, its
twelve label sets declared at start, counted each time the tool parser reads a reply."""

from __future__ import annotations

import threading
import time
from itertools import product
from typing import Any

from spark_tui.sim.engine.exposition import Writer

MODES = ("streaming", "non_streaming")
OUTCOMES = ("tool_call", "no_tool_call")
REQUEST_TYPES = ("chat_completions", "responses", "other")
HELP = (
    "Total number of ToolParser invocations. Non-streaming increments once per choice; "
    "streaming increments once per delta."
)
# Parsers whose `required` or named tool choice vLLM 0.32 hands to the parser like `auto`
# (their supports_required_and_named is off: a structural-tag model under the default
# VLLM_ENFORCE_STRICT_TOOL_CALLING, or declared so). For the others vLLM reads those replies
# as JSON itself, and the parser (with its counter) never runs.
FALLBACK_PARSERS = frozenset(
    {
        "deepseek_v31", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "gemma4",
        "glm45", "glm47", "hermes", "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3",
        "ling3", "llama3_json", "llama4_json", "longcat", "mimo", "minimax_m2", "minimax_m3",
        "mistral", "muse_glimmer", "openai", "plamo3", "poolside_v1", "qwen3_coder",
        "qwen3_json", "qwen3_xml", "step3p5",
    }
)  # fmt: skip


class ToolParserMetrics:
    """The tool parser's invocation counter of one API server."""

    def __init__(self, model_name: str, parser: str, auto_tools: bool) -> None:
        self.model_name = model_name
        self.parser = parser
        self.auto_tools = auto_tools
        self.created = time.time()
        self.lock = threading.Lock()
        self.counts = {key: 0 for key in product(MODES, OUTCOMES, REQUEST_TYPES)}

    def parses(self, tools: list[Any], tool_choice: Any) -> bool:
        """Whether vLLM runs the tool parser on a chat reply with these tools and choice:
        never without tools or with `none`; with `auto` when auto tool choice is on; with
        `required` or a named function only for parsers that fall back to auto parsing."""
        if not tools or tool_choice == "none":
            return False
        if tool_choice in (None, "auto"):
            return self.auto_tools
        return self.parser in FALLBACK_PARSERS

    def record(self, *, streaming: bool, tool_called: bool) -> None:
        """One invocation: a whole choice (non-streaming) or one delta (streaming)."""
        key = (
            "streaming" if streaming else "non_streaming",
            "tool_call" if tool_called else "no_tool_call",
            "chat_completions",
        )
        with self.lock:
            self.counts[key] += 1

    def render(self) -> str:
        """The family's exposition text (counter and its `_created` gauges)."""
        w = Writer(self.created)
        with self.lock:
            samples = [
                (
                    [
                        ("model_name", self.model_name),
                        ("mode", mode),
                        ("outcome", outcome),
                        ("request_type", rtype),
                    ],
                    float(n),
                )
                for (mode, outcome, rtype), n in self.counts.items()
            ]
        w.counter("vllm:tool_call_parser_invocations", HELP, samples)
        return w.text()
