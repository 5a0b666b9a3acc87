"""The runtime overhead of one rank, term by term, as the settings change it."""

from __future__ import annotations

from spark_tui.core.facts import GIB, ModelFacts
from spark_tui.core.fit import (
    COMPILE_WORKERS_BYTES,
    CUDA_GRAPH_BYTES_PER_CAPTURED_TOKEN,
    DEFAULT_VOCAB_SIZE,
    LOGIT_BYTES,
    runtime_overhead,
)
from spark_tui.core.serve_args import ServeArgs, parse_serve_args


def args(flags: str = "") -> ServeArgs:
    return parse_serve_args(["vllm", "serve", "m", *flags.split()])


def test_enforce_eager_drops_compile_and_graphs() -> None:
    eager = runtime_overhead(args("--enforce-eager"))
    assert eager.compile_bytes == 0 and eager.cuda_graph_bytes == 0
    default = runtime_overhead(args())
    assert default.compile_bytes == COMPILE_WORKERS_BYTES and default.cuda_graph_bytes > 0


def test_compilation_mode_zero_drops_compile_in_every_spelling() -> None:
    for flags in (
        "-O 0",
        "-O0",
        '--compilation-config {"mode":0}',
        '-cc {"level":0}',
        "--compilation-config.mode 0",
        "-cc.mode=none",
    ):
        assert runtime_overhead(args(flags)).compile_bytes == 0, flags
    for flags in ('--compilation-config {"cudagraph_mode":"NONE"}', "-cc.cudagraph_mode=none"):
        graphs_off = runtime_overhead(args(flags))
        assert graphs_off.cuda_graph_bytes == 0 and graphs_off.compile_bytes > 0, flags
    assert runtime_overhead(args("-O3")).compile_bytes > 0


def test_compile_workers_only_count_on_unified_memory() -> None:
    assert runtime_overhead(args(), unified=False).compile_bytes == 0


def test_sampler_grows_with_sequences_draft_tokens_and_vocab() -> None:
    facts = ModelFacts(model_id="m", vocab_size=151936)
    base = runtime_overhead(args("--max-num-seqs 8"), facts)
    assert base.sampler_bytes == 8 * 151936 * LOGIT_BYTES
    spec = runtime_overhead(
        args('--max-num-seqs 8 --speculative-config {"method":"mtp","num_speculative_tokens":3}'),
        facts,
    )
    assert spec.sampler_bytes == 4 * base.sampler_bytes
    unknown = runtime_overhead(args("--max-num-seqs 8"))
    assert unknown.sampler_bytes == 8 * DEFAULT_VOCAB_SIZE * LOGIT_BYTES


def test_activation_follows_max_num_batched_tokens() -> None:
    small = runtime_overhead(args("--max-num-batched-tokens 2048"))
    big = runtime_overhead(args("--max-num-batched-tokens 16384"))
    assert big.activation_bytes == 8 * small.activation_bytes


def test_vllms_measured_non_torch_replaces_the_estimate_and_the_compile_workers() -> None:
    # On GB10 vLLM's non-torch figure is measured host-wide, compile workers included.
    measured = runtime_overhead(args(), measured_non_torch_bytes=GIB // 10)
    estimated = runtime_overhead(args())
    assert measured.non_torch_bytes == GIB // 10 and measured.compile_bytes == 0
    assert estimated.compile_bytes == COMPILE_WORKERS_BYTES
    same = ("activation_bytes", "sampler_bytes", "cuda_graph_bytes")
    assert all(getattr(measured, k) == getattr(estimated, k) for k in same)
    # A negative figure (the host freed memory during the profile) is vLLM's to report.
    assert runtime_overhead(args(), measured_non_torch_bytes=-GIB).non_torch_bytes == -GIB


def test_named_cuda_graph_sizes_decide_the_graph_pool() -> None:
    # sparkrun's Qwen3.8 recipe names [1, 2, 3, 4]: vLLM captures those, not the 64 tokens
    # its 8 sequences x 4 (3 drafts + 1) would give by default.
    spec = '--max-num-seqs 8 --speculative-config {"method":"mtp","num_speculative_tokens":3}'
    default = runtime_overhead(args(spec))
    named = runtime_overhead(
        args(spec + ' --compilation-config {"cudagraph_capture_sizes":[4,1,2,3]}')
    )
    dotted = runtime_overhead(args(spec + " -cc.cudagraph_capture_sizes=[1,2,3,4]"))
    assert (
        default.cuda_graph_bytes - named.cuda_graph_bytes
        == 60 * CUDA_GRAPH_BYTES_PER_CAPTURED_TOKEN
    )
    assert dotted.cuda_graph_bytes == named.cuda_graph_bytes
    # Sizes past the batched tokens are not captured.
    big = runtime_overhead(
        args(
            '--max-num-batched-tokens 256 --compilation-config {"cudagraph_capture_sizes":[8,1024]}'
        )
    )
    assert (
        big.cuda_graph_bytes
        == runtime_overhead(
            args(
                '--max-num-batched-tokens 256 --compilation-config {"cudagraph_capture_sizes":[8]}'
            )
        ).cuda_graph_bytes
    )
