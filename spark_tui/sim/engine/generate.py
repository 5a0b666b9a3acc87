"""SIMULATED generation: deterministic text, reasoning and tool calls for the simulated engine.

Nothing here is a language model. Replies are built from the prompt by simple rules (echo
"reply with X", a haiku, a greeting, counting, small arithmetic, a tool call whose arguments
come from the prompt, e.g. get_weather {"location": "Boston"}) and otherwise from a fixed bank of
sentences chosen by a hash of the prompt, so temperature 0 always gives the same reply and a
streamed reply equals the non-streamed one. The tokenizer splits text into word-like pieces
whose concatenation is the text; token counts are therefore stable and plausible.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

_PIECE = re.compile(r"\s*[A-Za-z]+|\s*\d|\s*[^\sA-Za-z\d]|\s+")


def tokenize(text: str) -> list[str]:
    """Split text into token pieces whose concatenation is `text` (words of <= 6 letters)."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group(0)
        stripped = piece.lstrip()
        lead = piece[: len(piece) - len(stripped)]
        if len(stripped) <= 6:
            out.append(piece)
            continue
        out.append(lead + stripped[:6])
        rest = stripped[6:]
        while rest:
            out.append(rest[:6])
            rest = rest[6:]
    return out


def token_ids(pieces: list[str]) -> list[int]:
    """Stable integer ids for token pieces (for prefix-cache hashing and token_ids fields)."""
    return [int(hashlib.blake2s(p.encode("utf-8"), digest_size=3).hexdigest(), 16) for p in pieces]


def message_text(content: Any) -> str:
    """The text of a chat message's content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(parts)
    return str(content)


def render_chat(messages: list[dict[str, Any]], tools: list[Any] | None) -> str:
    """The prompt text a chat template would produce (ChatML-like), for token counting."""
    out = []
    if tools:
        out.append(
            "<|im_start|>system\n# Tools\n" + json.dumps(tools, sort_keys=True) + "<|im_end|>\n"
        )
    for msg in messages:
        role = str(msg.get("role", "user"))
        text = message_text(msg.get("content"))
        if msg.get("tool_calls"):
            text += json.dumps(msg["tool_calls"], sort_keys=True)
        out.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


@dataclass
class ToolCall:
    """One function call the simulated model makes."""

    call_id: str
    name: str
    arguments: str


@dataclass
class Reply:
    """What the simulated model will say: reasoning, content and/or tool calls."""

    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class Piece:
    """One generated token: its text and the channel it belongs to."""

    text: str
    channel: str  # "reasoning", "content", "tool_header", "tool_args"
    tool_index: int = 0


def _seed(*parts: Any) -> int:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return int(digest[:12], 16)


def make_rng(prompt: str, temperature: float | None, seed: int | None) -> random.Random:
    """Deterministic at temperature 0 or with a seed; otherwise a fresh random draw."""
    if seed is not None:
        return random.Random(_seed(prompt, seed))
    if temperature is not None and temperature <= 0:
        return random.Random(_seed(prompt))
    return random.Random()


_BANK = [
    "On a pair of DGX Sparks, the model is split across both GPUs with tensor parallelism.",
    "Each node keeps its share of the weights and its own slice of the KV cache.",
    "Decode speed is bound by memory bandwidth, so smaller weights per rank mean faster tokens.",
    "Prefix caching lets requests that share a system prompt skip part of the prefill.",
    "Raising max-num-seqs lets more requests share each decode step.",
    "A larger max-num-batched-tokens shortens the time to first token on long prompts.",
    "The ConnectX-7 link carries the all-reduce traffic between the two ranks.",
    "Speculative decoding with MTP drafts a few tokens ahead and keeps the ones that match.",
    "Unified memory means the page cache competes with the model for the same gigabytes.",
    "It is worth changing one setting at a time and measuring before and after.",
    "The head node serves the API while the worker joins the same distributed executor.",
    "Long contexts need a KV cache sized for the longest request you plan to serve.",
]

_HAIKUS = [
    ("Silicon rivers", "carry {s} thoughts at light speed", "the fans hum softly"),
    ("Warm {s} hum", "a thousand cores in concert", "numbers bloom like spring"),
    ("Quiet tensor rain", "falls through {s} memory", "answers condensing"),
]


def _topic(text: str) -> str:
    words = re.findall(r"[A-Za-z][A-Za-z0-9\-]{3,}", text)
    stop = {"what", "about", "please", "write", "tell", "explain", "with", "that", "this", "your"}
    keep = [w for w in words if w.lower() not in stop]
    return keep[-1] if keep else "that"


def _echo(text: str) -> str | None:
    m = re.search(
        r"\b(?:reply|respond|answer|say|output|print)\b(?:\s+with)?"
        r"(?:\s+(?:exactly|only|just|the\s+word))*\s*:?\s*(.+)$",
        text.strip(),
        re.I | re.S,
    )
    if not m:
        return None
    value = m.group(1).strip()
    quoted = re.match(r"^[\"'“‘`](.+?)[\"'”’`]", value)
    if quoted:
        return quoted.group(1)
    value = value.rstrip(".!").strip()
    if 0 < len(value.split()) <= 8:
        return value
    return None


def compose_text(prompt: str, rng: random.Random) -> str:
    """A natural-length reply to `prompt`."""
    text = prompt.strip()
    low = text.lower()
    echo = _echo(text)
    if echo:
        return echo
    if "haiku" in low:
        about = re.search(r"about\s+(?:a|an|the)?\s*([A-Za-z0-9\- ]+?)[.?!]?$", text, re.I)
        subject = about.group(1).strip() if about else "GPU"
        lines = rng.choice(_HAIKUS)
        return "\n".join(line.format(s=subject) for line in lines)
    if re.match(r"^(hi|hello|hey)\b", low):
        return "Hello! How can I help you today?"
    count = re.search(r"count(?:\s+from\s+1)?\s+to\s+(\d+)", low)
    if count:
        n = min(int(count.group(1)), 200)
        return ", ".join(str(i) for i in range(1, n + 1)) + "."
    arith = re.search(r"(-?\d+)\s*([+\-*x×/])\s*(-?\d+)", text)
    if arith and re.search(r"\b(what|compute|calculate)\b", low):
        a, op, b = int(arith.group(1)), arith.group(2), int(arith.group(3))
        result: Any
        if op == "+":
            result = a + b
        elif op == "-":
            result = a - b
        elif op in "*x×":
            result = a * b
        else:
            result = a / b if b else "undefined"
        return f"{a} {op} {b} = {result}."
    topic = _topic(text)
    picks = rng.sample(_BANK, 3)
    return f"Here is a short answer about {topic}. " + " ".join(picks)


def continuation(rng: random.Random) -> str:
    """More text for requests that ask for more tokens than the natural reply has."""
    return " " + " ".join(rng.sample(_BANK, 4))


def compose_reasoning(prompt: str, tool: ToolCall | None) -> str:
    """The simulated model's thinking before it answers."""
    short = " ".join(prompt.strip().split()[:16])
    if tool is not None:
        return (
            f'The user asks: "{short}". There is a {tool.name} tool for this, so I should call '
            f"it with {tool.arguments} and not guess the answer."
        )
    return (
        f'The user asks: "{short}". I should answer directly and keep it short, '
        "checking the request once before I reply."
    )


_PLACE = re.compile(r"\b(?:in|at|for|near|of)\s+([A-Z][\w\-\.]*(?:[ ,]+[A-Z][\w\-\.]*)*)")
_PLACE_KEYS = ("location", "city", "place", "address", "region", "country", "town")


def _argument(name: str, schema: dict[str, Any], prompt: str) -> Any:
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("integer", "number"):
        num = re.search(r"-?\d+(?:\.\d+)?", prompt)
        value = float(num.group(0)) if num else 1
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    if any(key in name.lower() for key in _PLACE_KEYS):
        place = _PLACE.search(prompt)
        if place:
            return place.group(1).strip(" ,.")
    quoted = re.search(r"[\"'“`](.+?)[\"'”`]", prompt)
    if quoted:
        return quoted.group(1)
    return prompt.strip().rstrip(".?!")


def choose_tool(
    tools: list[dict[str, Any]], prompt: str, tool_choice: Any
) -> dict[str, Any] | None:
    """The function the simulated model calls for this prompt, if any."""
    funcs = [t.get("function", t) for t in tools if isinstance(t, dict)]
    funcs = [f for f in funcs if isinstance(f, dict) and f.get("name")]
    if not funcs:
        return None
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        return next((f for f in funcs if f["name"] == wanted), None)
    low = prompt.lower()

    def score(func: dict[str, Any]) -> int:
        name = str(func["name"]).lower()
        words = set(
            re.findall(
                r"[a-z]{4,}",
                name.replace("_", " ") + " " + str(func.get("description", "")).lower(),
            )
        )
        return (10 if name in low else 0) + sum(1 for w in words if w in low)

    best: dict[str, Any] = max(funcs, key=score)
    if tool_choice == "required" or score(best) > 0:
        return best
    return None


def make_tool_call(func: dict[str, Any], prompt: str, rng_key: str) -> ToolCall:
    """A call of `func` with arguments taken from the prompt."""
    params = func.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = params.get("required") or list(props)
    args = {
        name: _argument(name, props.get(name) or {}, prompt) for name in required if name in props
    }
    call_id = "chatcmpl-tool-" + hashlib.sha256(rng_key.encode()).hexdigest()[:16]
    return ToolCall(
        call_id=call_id, name=str(func["name"]), arguments=json.dumps(args, ensure_ascii=False)
    )


def pieces_for(reply: Reply, reasoning_in_content: bool) -> list[Piece]:
    """The reply as a token sequence with channels (what the scheduler emits step by step).
    Without a reasoning parser, a thinking model's reasoning stays in the content as
    `<think>...</think>`, as a real server returns it."""
    out: list[Piece] = []
    if reply.reasoning:
        if reasoning_in_content:
            text = "<think>\n" + reply.reasoning + "\n</think>\n\n"
            out += [Piece(t, "content") for t in tokenize(text)]
        else:
            out += [Piece(t, "reasoning") for t in tokenize(reply.reasoning)]
    if reply.content:
        out += [Piece(t, "content") for t in tokenize(reply.content)]
    for index, call in enumerate(reply.tool_calls):
        out.append(Piece("", "tool_header", index))
        out += [Piece(t, "tool_args", index) for t in _split_args(call.arguments)]
    return out


def _split_args(arguments: str) -> list[str]:
    parts = tokenize(arguments)
    # Group into a few deltas, as a tool parser streams them.
    size = max(1, len(parts) // 3)
    return ["".join(parts[i : i + size]) for i in range(0, len(parts), size)] or [arguments]


def apply_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """Cut text at the first stop string; returns (text, the stop string hit)."""
    best: tuple[int, str] | None = None
    for stop in stops:
        if stop:
            i = text.find(stop)
            if i >= 0 and (best is None or i < best[0]):
                best = (i, stop)
    if best is None:
        return text, None
    return text[: best[0]], best[1]
