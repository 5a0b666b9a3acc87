"""spark-tui's `bench` and vLLM's own `vllm bench serve` on the same real-vLLM cluster, with
the same prompt and output lengths, concurrency and request count; shared by the lab's parity
test and benchmarks/bench_parity.py.

How the two are made to measure the same thing:
- Both stream /v1/chat/completions with `stream_options.include_usage`, force the output
  length (spark-tui: min_tokens + ignore_eos; vLLM: --ignore-eos) and keep `concurrency`
  requests in flight until `requests` are done.
- The same prompts, not only the same lengths: `vllm bench serve` is given, as a dataset
  in ShareGPT's form (each prompt sent as the user message; its `custom` dataset would need
  pandas, which the image lacks), prompts built as spark-tui builds its
  own (spark_tui.ops.prompts: sized by the server's /tokenize so that `usage.prompt_tokens`,
  chat template included, is the requested length), with a salt of their own each round.
- spark-tui runs where a user runs it (the control machine, with `--inventory`: over SSH
  channels to the head's API); `vllm bench serve` runs in the head's container against
  127.0.0.1. The table splits each tool's mean TTFT into the engine's own (vLLM's
  `time_to_first_token_seconds`) and the rest, where that difference of path shows.
- Neither tool's prompts are in the server's prefix cache, and the server's prefix-cache hits
  are counted for every run to show it. vLLM's random dataset would not do: it is the same
  for the same `--seed` (with one seed, every round after the first found half of each
  prompt cached, and its TTFT was half spark-tui's for half the prefill), and on the lab's
  tiny model (4,096 tokens) its prompts, runs of consecutive token ids, meet earlier rounds'
  even with a new seed each round (128 to 512 tokens a round).
- Rounds alternate (vLLM, spark-tui, vLLM, ...) and each figure is the median over rounds, so
  a burst of load from elsewhere on the machine moves both tools' figures alike.
- Both clients get the CPU alike: the lab's CPU vLLM keeps both of this machine's cores busy,
  and a process outside the head container's CPU cgroup (spark-tui, and the head's sshd that
  carries its channels) then runs only now and then: it reads a reply's streamed chunks late
  and all at once (a near-zero ITL median, a TTFT of the whole reply). `vllm bench serve`
  runs inside that cgroup, so spark-tui's bench process and the head's sshd are moved into it
  too. On real Sparks the client is another machine and sshd has cores to spare.
- Each side's load generator gets a core of its own, the same for both, and the engine the
  other (`placement`, "split" by default): the lab recipe binds the engine's compute threads
  to core 0 (rank r -> core r); the rest of the engine (its API server and engine-core
  processes) is bound there too, and `vllm bench serve` (taskset in the container),
  spark-tui's bench process and the head's sshd (whose per-connection children inherit it)
  to core 1. Here the engine shares two cores with the clients, and spark-tui's client path
  (httpx and asyncssh's decryption in its process, sshd's encryption on the head) costs more
  CPU per streamed chunk than `vllm bench serve` on the loopback: unbound, that CPU is taken
  from the engine during spark-tui's rounds only, and the engine's own clock runs slower then.
  On a Spark the client is the user's laptop and the engine has a GPU and 20 cores of its
  own; the binding stands for that. "clients" binds only the load generators (the engine's
  API server then shares their core), "none" nothing beyond the recipe's compute threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import secrets
import statistics
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx

from spark_tui.core.workload import Workload as WorkloadSpec
from spark_tui.ops.prompts import PromptBuilder

FIGURES = ("ttft_p50_s", "itl_p50_s", "output_tps")


@dataclass
class Workload:
    """What both tools run."""

    prompt_tokens: int = 256
    output_tokens: int = 64
    concurrency: int = 4
    requests: int = 48


@dataclass
class Comparison:
    """Per-round figures of both tools and their medians."""

    workload: Workload
    template_tokens: int
    vllm: list[dict[str, float]] = field(default_factory=list)
    spark: list[dict[str, float]] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)
    # The 1-minute load average just before each run (per round: vLLM's, spark-tui's).
    loads: list[tuple[float, float]] = field(default_factory=list)
    placement: str = "split"

    def extend(self, other: Comparison) -> None:
        """Add another run of rounds of the same workload and method."""
        self.vllm += other.vllm
        self.spark += other.spark
        self.raw += other.raw
        self.loads += other.loads

    def median(self, who: str, figure: str) -> float:
        rounds = self.vllm if who == "vllm" else self.spark
        return statistics.median(r[figure] for r in rounds)

    def ratio(self, figure: str) -> float:
        """spark-tui's median over vLLM's."""
        return self.median("spark", figure) / self.median("vllm", figure)

    def table(self) -> str:
        """Both tools' figures side by side."""
        w = self.workload
        lines = [
            f"workload: prompt {w.prompt_tokens} tokens (chat template {self.template_tokens} of "
            f"them), output {w.output_tokens}, concurrency {w.concurrency}, {w.requests} "
            f"requests; {len(self.vllm)} rounds each, medians; " + PLACEMENTS[self.placement],
            f"{'figure':<22}{'vllm bench serve':>18}{'spark-tui bench':>18}{'spark/vllm':>12}",
        ]
        for fig, unit, scale in (
            ("ttft_p50_s", "ms", 1000.0),
            ("itl_p50_s", "ms", 1000.0),
            ("output_tps", "tok/s", 1.0),
        ):
            v, s = self.median("vllm", fig) * scale, self.median("spark", fig) * scale
            lines.append(f"{fig + ' (' + unit + ')':<22}{v:>18.2f}{s:>18.2f}{s / v:>12.3f}")
        seen = [r["server"] for r in self.raw]
        for who in ("vllm", "spark"):
            lines.append(
                f"server, {who} rounds: prompt tokens {[x[who]['prompt_tokens'] for x in seen]}, "
                f"prefix-cache hits {[x[who]['hits'] for x in seen]}"
            )
        lines.append(
            "TTFT mean split (ms, medians over rounds): the engine's own clock (request handed "
            "to the engine -> first token) + the rest (request sent, parsed, templated, "
            "tokenized; first chunk back to the client)"
        )
        for who in ("vllm", "spark"):
            engine, rest = self.ttft_split(who)
            lines.append(f"  {who:<6} engine {engine * 1000:6.1f}  rest {rest * 1000:6.1f}")
        for i, (v, s, (lv, ls)) in enumerate(
            zip(self.vllm, self.spark, self.loads, strict=True), 1
        ):
            lines.append(
                f"  round {i}: vllm ttft {v['ttft_p50_s'] * 1000:.1f} ms itl "
                f"{v['itl_p50_s'] * 1000:.2f} ms {v['output_tps']:.0f} tok/s (load {lv:.1f}) | "
                f"spark-tui ttft {s['ttft_p50_s'] * 1000:.1f} ms itl "
                f"{s['itl_p50_s'] * 1000:.2f} ms {s['output_tps']:.0f} tok/s (load {ls:.1f})"
            )
        return "\n".join(lines)

    def ttft_split(self, who: str) -> tuple[float, float]:
        """Median over rounds of the server's own mean TTFT, and of the client's mean TTFT
        minus it (spark-tui's server figure includes its warm-up request, 1 of 49)."""
        engine, rest = [], []
        for raw in self.raw:
            server = raw["server"][who]
            if not server.get("ttft_count"):
                continue
            mean = server["ttft_sum_s"] / server["ttft_count"]
            engine.append(mean)
            rest.append(client_ttft_mean(who, raw[who]) - mean)
        if not engine:
            return float("nan"), float("nan")
        return statistics.median(engine), statistics.median(rest)


def template_tokens(base: str, model: str) -> int:
    """The tokens the chat template adds around an empty user message, on this server."""
    body = {"model": model, "messages": [{"role": "user", "content": ""}], "max_tokens": 1}
    resp = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
    resp.raise_for_status()
    return int(resp.json()["usage"]["prompt_tokens"])


PROMPTS_IN_CONTAINER = "/tmp/spark-tui-parity-prompts.json"


def vllm_bench_argv(w: Workload, model_repo: str, served: str) -> list[str]:
    """`vllm bench serve` as run in the head's container, on the prompts of
    `put_prompts`."""
    return [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        "http://127.0.0.1:8000",
        "--model",
        model_repo,
        "--served-model-name",
        served,
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        PROMPTS_IN_CONTAINER,
        "--sharegpt-output-len",
        str(w.output_tokens),
        "--num-prompts",
        str(w.requests),
        "--max-concurrency",
        str(w.concurrency),
        "--ignore-eos",
        "--temperature",
        "0",
        "--disable-tqdm",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        "/tmp",
        "--result-filename",
        "spark-tui-parity.json",
    ]


def build_prompts(base: str, served: str, w: Workload) -> list[str]:
    """`w.requests` prompts of `w.prompt_tokens` tokens as the server counts them (chat
    template included), built as spark-tui builds its own, new to the server (a fresh salt).
    As close as spark-tui's own: on the lab's tiny model (a 4,096-token vocabulary) a word is
    not always one token, and a prompt may be a token or two off."""

    async def build() -> list[str]:
        workload = WorkloadSpec(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens)
        salt = f"{secrets.token_hex(3)}-"
        async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
            builder = PromptBuilder(client, base, served, workload, salt)
            shapes = workload.shapes(0, w.requests)
            prompts = [await builder.build(shape, 0) for shape in shapes]
        return [p.content for p in prompts]

    return asyncio.run(build())


def put_prompts(container: Any, prompts: list[str]) -> None:
    """The prompts as a ShareGPT dataset for `vllm bench serve`, in the container (the
    answers' text is not used: the output length is given)."""
    conversations = [
        {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "-"}]}
        for p in prompts
    ]
    data = json.dumps(conversations).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(Path(PROMPTS_IN_CONTAINER).name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    container.put_archive(str(Path(PROMPTS_IN_CONTAINER).parent), buf.getvalue())


def run_vllm_bench(container: Any, argv: list[str]) -> dict[str, Any]:
    """Run `vllm bench serve` in the container; its saved result."""
    res = container.exec_run(argv, environment={"HF_HUB_OFFLINE": "1"})
    said = res.output.decode("utf-8", "replace")
    if res.exit_code != 0:
        raise RuntimeError(f"vllm bench serve exited {res.exit_code}:\n{said[-3000:]}")
    got = container.exec_run(["cat", "/tmp/spark-tui-parity.json"])
    result: dict[str, Any] = json.loads(got.output.decode())
    result["_stdout"] = said
    return result


def vllm_figures(result: dict[str, Any]) -> dict[str, float]:
    return {
        "ttft_p50_s": result["median_ttft_ms"] / 1000.0,
        "itl_p50_s": result["median_itl_ms"] / 1000.0,
        "output_tps": float(result["output_throughput"]),
    }


def cpu_group(pid: int) -> Path:
    """The `cgroup.procs` file of the CPU cgroup process `pid` is in (cgroup v1 or v2)."""
    unified = None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "cgroup.procs")
        if controllers == "":
            unified = Path("/sys/fs/cgroup", path.lstrip("/"), "cgroup.procs")
    if unified is None:
        raise RuntimeError(f"process {pid} is in no CPU cgroup")
    return unified


def join_cpu_group(procs: Path, pid: int) -> None:
    """Move process `pid` into the cgroup of `procs` (its children follow)."""
    procs.write_text(str(pid))


# The cores the lab recipe binds the head's engine (rank 0, tensor parallel 1) to: its
# VLLM_CPU_OMP_THREADS_BIND is the rank's number (spark_tui.sim.lab.vllm_image.recipe_text).
ENGINE_CORES = frozenset({0})


def client_cores() -> frozenset[int]:
    """The cores left to the load generators: this process's minus the engine's."""
    return frozenset(os.sched_getaffinity(0)) - ENGINE_CORES


def cores_text(cores: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cores))


# Where each side runs ("split": the engine on its core, the load generators on theirs).
PLACEMENTS = {
    "split": "the engine (all its processes) bound to core 0, the load generators "
    "(each tool's client, the head's sshd) to core 1",
    "clients": "the load generators (each tool's client, the head's sshd) bound to core 1, "
    "the engine's compute threads to core 0, its API server anywhere",
    "none": "nothing bound beyond the engine's compute threads (core 0)",
}


def can_pin() -> str | None:
    """Why the load generators cannot have a core of their own here, or None."""
    if not client_cores():
        return f"no core is left beside the engine's {cores_text(ENGINE_CORES)}"
    return None


def _threads(pid: int) -> list[int]:
    return [int(t.name) for t in Path(f"/proc/{pid}/task").glob("*")]


Bindings = dict[int, dict[int, set[int]]]


def bind_group(procs: Path, cores: frozenset[int]) -> Bindings:
    """Bind every thread of the processes in the cgroup of `procs` to `cores`; each one's
    binding before (by process, then thread), to put back with `unbind`."""
    before: Bindings = {}
    for pid in map(int, procs.read_text().split()):
        before[pid] = {}
        for tid in _threads(pid):
            with contextlib.suppress(ProcessLookupError):
                before[pid][tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cores)
    return before


def unbind(before: Bindings) -> None:
    """Put back the bindings `bind_group` changed; a thread started since then gets its
    process's main thread's (it inherited the binding of the thread that started it)."""
    for pid, threads in before.items():
        for tid in _threads(pid):
            with contextlib.suppress(ProcessLookupError, KeyError):
                os.sched_setaffinity(tid, threads.get(tid, threads[pid]))


def run_spark_bench(
    target: list[str],
    w: Workload,
    group: Path | None = None,
    cores: frozenset[int] | None = None,
) -> dict[str, Any]:
    """`spark-tui bench TARGET --json` (TARGET: --inventory FILE or --base-url URL), in the CPU
    cgroup `group` and bound to `cores` when given."""
    argv = [
        sys.executable,
        "-m",
        "spark_tui",
        "bench",
        *target,
        "--concurrency",
        str(w.concurrency),
        "--prompt-tokens",
        str(w.prompt_tokens),
        "--output-tokens",
        str(w.output_tokens),
        "--requests-per-level",
        str(w.requests),
        "--json",
    ]

    def join() -> None:  # runs in the child before it starts spark-tui
        if group is not None:
            join_cpu_group(group, os.getpid())
        if cores is not None:
            os.sched_setaffinity(0, cores)

    res = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        preexec_fn=join,
    )
    if res.returncode != 0:
        raise RuntimeError(f"spark-tui bench exited {res.returncode}:\n{res.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def spark_figures(result: dict[str, Any]) -> dict[str, float]:
    (level,) = result["levels"]
    fig = level["figures"]
    return {
        "ttft_p50_s": float(fig["ttft_p50_s"]),
        "itl_p50_s": float(fig["itl_p50_s"]),
        "output_tps": float(fig["total_output_tps"]),
    }


SERVER_COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:prefix_cache_hits_total",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
)


def server_counters(base: str) -> dict[str, float]:
    """The server's prompt tokens, prefix-cache hits and its own TTFT histogram's sum and
    count so far (summed over engines)."""
    page = httpx.get(base + "/metrics", timeout=60).text
    return {
        name: sum(
            float(line.rsplit(" ", 1)[1])
            for line in page.splitlines()
            if line.startswith(name + "{")
        )
        for name in SERVER_COUNTERS
    }


def _since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        "prompt_tokens": after[SERVER_COUNTERS[0]] - before[SERVER_COUNTERS[0]],
        "hits": after[SERVER_COUNTERS[1]] - before[SERVER_COUNTERS[1]],
        "ttft_sum_s": after[SERVER_COUNTERS[2]] - before[SERVER_COUNTERS[2]],
        "ttft_count": after[SERVER_COUNTERS[3]] - before[SERVER_COUNTERS[3]],
    }


def client_ttft_mean(who: str, result: dict[str, Any]) -> float:
    """A run's mean TTFT as the tool measured it (seconds)."""
    if who == "vllm":
        return float(result["mean_ttft_ms"]) / 1000.0
    (level,) = result["levels"]
    return statistics.fmean(level["per_request"]["ttft_s"])


def head_container(socket: Path) -> Any:
    """The one container running on the head (the launched rank 0)."""
    client = docker.DockerClient(base_url=f"unix://{socket}", timeout=900)
    (container,) = client.containers.list()
    return container


def compare(
    container: Any,
    base: str,
    spark_target: list[str],
    model_repo: str,
    served: str,
    w: Workload,
    rounds: int = 3,
    sshd_pid: int | None = None,
    placement: str = "split",
) -> Comparison:
    """Alternate `rounds` runs of each tool; the figures of every round. spark-tui runs in the
    head container's CPU cgroup, and so does the head's sshd (`sshd_pid`, its listener: the
    connections it forks from now on stay there). `placement` (PLACEMENTS) says which cores
    the engine and both tools' load generators (with that sshd) are bound to."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}: one of {', '.join(PLACEMENTS)}")
    group = cpu_group(int(container.attrs["State"]["Pid"]))
    home = cpu_group(sshd_pid) if sshd_pid is not None else None
    cores = client_cores() if placement != "none" else None
    if cores is not None and (why := can_pin()) is not None:
        raise RuntimeError(f"cannot bind the load generators: {why}")
    sshd_cores = os.sched_getaffinity(sshd_pid) if sshd_pid is not None else None
    # Before sshd joins the container's cgroup: only the engine's processes are in it.
    engine_before = bind_group(group, ENGINE_CORES) if placement == "split" else {}
    if sshd_pid is not None:
        join_cpu_group(group, sshd_pid)
        if cores is not None:
            os.sched_setaffinity(sshd_pid, cores)
    try:
        out = _rounds(container, base, spark_target, model_repo, served, w, rounds, group, cores)
        out.placement = placement
        return out
    finally:
        # Back where it was: the container's cgroup goes when the container stops, which a
        # process still in it would prevent.
        if sshd_pid is not None and home is not None:
            join_cpu_group(home, sshd_pid)
        if sshd_pid is not None and sshd_cores is not None:
            os.sched_setaffinity(sshd_pid, sshd_cores)
        if engine_before:
            unbind(engine_before)


def _rounds(
    container: Any,
    base: str,
    spark_target: list[str],
    model_repo: str,
    served: str,
    w: Workload,
    rounds: int,
    group: Path,
    cores: frozenset[int] | None,
) -> Comparison:
    overhead = template_tokens(base, served)
    out = Comparison(w, overhead)
    argv = vllm_bench_argv(w, model_repo, served)
    if cores is not None:
        argv = ["taskset", "-c", cores_text(cores), *argv]
    for _ in range(rounds):
        put_prompts(container, build_prompts(base, served, w))
        start = server_counters(base)
        load_v = os.getloadavg()[0]
        v = run_vllm_bench(container, argv)
        between = server_counters(base)
        out.vllm.append(vllm_figures(v))
        load_s = os.getloadavg()[0]
        s = run_spark_bench(spark_target, w, group, cores)
        end = server_counters(base)
        out.loads.append((load_v, load_s))
        out.spark.append(spark_figures(s))
        # What the server saw of each run (spark-tui's count includes its warm-up request).
        server = {"vllm": _since(start, between), "spark": _since(between, end)}
        out.raw.append({"vllm": v, "spark": s, "server": server})
    return out
