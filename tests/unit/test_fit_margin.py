"""The KV margin on GB10: a budget that holds one full-length request by less than vLLM's
non-torch measurement varies between starts warns (it never blocks), and `max_model_len auto`
says the range of lengths a start may come out at. (The spread itself is held to the GB10
logs in test_fit_accuracy.py.)"""

from __future__ import annotations

import math
import re

from spark_tui.commands.check import exit_code
from spark_tui.core.facts import GIB, NodeFacts
from spark_tui.core.fit import NON_TORCH_SPREAD_BYTES, FitReport, check_fit
from spark_tui.core.kv_cache import KVLayout, layout_for
from spark_tui.core.serve_args import parse_serve_args
from tests.unit.test_fit import MEM_128, argv, codes, finding, llama70b, node, recipe

FULL = "-tp 2 --max-model-len 131072"


def gb10() -> list[NodeFacts]:
    return [node("a"), node("b")]


def util_for(margin: int, flags: str = FULL, nodes: list[NodeFacts] | None = None) -> float:
    """The utilization whose KV budget holds one full request (of the length `flags` give,
    or the model's) with `margin` bytes to spare (to within 0.0001 x total)."""
    probe = check_fit(recipe(), argv(flags), {}, nodes or gb10(), llama70b()).nodes[0]
    layout = layout_for(llama70b(), parse_serve_args(argv(flags)))
    assert layout is not None and probe.weights_bytes and probe.overhead_bytes
    need = probe.weights_bytes + probe.overhead_bytes + layout.request_bytes(131072) + margin
    return math.ceil(need / MEM_128 * 10_000) / 10_000


def at_margin(margin: int, flags: str = FULL, nodes: list[NodeFacts] | None = None) -> FitReport:
    util = util_for(margin, flags, nodes)
    return check_fit(
        recipe(), argv(f"{flags} --gpu-memory-utilization {util}"), {}, nodes or gb10(), llama70b()
    )


def spare(report: FitReport) -> int:
    n = report.nodes[0]
    assert n.kv_budget_bytes is not None and n.kv_per_request_bytes is not None
    return n.kv_budget_bytes - n.kv_per_request_bytes


def layout_of(flags: str) -> KVLayout:
    layout = layout_for(llama70b(), parse_serve_args(argv(flags)))
    assert layout is not None
    return layout


def test_a_budget_just_inside_the_spread_warns_with_a_remedy_that_leaves_it_free() -> None:
    r = at_margin(GIB)
    assert 0 < spare(r) < NON_TORCH_SPREAD_BYTES
    f = finding(r, "kv_margin_tight")
    assert f.severity == "warning" and f.message.startswith("all nodes: ")
    assert f"with {spare(r) / GIB:.2f} GiB to spare" in f.message and "2.81 GiB" in f.message
    assert "max seq len (131072)" in f.message
    # Each remedy leaves the spread free: a length whose KV fits the budget less the spread,
    # a utilization that holds weights, runtime, one request and the spread, or fp8 KV.
    n = r.nodes[0]
    assert n.kv_budget_bytes and n.weights_bytes and n.overhead_bytes and n.kv_per_request_bytes
    length = re.search(r"--set max_model_len=(\d+)", f.remedy)
    util = re.search(r"--set gpu_memory_utilization=(0\.\d\d)", f.remedy)
    assert length and util and "--set kv_cache_dtype=fp8" in f.remedy
    layout = layout_of(FULL)
    room = n.kv_budget_bytes - NON_TORCH_SPREAD_BYTES
    assert layout.request_bytes(int(length.group(1))) <= room
    assert layout.request_bytes(int(length.group(1)) + 1) > room
    need = n.weights_bytes + n.overhead_bytes + n.kv_per_request_bytes + NON_TORCH_SPREAD_BYTES
    assert float(util.group(1)) * MEM_128 >= need > (float(util.group(1)) - 0.01) * MEM_128
    # A warning: the launch goes ahead and `check` exits 0 (DESIGN.md's CLI contract).
    assert r.verdict == "fits_with_warnings" and r.ok and exit_code(r) == 0
    assert "kv_max_seq_len" not in codes(r)


def test_a_budget_well_inside_does_not_warn() -> None:
    r = at_margin(NON_TORCH_SPREAD_BYTES + GIB)
    assert spare(r) > NON_TORCH_SPREAD_BYTES
    assert "kv_margin_tight" not in codes(r) and r.verdict == "fits"


def test_a_budget_short_of_one_request_still_errors_as_vllm_does() -> None:
    r = at_margin(-GIB // 2)
    assert spare(r) < 0
    assert finding(r, "kv_max_seq_len").severity == "error"
    assert "kv_margin_tight" not in codes(r) and r.verdict == "does_not_fit"


def test_only_unified_memory_and_only_a_budget_that_moves_with_it() -> None:
    # A discrete GPU measures non-torch memory on the device: no host-wide spread.
    h100 = [node("a", gpu="NVIDIA H100 80GB HBM3"), node("b", gpu="NVIDIA H100 80GB HBM3")]
    assert "kv_margin_tight" not in codes(at_margin(GIB, nodes=h100))
    # --kv-cache-memory-bytes fixes the KV cache: what non-torch memory takes does not shrink it.
    fixed = layout_of(FULL).request_bytes(131072) + GIB
    r = check_fit(recipe(), argv(f"{FULL} --kv-cache-memory-bytes {fixed}"), {}, gb10(), llama70b())
    assert "kv_max_seq_len" not in codes(r) and "kv_margin_tight" not in codes(r)


def test_fp8_kv_is_not_offered_when_the_kv_cache_is_fp8_already() -> None:
    r = at_margin(GIB, f"{FULL} --kv-cache-dtype fp8")
    assert "kv_cache_dtype=fp8" not in finding(r, "kv_margin_tight").remedy


AUTO = "-tp 2 --max-model-len auto"


def test_auto_says_the_range_a_start_may_come_out_at_when_the_maximum_only_just_fits() -> None:
    r = at_margin(GIB, AUTO)
    assert r.max_model_len == 131072 and r.ok
    f = finding(r, "max_model_len_auto")
    n = r.nodes[0]
    assert n.kv_budget_bytes is not None
    least = layout_of(AUTO).max_len_for(n.kv_budget_bytes - NON_TORCH_SPREAD_BYTES, 131072)
    assert f.severity == "info" and 0 < least < 131072
    assert f"a start may come out at {least} to 131072 tokens" in f.message
    assert f"--set max_model_len={least}" in f.remedy
    # vLLM fits the length itself: no startup failure to warn of.
    assert "kv_margin_tight" not in codes(r)
    # With room to spare, the maximum at every start: no range.
    roomy = finding(at_margin(NON_TORCH_SPREAD_BYTES + GIB, AUTO), "max_model_len_auto")
    assert "a start may come out" not in roomy.message


def test_auto_gives_the_range_when_vllm_shortens_the_length() -> None:
    r = at_margin(-4 * GIB, AUTO)
    assert r.max_model_len is not None and r.max_model_len < 131072
    n = r.nodes[0]
    assert n.kv_budget_bytes is not None
    least = layout_of(AUTO).max_len_for(n.kv_budget_bytes - NON_TORCH_SPREAD_BYTES, 131072)
    f = finding(r, "max_model_len_auto")
    assert f"reduces it to {r.max_model_len} tokens" in f.message
    assert f"a start may come out at {least} to {r.max_model_len} tokens" in f.message
    assert least < r.max_model_len and "kv_margin_tight" not in codes(r)
    # A discrete GPU's length does not move with the host.
    h100 = [node("a", gpu="NVIDIA H100 80GB HBM3"), node("b", gpu="NVIDIA H100 80GB HBM3")]
    assert (
        "a start may come out"
        not in finding(at_margin(-4 * GIB, AUTO, h100), "max_model_len_auto").message
    )


def test_following_a_remedy_leaves_the_spread_free() -> None:
    # The error's remedies and the warning's: each `--set` they name, applied, gives neither.
    for margin, code in ((-GIB // 2, "kv_max_seq_len"), (GIB, "kv_margin_tight")):
        util = util_for(margin)
        r = check_fit(
            recipe(), argv(f"{FULL} --gpu-memory-utilization {util}"), {}, gb10(), llama70b()
        )
        sets = re.findall(r"--set (\w+)=([\w.]+)", finding(r, code).remedy)
        assert [k for k, _ in sets] == ["max_model_len", "gpu_memory_utilization", "kv_cache_dtype"]
        for key, value in sets:
            flags = {"max_model_len": "-tp 2", "gpu_memory_utilization": FULL}.get(key, FULL)
            if key != "gpu_memory_utilization":
                flags += f" --gpu-memory-utilization {util}"
            flags += f" --{key.replace('_', '-')} {value}"
            after = codes(check_fit(recipe(), argv(flags), {}, gb10(), llama70b()))
            assert "kv_max_seq_len" not in after and "kv_margin_tight" not in after, (key, value)


def test_fp8_kv_is_offered_only_where_it_holds_the_request() -> None:
    # fp8 halves the request's KV, but on GB10 it also moves attention to FlashInfer, whose
    # CUDA graphs take memory of their own: far enough short of one request, fp8 does not
    # leave the spread free (the remedies' rule) and is not named.
    for margin, offered in ((-8 * GIB, False), (-GIB // 2, True)):
        util = util_for(margin)
        r = check_fit(
            recipe(), argv(f"{FULL} --gpu-memory-utilization {util}"), {}, gb10(), llama70b()
        )
        remedy = finding(r, "kv_max_seq_len").remedy
        assert ("--set kv_cache_dtype=fp8" in remedy) is offered, (margin, remedy)
        fp8 = check_fit(
            recipe(),
            argv(f"{FULL} --gpu-memory-utilization {util} --kv-cache-dtype fp8"),
            {},
            gb10(),
            llama70b(),
        )
        # Offered where following it clears the error and the spread; not where it does not.
        clear = not {"kv_max_seq_len", "kv_margin_tight"} & set(codes(fp8))
        assert clear is offered, (margin, codes(fp8))
