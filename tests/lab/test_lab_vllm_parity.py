"""Figures users can trust, held against REAL vLLM (0.32, CPU build) on the lab: the stand-in's
/metrics families against real vLLM's after the same small load, and `spark-tui bench`
against vLLM's own `vllm bench serve` on the same cluster.

One launch of real vLLM (the lab recipe for one node, on the head) on the session's real-vLLM
lab serves the module. Select with `-m vllm`. Set SPARK_TUI_PARITY_DUMP=DIR to keep what real
vLLM served (the /metrics pages, both tools' results) for fixtures.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import parity_kit as pk
import pytest
import standin_compare as sc
from labkit import lab_guard, launched

from spark_tui.core.inventory import inventory_to_yaml
from spark_tui.sim.lab import Lab, vllm_image

lab_guard()

pytestmark = [pytest.mark.lab, pytest.mark.vllm, pytest.mark.usefixtures("shared_flag_cache")]

READY_TIMEOUT = 900
SERVED = sc.SERVED
# A model of the stand-in's catalogue stands in for the tiny local one.
STAND_IN_MODEL = "Qwen/Qwen3-0.6B"
SERVE_FLAGS = sc.SERVE_FLAGS


def _dump(name: str, text: str) -> None:
    where = os.environ.get("SPARK_TUI_PARITY_DUMP")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / name).write_text(text)


@pytest.fixture(scope="module")
def files(vllm_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The head alone as the inventory, and the lab's recipe for one node (tensor parallel 1)."""
    d = tmp_path_factory.mktemp("vllm-parity")
    inventory = d / "head.yaml"
    inventory.write_text(inventory_to_yaml(vllm_lab.inventory_nodes()[:1]))
    recipe = vllm_image.write_recipe(d, 1)
    return {"dir": d, "inventory": inventory, "recipe": recipe}


@pytest.fixture(scope="module")
def cluster(vllm_lab: Lab, files: dict[str, Path]) -> Iterator[str]:
    """Real vLLM launched by spark-tui on the head; its base URL on the lab network."""
    with launched(files["recipe"], files["inventory"], ready_timeout=READY_TIMEOUT) as res:
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        yield f"http://{vllm_lab.node(1).address}:8000"


def _stand_in(block_size: str) -> tuple[Any, int]:
    """The stand-in with the lab recipe's flags and real vLLM's KV block size (the CPU build
    picks its own; the block size decides which repeated prompts hit the prefix cache)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
    from engine_harness import Engine, free_port

    port = free_port()
    argv = ["serve", STAND_IN_MODEL, "--host", "127.0.0.1", "--port", str(port), *SERVE_FLAGS]
    return Engine([*argv, "--block-size", block_size]), port


def _load_and_scrape(base: str) -> tuple[str, str]:
    """/metrics before and after the comparison's requests (standin_compare.requests)."""
    before = httpx.get(base + "/metrics", timeout=30).text
    sc.send(base, SERVED)
    after = httpx.get(base + "/metrics", timeout=30).text
    return before, after


def test_the_stand_in_serves_real_vllms_metric_families_and_moves_them_alike(
    cluster: str,
) -> None:
    real_before, real_after = _load_and_scrape(cluster)
    _dump("metrics-before.prom", real_before)
    _dump("metrics-after.prom", real_after)
    engine, port = _stand_in(sc.cache_block_size(real_before))
    try:
        engine.wait_healthy(port, timeout=60)
        sim_before, sim_after = _load_and_scrape(f"http://127.0.0.1:{port}")
    finally:
        engine.stop()
    real, sim = sc.families(real_after), sc.families(sim_after)
    assert len(real) == 74, sorted(real)  # 72 of the engine, 2 of the tool parser
    problems = sc.family_problems(real, sim)
    # The same requests move the same families (counters, histograms; gauges at rest).
    real_moved = sc.moved(sc.families(real_before), real)
    sim_moved = sc.moved(sc.families(sim_before), sim)
    if real_moved != sim_moved:
        problems.append(
            f"moved only on real vLLM: {sorted(real_moved - sim_moved)}; "
            f"only on the stand-in: {sorted(sim_moved - real_moved)}"
        )
    assert not problems, "\n".join(problems)


# The workload both benchmarks run. On this machine (two cores, other work beside) a round's
# figures vary by tens of per cent with the load from elsewhere; 48 requests at concurrency 4
# give each round 48 TTFTs and about 3,000 inter-token gaps, and five alternating rounds per
# tool (medians) keep a burst of outside load from landing on one tool only.
WORKLOAD = pk.Workload(prompt_tokens=256, output_tokens=64, concurrency=4, requests=48)
ROUNDS = 5
TOLERANCE = 0.10


# The engine on one core and both tools' load generators (each client, the head's sshd) on the
# other (parity_kit.PLACEMENTS "split"): the engine shares this machine's two cores with the
# clients, and spark-tui's client path (httpx and asyncssh in its process, sshd's encryption on
# the head) takes more CPU per streamed chunk than `vllm bench serve` on the loopback; unbound,
# it slowed the engine's own clock during spark-tui's rounds only (TTFT 1.14x to 1.21x, tok/s
# 0.84x to 0.87x at a load of 4 to 9). On a Spark the client runs on the user's laptop and the
# engine has a GPU and 20 cores to itself: the binding stands for that. Left by path: each
# tool's mean TTFT minus the engine's own (the table's split) is 0.6 to 1.7 ms longer through
# SSH than for `vllm bench serve` on the head's loopback. Measured so: 0.96x, 1.00x, 0.98x (TTFT
# p50, ITL p50, tok/s at a load of 3), 1.05x, 1.04x, 0.98x and 0.89x, 0.98x, 1.01x (load 7 to 10).
PLACEMENT = "split"


def test_bench_agrees_with_vllms_own_bench_serve(
    cluster: str, vllm_lab: Lab, files: dict[str, Path]
) -> None:
    container = pk.head_container(vllm_lab.node(1).docker_socket)
    got = pk.compare(
        container,
        cluster,
        ["--inventory", str(files["inventory"])],
        vllm_image.MODEL_REPO,
        SERVED,
        WORKLOAD,
        rounds=ROUNDS,
        sshd_pid=int(vllm_lab.node(1).sshd_pidfile.read_text()),
        placement=PLACEMENT,
    )
    print("\n" + got.table())
    _dump("bench-parity.json", json.dumps({"vllm": got.vllm, "spark": got.spark}, indent=1))
    _dump("bench-parity-raw.json", json.dumps(got.raw, indent=1, default=str))
    for raw in got.raw:
        # Same work on both sides: every request done, the same output tokens each.
        assert raw["vllm"]["completed"] == WORKLOAD.requests
        assert raw["vllm"]["total_output_tokens"] == WORKLOAD.requests * WORKLOAD.output_tokens
        (level,) = raw["spark"]["levels"]
        assert level["errors"] == 0 and level["output_tokens"] == raw["vllm"]["total_output_tokens"]
        # The same prefill work: prompts of the same length as the server counts them (the
        # tiny model's words are not all one token: within a token a request), none found in
        # its prefix cache (spark-tui's run has its warm-up request besides).
        server = raw["server"]
        spark_prompts = server["spark"]["prompt_tokens"] - raw["spark"]["warmup_prompt_tokens"]
        for who, tokens in (("vllm", server["vllm"]["prompt_tokens"]), ("spark", spark_prompts)):
            assert abs(tokens / WORKLOAD.requests - WORKLOAD.prompt_tokens) <= 1, (who, tokens)
        assert server["vllm"]["hits"] == server["spark"]["hits"] == 0, server
    off = {fig: got.ratio(fig) for fig in pk.FIGURES if abs(got.ratio(fig) - 1) > TOLERANCE}
    # Tests never fail on timing (the figures move by tens of per cent with the load on these
    # two cores): a figure beyond the tolerance is reported as an expected failure with this
    # run's figures, and the test fails only when both tools did not do the same work.
    if off:
        pytest.xfail(
            f"spark-tui/vLLM beyond {TOLERANCE:.0%}: "
            + ", ".join(f"{fig} {r:.2f}x" for fig, r in off.items())
            + f"\n{got.table()}"
        )
