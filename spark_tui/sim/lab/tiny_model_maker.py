"""Make the lab's tiny models with no hub: a random-weight Qwen2ForCausalLM (dense) or
Qwen3MoeForCausalLM (mixture of experts) and a BPE tokenizer trained on local text, laid out
as a Hugging Face hub-cache entry.

Run as a script by the real-vLLM venv's interpreter (it needs torch, transformers and
tokenizers, which spark-tui itself does not depend on):
`VENV/bin/python tiny_model_maker.py OUT_HUB_DIR ORG/NAME [moe]`. It prints the revision.
The weights are random (seeded) but for a planted reply: the model answers every prompt
with REPLY and stops (see plant_reply); every file vLLM, the tokenizer and spark-tui's probe
read is real.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

CORPUS_DIRS = ("/usr/share/common-licenses", "/usr/share/doc/python3", "/usr/share/dict")
VOCAB_SIZE = 4096
# ChatML like Qwen2.5, with the Hermes tools block that vLLM's `hermes` parser expects.
CHAT_TEMPLATE = """{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}
{{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n" }}
{{- "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls | default([]) %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '\\n<tool_call>\\n{"name": "' + fn.name + '", "arguments": ' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# What the model answers to any prompt before its end token (see plant_reply).
REPLY = " Spark lab ready"
ADDED = [
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<tool_response>",
    "</tool_response>",
]


def _corpus() -> list[str]:
    files: list[str] = []
    for d in CORPUS_DIRS:
        if os.path.isdir(d):
            for root, _dirs, names in os.walk(d):
                files += [os.path.join(root, n) for n in sorted(names)]
    texts = []
    for f in sorted(files):
        try:
            with open(f, encoding="utf-8", errors="ignore") as fh:
                texts.append(fh.read(200_000))
        except OSError:
            continue
    if sum(len(t) for t in texts) < 50_000:
        raise SystemExit(f"not enough local text to train a tokenizer in {CORPUS_DIRS}")
    return texts


def make_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(ADDED),
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        model_max_length=4096,
    )
    fast.add_tokens(ADDED)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(fast)


def plant_reply(
    model: Any, reply_ids: list[int], eos_id: int, blank_ids: list[int] | None = None
) -> None:
    """Make the random model answer every prompt with `reply_ids` and then stop, like a
    chat model (a purely random one never samples its end token in 2048 steps), and never
    choose a whitespace-only token after an ordinary one (`blank_ids`), like a chat model
    writing compact JSON.

    Each token's embedding gets a large component on one of a few reserved dimensions
    (ordinary tokens on the first, the reply's tokens on the next ones); that component
    dominates the residual stream, so the final norm turns it into a near one-hot vector,
    and the LM head maps it to the next token of the chain: any token -> reply[0] -> ... ->
    end. Everything else stays random, so guided decoding can still force any output.

    Why the blanks: JSON allows any run of whitespace between its tokens, and a trained
    BPE has dozens of whitespace-only tokens against one `"`. Sampled near-uniformly by a
    random model, a forced tool call (vLLM's grammar for tool_choice "required") then
    spends its whole budget on whitespace inside `{...}` and ends with finish_reason
    "length" and no call. With the blanks pushed down the grammar's output is the call
    itself, so real vLLM parses it within a few dozen tokens."""
    import torch

    if len(set(reply_ids)) != len(reply_ids) or eos_id in reply_ids:
        raise SystemExit(f"the planted reply's tokens must differ: {reply_ids}")
    blanks = [t for t in blank_ids or [] if t not in reply_ids and t != eos_id]
    emb = model.model.embed_tokens.weight
    head = model.lm_head.weight
    chain = [*reply_ids, eos_id]
    # Large enough to outweigh what two random layers add to the residual stream (~3).
    mark, sharp, damp = 20.0, 1.5, -12.0
    with torch.no_grad():
        emb[:, : len(chain)] = 0.0
        emb[:, 0] = mark
        head[:, : len(chain)] = 0.0
        for i, tok in enumerate(chain[:-1]):
            emb[tok, 0] = 0.0
            emb[tok, i + 1] = mark
        for i, nxt in enumerate(chain):
            head[nxt, i] = sharp
        for tok in blanks:
            head[tok, 0] = damp


def blank_token_ids(tok: Any) -> list[int]:
    """The tokens whose text is whitespace only (what JSON allows between its tokens)."""
    out = []
    for i in range(len(tok)):
        text = tok.decode([i])
        if text and not text.strip(" \t\n\r"):
            out.append(i)
    return out


def make_model(
    out: Path,
    vocab: int,
    eos_id: int,
    pad_id: int,
    reply_ids: list[int],
    blank_ids: list[int] | None = None,
) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(cfg).to(torch.float32)
    plant_reply(model, reply_ids, eos_id, blank_ids)
    # Sharded on purpose: a model.safetensors.index.json is what large models carry.
    model.save_pretrained(str(out), safe_serialization=True, max_shard_size="5MB")
    GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(str(out))


def make_moe_model(
    out: Path,
    vocab: int,
    eos_id: int,
    pad_id: int,
    reply_ids: list[int],
    blank_ids: list[int] | None = None,
) -> None:
    """The dense model's shape with every MLP a mixture of 4 experts (2 per token): the
    smallest model real vLLM treats as MoE (its data-parallel ranks step together)."""
    import torch
    from transformers import GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=512,
        # A multiple of 32: the CPU build's grouped-GEMM MoE kernel needs that alignment.
        moe_intermediate_size=128,
        num_experts=4,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    model = Qwen3MoeForCausalLM(cfg).to(torch.float32)
    plant_reply(model, reply_ids, eos_id, blank_ids)
    model.save_pretrained(str(out), safe_serialization=True, max_shard_size="5MB")
    GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(str(out))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def to_hub_cache(files_dir: Path, hub: Path, repo_id: str) -> str:
    """Lay the files out as the hub library does: blobs by hash, a snapshot of symlinks
    named by revision, and refs/main naming that revision. Returns the revision."""
    entry = hub / ("models--" + repo_id.replace("/", "--"))
    names = sorted(p.name for p in files_dir.iterdir() if p.is_file())
    hashes = {n: _sha256(files_dir / n) for n in names}
    revision = hashlib.sha1("".join(f"{n}:{hashes[n]}\n" for n in names).encode()).hexdigest()
    if entry.exists():
        shutil.rmtree(entry)
    (entry / "blobs").mkdir(parents=True)
    (entry / "refs").mkdir()
    snap = entry / "snapshots" / revision
    snap.mkdir(parents=True)
    for n in names:
        blob = entry / "blobs" / hashes[n]
        shutil.copyfile(files_dir / n, blob)
        (snap / n).symlink_to(os.path.join("..", "..", "blobs", hashes[n]))
    (entry / "refs" / "main").write_text(revision)
    return revision


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[2:] not in ([], ["moe"]):
        print("usage: tiny_model_maker.py OUT_HUB_DIR ORG/NAME [moe]", file=sys.stderr)
        return 2
    hub, repo_id = Path(argv[0]), argv[1]
    maker = make_moe_model if argv[2:] == ["moe"] else make_model
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp)
        vocab = make_tokenizer(files)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(files))
        eos_id = tok.convert_tokens_to_ids("<|im_end|>")
        pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
        # Each token once: a chain cannot pass through the same token twice.
        reply_ids = list(dict.fromkeys(tok.encode(REPLY, add_special_tokens=False)))
        maker(files, vocab, eos_id, pad_id, reply_ids, blank_token_ids(tok))
        json.loads((files / "model.safetensors.index.json").read_text())  # must exist
        revision = to_hub_cache(files, hub, repo_id)
    print(revision)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
