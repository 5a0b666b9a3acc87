"""`vllm serve` simulated: the startup phases in vLLM's order and log format, the failures where
vLLM fails, the multi-node rendezvous, then the API (head) or the heartbeat (headless rank).

Phase durations at SPARK_SIM_PACE=1 (demo): config 1 s, engine init 1 s, distributed init 1 s,
weights 2 s + 0.15 s/GiB per rank, compile 3 s, profile 1 s, KV cache 0.5 s, CUDA graphs 2 s,
API 1 s: a demo launch is ready in 10-30 s; SPARK_SIM_PACE=0.02 makes it well under a second.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import signal
import socket
import sys
import threading
import time
from typing import Any

from spark_tui.sim.engine import SIMULATED_BANNER, VERSION, api, failures, link_traffic, ray_path
from spark_tui.sim.engine import memory as mem
from spark_tui.sim.engine.catalogue import GIB, ModelSpec, canonical_id, lookup
from spark_tui.sim.engine.failures import Failure
from spark_tui.sim.engine.flags import non_default_args
from spark_tui.sim.engine.logs import Channel, EngineLog, tqdm_bar, tqdm_line
from spark_tui.sim.engine.metrics import EngineMetrics
from spark_tui.sim.engine.rendezvous import (
    Head,
    JoinTimeout,
    Link,
    Member,
    PortInUse,
    Rejected,
    lost_peer,
)
from spark_tui.sim.engine.replicas import Balancer, MergedMetrics, MetricsText, RequestQueue
from spark_tui.sim.engine.scheduler import Scheduler
from spark_tui.sim.engine.settings import SimSettings
from spark_tui.sim.engine.timing import TimingModel

NCCL_VERSION = "2.27.7"
NCCL_VERSION_FULL = "2.27.7+cuda13.0"

BANNER = [
    "",
    "       █     █     █▄   ▄█",
    " ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}",
    "  █▄█▀ █     █     █     █  model   {model}",
    "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
    "",
]


class Interrupted(Exception):
    """Startup stopped by a signal or by a peer's failure."""


class Context:
    """Everything one simulated rank knows while it starts and serves."""

    def __init__(self, args: argparse.Namespace, settings: SimSettings) -> None:
        self.args = args
        self.st = settings
        self.env = dict(os.environ)
        self.pid = os.getpid()
        self.hostname = socket.gethostname()
        self.log = EngineLog()
        self.tp = args.tensor_parallel_size
        self.pp = args.pipeline_parallel_size
        self.world = self.tp * self.pp
        # Data parallelism: --data-parallel-rank (or --data-parallel-external-lb) means one API
        # server per replica (external load balancing, MoE models only); otherwise the head's
        # API balances over every replica and the others run --headless, their replica given
        # by --data-parallel-start-rank or inferred from --node-rank, as vLLM 0.32 does.
        self.dp = max(1, args.data_parallel_size)
        self.external_lb = args.data_parallel_rank is not None or bool(
            args.data_parallel_external_lb
        )
        nnodes = max(1, args.nnodes)
        local = args.data_parallel_size_local
        if local is None:
            if self.external_lb:
                local = 1
            elif nnodes > 1 and self.dp > 1:
                local = max(1, (self.world * self.dp // nnodes) // self.world)
            else:
                local = 1 if args.data_parallel_address else self.dp
        self.dp_local = max(1, local)
        self.dp_multi = self.dp > self.dp_local
        # Under data parallelism --nnodes and --node-rank count the whole deployment; one
        # replica spans nnodes // (dp // dp_local) of them (vLLM's nnodes_within_dp).
        self.nnodes = nnodes
        self.node_rank = args.node_rank
        if nnodes > 1 and self.dp > 1:
            self.nnodes = max(1, nnodes // max(1, self.dp // self.dp_local))
            self.node_rank = args.node_rank % self.nnodes
        inferred = (args.node_rank * (self.world * self.dp // nnodes)) // self.world
        if self.external_lb:
            self.dp_rank = (
                args.data_parallel_rank if args.data_parallel_rank is not None else inferred
            )
        elif args.data_parallel_start_rank is not None:
            self.dp_rank = args.data_parallel_start_rank
        else:
            self.dp_rank = inferred if nnodes > 1 else 0
        self.multi = self.nnodes > 1
        # Replicas that span nodes stay one torch world of TP x PP x DP ranks (a MoE model's,
        # as vLLM keeps them): every node meets at --master-addr by its deployment-wide rank.
        self.one_world = self.multi and self.dp > 1
        self.world_nodes = nnodes if self.one_world else self.nnodes
        self.world_rank = args.node_rank if self.one_world else self.node_rank
        self.headless = bool(args.headless) or (self.multi and self.node_rank > 0)
        # The leader of its replica's ranks (its torch rendezvous is at --master-addr).
        self.tp_leader = self.node_rank == 0
        self.local_world = max(1, self.world // self.nnodes)
        self.rank = self.node_rank * self.local_world
        self.tp_rank = self.rank % self.tp
        self.pp_rank = self.rank // self.tp
        self.ep = bool(args.enable_expert_parallel)
        # vLLM runs its multiproc executor (a Worker process per rank) whenever TP x PP x DP
        # is more than 1, a replica of one rank too.
        self.multiproc = self.world > 1 or self.dp > 1
        # The size of the DP group this rank's world holds (1 while it is not formed, and for a
        # dense model's replicas, which vLLM runs as independent DP 1 engines).
        self.dp_group = 1
        # The Ray executor: one Ray node per rank, this process drives them all.
        self.ray = ray_path.wanted(args) and self.world > 1 and args.nnodes <= 1
        self.ray_workers: ray_path.RayWorkers | None = None
        pid = self.pid
        dp_tag = f"_DP{self.dp_rank}" if self.dp > 1 else ""
        if self.headless:
            self.api: Channel | None = None
            self.engine: Channel | None = None
            # Under data parallelism real vLLM 0.32's headless nodes name their main process
            # (the lab's DP captures: "(MainProcess pid=1)"); a TP worker's capture has none.
            self.bare = self.log.channel(f"MainProcess pid={pid}" if self.dp > 1 else None)
        else:
            self.api = self.log.channel(f"APIServer pid={pid}")
            self.engine = self.log.channel(f"EngineCore{dp_tag} pid={pid}")
            self.bare = self.api
        # The engine core's own lines (a headless replica's too: its DP group leader).
        self.core = self.engine or self.log.channel(f"EngineCore{dp_tag} pid={pid}")
        self.worker: Channel | None = None
        if self.multiproc:
            self.worker = self.log.channel(f"Worker pid={pid}")
        elif self.headless:
            self.worker = self.log.channel(f"EngineCore{dp_tag} pid={pid}")
        self.stop = threading.Event()
        self.abort = threading.Event()
        self.abort_reason = ""
        self.abort_peer = ""
        self.abort_after_ready = False
        self.deaf = False  # SIGTERM/SIGINT do nothing while this is set (see _rendezvous)
        self.stop_ignored = False
        self.ready = False
        self.head: Head | None = None
        self.member: Member | None = None
        self.dp_head: Head | None = None
        self.dp_member: Member | None = None
        self.world_store: socket.socket | None = None  # a MoE DP world's port (DP head)
        self.server: api.SimHTTPServer | None = None
        self.state: api.ApiState | None = None
        self.scheduler: Scheduler | None = None
        # The engines this API server serves, by DP index (every replica's on a DP head).
        self.engines: dict[int, Scheduler] = {}

    # --- helpers --------------------------------------------------------------------------
    @property
    def runner(self) -> Channel:
        """The channel of the process that loads the model on this rank."""
        if self.worker is not None:
            return self.worker
        assert self.engine is not None
        return self.engine

    def pause(self, seconds: float, peers: bool = True) -> None:
        """Sleep `seconds` x pace, waking early (Interrupted) on a signal or, unless `peers` is
        False (work a rank does alone, outside any collective), a peer failure."""
        end = time.monotonic() + seconds * self.st.pace
        while True:
            if self.stop.is_set() or (peers and self.abort.is_set()):
                raise Interrupted()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def check(self) -> None:
        """Raise Interrupted if a signal or a peer failure arrived."""
        if self.stop.is_set() or self.abort.is_set():
            raise Interrupted()

    def bind_host(self) -> str:
        """Where this node's sockets listen."""
        return self.st.bind_address or self.args.host or "0.0.0.0"

    def worker_prefix(self) -> str:
        """`Worker_TP0`, `Worker_DP1_PP1_TP0`, `Worker_TP1_EP1` as vLLM names the rank's
        process."""
        parts = []
        if self.dp_group > 1:
            parts.append(f"DP{self.dp_rank}")
        if self.pp > 1:
            parts.append(f"PP{self.pp_rank}")
        if self.tp > 1:
            parts.append(f"TP{self.tp_rank}")
        if self.ep:
            # Its rank in the expert-parallel group: DP x TP ranks of its pipeline stage.
            parts.append(f"EP{(self.dp_rank if self.dp_group > 1 else 0) * self.tp + self.tp_rank}")
        return (
            "Worker_" + "_".join(parts) + f" pid={self.pid}" if parts else f"Worker pid={self.pid}"
        )

    def fingerprint(self) -> dict[str, Any]:
        """What every rank of one service must agree on."""
        a = self.args
        return {
            "model": canonical_id(a.model),
            "tensor_parallel_size": a.tensor_parallel_size,
            "pipeline_parallel_size": a.pipeline_parallel_size,
            "nnodes": self.world_nodes,
            "max_model_len": a.max_model_len,
            "kv_cache_dtype": a.kv_cache_dtype,
        }

    def on_lost(self, link: Link) -> None:
        """A peer vanished (EOF or silence)."""
        if self.abort.is_set() or self.stop.is_set():
            return
        self.abort_reason = "lost"
        self.abort_peer = link.peer_name
        self.abort_after_ready = self.ready
        self.abort.set()


# --- log helpers ------------------------------------------------------------------------------
def _engine_config_line(ctx: Context, spec: ModelSpec, lay: mem.Layout) -> str:
    a = ctx.args
    served = ",".join(a.served_model_name or [a.model])
    spec_cfg = "None"
    if a.speculative_config:
        spec_cfg = (
            f"SpeculativeConfig(method='{lay.spec_method}', model='{a.model}', "
            f"num_spec_tokens={lay.num_speculative_tokens})"
        )
    return (
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{a.model}', "
        f"speculative_config={spec_cfg}, tokenizer='{a.tokenizer or a.model}', "
        f"skip_tokenizer_init=False, tokenizer_mode={a.tokenizer_mode}, revision={a.revision}, "
        f"trust_remote_code={a.trust_remote_code}, dtype=torch.{_dtype(a, spec)}, "
        f"max_seq_len={lay.max_model_len}, download_dir={a.download_dir}, "
        f"load_format={a.load_format}, tensor_parallel_size={lay.tp}, "
        # A dense model's DP replicas are independent engines: vLLM prints each one's as 1.
        f"pipeline_parallel_size={lay.pp}, "
        f"data_parallel_size={lay.dp if spec.is_moe else 1}, "
        f"decode_context_parallel_size={a.decode_context_parallel_size}, "
        f"quantization={a.quantization or spec.quant_method}, enforce_eager={lay.enforce_eager}, "
        f"kv_cache_dtype={a.kv_cache_dtype}, device_config=cuda, "
        f"structured_outputs_config=StructuredOutputsConfig(backend='auto', "
        f"reasoning_parser='{a.reasoning_parser}', "
        f"reasoning_parser_plugin='{a.reasoning_parser_plugin}'), seed={a.seed}, "
        f"served_model_name={served}, enable_prefix_caching={_prefix_caching(a)}, "
        f"enable_chunked_prefill=True, pooler_config=None"
    )


def _dtype(args: argparse.Namespace, spec: ModelSpec) -> str:
    if args.dtype in ("auto", None):
        return spec.dtype
    return {"half": "float16", "float": "float32"}.get(str(args.dtype), str(args.dtype))


def _prefix_caching(args: argparse.Namespace) -> bool:
    return args.enable_prefix_caching is not False


def _served_names(args: argparse.Namespace) -> list[str]:
    return list(args.served_model_name or [args.model])


# --- phases -----------------------------------------------------------------------------------
def _config_phase(ctx: Context) -> ModelSpec:
    """Banner, args, model resolution and config validation (API server / worker main)."""
    a = ctx.args
    out = ctx.bare
    if not ctx.headless:
        for line in BANNER:
            out.info("api_utils.py:347", line.format(version=VERSION, model=a.model))
        out.info("api_utils.py:286", f"non-default args: {non_default_args(a)}")
    out.info(
        "simulated.py:1",
        f"{SIMULATED_BANNER}: memory, timing and text are simulated; "
        f"node memory {ctx.st.mem_total} B, page cache {ctx.st.page_cache} B",
    )
    if a.enable_auto_tool_choice and not a.tool_call_parser:
        raise Failure(
            "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
            failures.CLI_FRAMES,
            "config",
        )
    if not ctx.headless and a.chat_template:
        _load_chat_template(out, a.chat_template)
    if not ctx.headless:
        try:
            ctx.server = api.make_server(ctx.bind_host(), a.port)
        except OSError as exc:
            if exc.errno == 98 or "in use" in str(exc).lower():
                raise failures.port_in_use() from exc
            raise
    spec = lookup(a.model)
    ctx.pause(0.5)
    if spec is None or spec.draft_only:
        out.warning(
            "simulated.py:2", f"{a.model} is not in the spark-tui simulated model catalogue"
        )
        raise failures.unknown_model(a.model)
    token = (
        a.hf_token or ctx.env.get("HF_TOKEN") or ctx.env.get("HUGGING_FACE_HUB_TOKEN") or ""
    ).strip()
    offline = ctx.env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes")
    if spec.gated and not token and not offline:
        raise failures.gated_repo(spec.model_id)
    if offline and canonical_id(a.model) == a.model:
        out.info(
            "arg_utils.py:916",
            f"HF_HUB_OFFLINE is True, replace model_id [{a.model}] to model_path "
            f"[/root/.cache/huggingface/hub/models--{a.model.replace('/', '--')}/snapshots/"
            f"{hashlib.sha1(a.model.encode()).hexdigest()}]",
        )
    out.info("model.py:733", f"Resolved architecture: {spec.architecture}")
    max_len = (
        a.max_model_len if a.max_model_len and a.max_model_len > 0 else spec.max_position_embeddings
    )
    if (
        max_len > spec.max_position_embeddings
        and ctx.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1"
    ):
        raise failures.max_len_too_long(max_len, spec.max_position_embeddings)
    out.info("model.py:2152", f"Using max model len {max_len}")
    if ctx.dp > 1 and ctx.external_lb and not spec.is_moe:
        raise failures.external_dp_non_moe()
    if ctx.external_lb and a.data_parallel_rank is None and (a.nnodes <= 1 or ctx.dp <= 1):
        raise failures.external_dp_without_rank()
    if a.kv_cache_dtype.startswith("fp8"):
        kind = "fp8_e4m3" if a.kv_cache_dtype == "fp8" else a.kv_cache_dtype
        out.info(
            "cache.py:355",
            f"Using {kind} data type to store kv cache. It reduces the GPU "
            "memory footprint and boosts the performance. Meanwhile, it may cause accuracy "
            "drop without a proper scaling factor",
        )
    if a.nnodes > 1:
        out.info(
            "arg_utils.py:2472",
            f"Inferred data_parallel_rank {ctx.dp_rank} from node_rank {a.node_rank}",
        )
    spec_cfg = a.speculative_config or {}
    if spec_cfg.get("method") == "mtp":
        draft_arch = spec.architecture.replace("ForConditionalGeneration", "MTP")
        out.info(
            "model.py:733", f"Resolved architecture: {draft_arch.replace('ForCausalLM', 'MTP')}"
        )
        if int(spec_cfg.get("num_speculative_tokens") or 0) > 1:
            out.warning(
                "speculative.py:1381",
                "Enabling num_speculative_tokens > 1 will run "
                "multiple times of forward on same MTP layer,which may result in lower "
                "acceptance rate",
            )
    batched, seqs = mem.scheduler_sizes(a, max_len)
    if a.enable_chunked_prefill is not False:
        out.info(
            "scheduler.py:307",
            f"Chunked prefill is enabled with max_num_batched_tokens={batched}.",
        )
    if batched < seqs:
        raise failures.batched_below_seqs(batched, seqs)
    if spec.attention == "hybrid" and spec.linear_kind == "gated_deltanet" and _prefix_caching(a):
        out.info(
            "config.py:688",
            f"Mamba cache mode is set to '{a.mamba_cache_mode or 'align'}' "
            f"for {spec.architecture} by default when prefix caching is enabled",
        )
    if a.enforce_eager:
        out.warning(
            "vllm.py:1703",
            "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. "
            "This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none and "
            "--kernel_config.enable_jit_warmup=False",
        )
    if spec.num_attention_heads % ctx.tp != 0:
        raise failures.heads_not_divisible(spec.num_attention_heads, ctx.tp)
    local = -(-ctx.world // ctx.nnodes)
    if local > ctx.st.gpus_per_node and not ctx.ray:  # Ray places ranks on other nodes
        raise failures.world_exceeds_gpus(ctx.world, ctx.st.gpus_per_node)
    return spec


def _distributed_phase(ctx: Context, moe: bool) -> None:
    """Engine init, the rendezvous with the other ranks, NCCL, rank assignment."""
    a = ctx.args
    master = f"{a.master_addr}:{a.master_port}"
    # Replicas that span nodes count one world of every replica (TP x PP x DP ranks, each
    # offset by its replica), except a dense model's replica engine: vLLM runs it alone as a
    # DP 1 engine (reconfigure_for_independent_dp_rank), a world of TP x PP, while its
    # replica's other nodes (headless workers) still count every replica at the same
    # rendezvous. Those two never meet.
    alone = ctx.one_world and not moe and ctx.tp_leader
    # A MoE model's replicas that each fit their own node(s) form one world too, at the DP
    # head's address (vLLM's data_parallel_master_ip) on a port the DP head's first rank binds
    # when it gets there (an ephemeral one) and the others learn through the DP handshake.
    dp_world = moe and ctx.dp_multi and not ctx.one_world
    world, rank, dp_rank = ctx.world, ctx.rank, 0
    if (ctx.one_world and not alone) or dp_world:
        world, rank, dp_rank = ctx.world * ctx.dp, ctx.dp_rank * ctx.world + ctx.rank, ctx.dp_rank
        ctx.dp_group = ctx.dp
    if ctx.headless and ctx.tp_leader and ctx.dp > 1:
        ctx.bare.info(
            "serve.py:239",
            f"Launching {ctx.dp_local} data parallel engine(s) in headless mode, with head "
            f"node address tcp://{_dp_address(ctx)}:{a.data_parallel_rpc_port or 29550}.",
        )
    # Every replica's leader runs vLLM's multiproc executor under data parallelism (vLLM picks
    # it whenever TP x PP x DP > 1), which names the replica's group leader.
    if (ctx.multi or ctx.dp > 1) and ctx.tp_leader:
        ctx.core.info(
            "multiproc_executor.py:153",
            f"DP group leader: node_rank={0 if alone else a.node_rank}, "
            f"node_rank_within_dp=0, master_addr={a.master_addr}, mq_connect_ip="
            f"{_own_ip(ctx)} (local), world_size={ctx.world}, "
            f"local_world_size={ctx.local_world}",
        )
    if ctx.headless and not ctx.tp_leader:
        ctx.bare.info(
            "serve.py:224",
            f"Launching vLLM (v{VERSION}) headless multiproc executor, "
            f"with head node address {master} for torch.distributed process group.",
        )
    ctx.pause(1.0)
    runner = ctx.runner
    if ctx.multi:
        init = f"tcp://{master}"
    elif dp_world and ctx.dp_rank > 0:
        # The other replicas wait for the DP head to publish its port (vLLM's coordination
        # store, reached through the DP handshake) before they log their world.
        init = f"tcp://{_dp_address(ctx)}:{int(_dp_rendezvous(ctx)['world_port'])}"
    elif dp_world:
        init = f"tcp://{_dp_address(ctx)}:{_dp_world_port(ctx)}"
    else:
        init = f"tcp://{_own_ip(ctx)}:{29500 + (ctx.pid % 30000)}"
    # nccl where the real captures (vLLM's CPU build) say gloo: the backend is the platform's
    # (CpuPlatform.dist_backend "gloo", CudaPlatform's "nccl"), and the stand-in is a GPU node.
    runner.info(
        "parallel_state.py:1906",
        f"world_size={world} rank={rank} local_rank=0 distributed_init_method={init} backend=nccl",
    )
    if dp_world and ctx.dp_rank == 0:
        # The DP head's first rank logs its world once it bound the port, then waits there
        # for every replica.
        _dp_rendezvous(ctx, {"world_port": _dp_world_port(ctx)})
    if ctx.one_world and not moe:
        _never_meet(ctx)
    if ctx.multi:
        _rendezvous(ctx)
    if ctx.ray:
        _ray_phase(ctx)
    # Past the rendezvous each rank goes on alone until its weights are loaded (see _load_phase).
    ctx.pause(0.5, peers=not ctx.multi)
    if ctx.world > 1:
        runner.info("pynccl.py:148", f"vLLM is using nccl=={NCCL_VERSION}")
        _nccl_debug(ctx)
        runner.warning(
            "symm_mem.py:67",
            "SymmMemCommunicator: Device capability 12.1 not "
            "supported, communicator is not available.",
        )
        if ctx.multi:
            runner.warning(
                "custom_all_reduce.py:235",
                "Custom collectives are disabled because "
                "this multi-node group does not have MNNVL-capable GPUs on every rank.",
            )
        runner.info(
            "cuda_communicator.py:296",
            "Using ['PYNCCL'] all-reduce backends (in "
            "dispatch order) for group 'tp:0' out of potential backends: "
            "['FLASHINFER', 'NCCL_SYMM_MEM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].",
        )
    # vLLM makes an expert-parallel group for every MoE model (with or without
    # --enable-expert-parallel): its DP x TP ranks of one pipeline stage, by DP rank then TP.
    ep = f"EP rank {dp_rank * ctx.tp + ctx.tp_rank}" if moe else "EP rank N/A"
    runner.info(
        "parallel_state.py:2350",
        f"rank {rank} in world size {world} is assigned "
        f"as DP rank {dp_rank}, PP rank {ctx.pp_rank}, PCP rank 0, TP rank {ctx.tp_rank}, "
        f"ETP rank {ctx.tp_rank}, {ep}, "
        "EPLB rank N/A",
    )
    if ctx.worker is not None:
        ctx.worker.prefix = ctx.worker_prefix()


def _dp_address(ctx: Context) -> str:
    """The DP head's address (vLLM's data_parallel_master_ip)."""
    return ctx.args.data_parallel_address or ctx.args.master_addr


def _dp_world_port(ctx: Context) -> int:
    """The port of the DP world's store, bound on the DP head on first use (kept open, as
    vLLM's TCPStore is, so no other process takes it while the engines run)."""
    if ctx.world_store is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((ctx.st.bind_address or "0.0.0.0", 0))
        sock.listen(8)
        ctx.world_store = sock
    return int(ctx.world_store.getsockname()[1])


def _never_meet(ctx: Context) -> None:
    """Wait at a rendezvous whose ranks expect worlds of different sizes, as real vLLM's
    ranks do: no error and no progress (torch's own timeout is far past any launch's wait)
    until the rank is stopped. The head's API process waits deaf to SIGTERM/SIGINT, as in
    `_rendezvous`; the headless nodes stop on it."""
    ctx.deaf = not ctx.headless
    try:
        while True:
            ctx.pause(1.0)
    finally:
        ctx.deaf = False


def _ray_phase(ctx: Context) -> None:
    """Join the real Ray cluster, place a worker on each node and watch them."""
    assert ctx.engine is not None
    workers = ray_path.RayWorkers(ctx.world)
    ctx.ray_workers = workers
    address = workers.connect()
    ctx.engine.info("worker.py:1810", f"Connecting to existing Ray cluster at address: {address}.")
    workers.place()
    for rank, (pid, ip) in enumerate(workers.placed):
        ch = ctx.log.channel(f"EngineCore_DP0 pid={ctx.pid}) (RayWorkerWrapper pid={pid}, ip={ip}")
        ch.info("worker_base.py:246", f"Ray worker rank {rank} placed on node {ip}")

    def lost(rank: int) -> None:
        if ctx.abort.is_set() or ctx.stop.is_set():
            return
        ctx.abort_reason = "ray_lost"
        ctx.abort_peer = str(rank)
        ctx.abort_after_ready = ctx.ready
        ctx.abort.set()

    workers.watch(lost)
    if ctx.worker is not None:
        pid, ip = workers.placed[0]
        ctx.worker.prefix = f"EngineCore_DP0 pid={ctx.pid}) (RayWorkerWrapper pid={pid}, ip={ip}"


def _ray_lost(ctx: Context) -> int:
    """A Ray worker (or its node) is gone: vLLM's Ray executor lines, then exit 1."""
    assert ctx.engine is not None and ctx.api is not None
    for channel, source, message in ray_path.lost_lines(int(ctx.abort_peer or 0)):
        if channel == "raylet":
            ctx.log.channel(f"EngineCore_DP0 pid={ctx.pid}) (raylet").raw(message, stderr=True)
        elif channel == "engine":
            ctx.engine.error(source, message)
        else:
            ctx.api.raw(message, stderr=True)
    if ctx.state is not None:
        ctx.state.dead_reason = "EngineCore encountered an issue. See stack trace (above)."
    if ctx.ray_workers is not None:
        ctx.ray_workers.stop()
    _close(ctx)
    return 1


def _own_ip(ctx: Context) -> str:
    if ctx.st.bind_address:
        return ctx.st.bind_address
    try:
        return socket.gethostbyname(ctx.hostname)
    except OSError:
        return "127.0.0.1"


def _nccl_debug(ctx: Context) -> None:
    """NCCL INFO lines (only with NCCL_DEBUG=INFO), showing this node's own interfaces."""
    if ctx.env.get("NCCL_DEBUG", "").upper() != "INFO":
        return
    ifname = ctx.env.get("NCCL_SOCKET_IFNAME", "eth0")
    hcas = [h for h in ctx.env.get("NCCL_IB_HCA", "").split(",") if h]
    ip = _own_ip(ctx)
    lead = f"{ctx.hostname}:{ctx.pid}:{ctx.pid} [0] NCCL INFO"
    lines = []
    if "NCCL_SOCKET_IFNAME" in ctx.env:
        lines.append(f"{lead} NCCL_SOCKET_IFNAME set by environment to {ifname}")
    lines.append(f"{lead} Bootstrap: Using {ifname}:{ip}<0>")
    lines.append(f"{lead} cudaDriverVersion 13000")
    lines.append(f"{lead} NCCL version {NCCL_VERSION_FULL}")
    if "NCCL_IB_DISABLE" in ctx.env:
        lines.append(f"{lead} NCCL_IB_DISABLE set by environment to {ctx.env['NCCL_IB_DISABLE']}.")
    if hcas:
        lines.append(f"{lead} NCCL_IB_HCA set to {','.join(hcas)}")
        devs = " ".join(f"[{i}]{h}:1/RoCE" for i, h in enumerate(hcas))
        lines.append(f"{lead} NET/IB : Using {devs} [RO]; OOB {ifname}:{ip}<0>")
    else:
        lines.append(f"{lead} NET/Socket : Using [0]{ifname}:{ip}<0>")
    ctx.runner.raw("\n".join(lines))


def _listening_head(
    ctx: Context, port: int, expected: list[int], fingerprint: dict[str, Any]
) -> Head:
    """The head's end of a rendezvous, listening on `port` for the `expected` ranks."""
    head = Head(
        ctx.st.bind_address or "0.0.0.0",
        port,
        expected,
        fingerprint,
        ctx.st.heartbeat_timeout_s,
        ctx.on_lost,
    )
    try:
        head.listen()
    except PortInUse as exc:
        raise failures.store_port_in_use() from exc
    return head


def _rendezvous(ctx: Context) -> None:
    a = ctx.args
    timeout = ctx.st.rendezvous_timeout_s
    if ctx.world_rank == 0:
        expected = list(range(1, ctx.world_nodes))
        head = ctx.head = _listening_head(ctx, a.master_port, expected, ctx.fingerprint())
        # Real vLLM's head waits in gloo's init for its workers and SIGTERM/SIGINT do not
        # reach it there: only SIGKILL ends it (a container stop waits its whole timeout).
        ctx.deaf = True
        try:
            head.wait_all(float("inf") if ctx.st.head_waits_forever else timeout, lambda: False)
        except JoinTimeout as exc:
            raise failures.clients_timeout(timeout, exc.joined, ctx.world_nodes) from exc
        finally:
            ctx.deaf = False
        ctx.check()
        head.broadcast({"type": "start"})
        return
    member = Member(
        a.master_addr,
        a.master_port,
        ctx.world_rank,
        ctx.fingerprint(),
        ctx.hostname,
        ctx.st.bind_address,
        ctx.st.heartbeat_timeout_s,
        ctx.on_lost,
    )
    ctx.member = member

    def on_retry(attempt: int) -> None:
        # c10d warns on the first refused connect and then now and again while retrying.
        if attempt == 1 or attempt % 10 == 0:
            ctx.bare.raw(failures.client_retry_warning(a.master_addr, a.master_port), stderr=True)

    try:
        member.join(timeout, on_retry, lambda: ctx.stop.is_set())
    except JoinTimeout as exc:
        ctx.check()
        raise failures.client_timeout(timeout, a.master_addr, a.master_port) from exc
    except Rejected as exc:
        raise Failure(
            f"RuntimeError: The head node at {a.master_addr}:{a.master_port} rejected rank "
            f"{ctx.world_rank}: {exc}. Every rank must run the same model and parallel layout.",
            failures.DIST_FRAMES,
            "engine",
            log_source="multiproc_executor.py:761",
        ) from exc
    _wait_for(ctx, "start")


def _dp_rendezvous(ctx: Context, start: dict[str, Any] | None = None) -> dict[str, Any]:
    """Data-parallel ranks on several nodes meet at --data-parallel-address:rpc-port; the DP
    head sends `start` to the others when all are there. Returns the start message."""
    a = ctx.args
    addr = a.data_parallel_address or a.master_addr
    port = a.data_parallel_rpc_port or 29550
    timeout = ctx.st.rendezvous_timeout_s
    fingerprint = {
        "model": canonical_id(a.model),
        "tensor_parallel_size": ctx.tp,
        "pipeline_parallel_size": ctx.pp,
        "data_parallel_size": ctx.dp,
    }
    if ctx.dp_rank == 0:
        expected = list(range(ctx.dp_local, ctx.dp, ctx.dp_local))
        # The head's API process starts vLLM's DP coordinator, which the engines join.
        coordinator_pid = ctx.pid + 1
        ctx.bare.info("utils.py:1245", f"Started DP Coordinator process (PID: {coordinator_pid})")
        head = ctx.dp_head = _listening_head(ctx, port, expected, fingerprint)
        try:
            head.wait_all(timeout, lambda: ctx.stop.is_set())
        except JoinTimeout as exc:
            raise failures.clients_timeout(timeout, exc.joined, len(expected) + 1) from exc
        ctx.check()
        message = {"type": "start", **(start or {})}
        head.broadcast(message)
        ctx.log.channel(f"VLLM_DP_Coordinator pid={coordinator_pid}").info(
            "coordinator.py:258", "All engine subscriptions received by DP coordinator"
        )
        return message
    member = Member(
        addr,
        port,
        ctx.dp_rank,
        fingerprint,
        ctx.hostname,
        ctx.st.bind_address,
        ctx.st.heartbeat_timeout_s,
        ctx.on_lost,
    )
    ctx.dp_member = member
    try:
        member.join(timeout, lambda attempt: None, lambda: ctx.stop.is_set())
    except JoinTimeout as exc:
        ctx.check()
        raise failures.client_timeout(timeout, addr, port) from exc
    except Rejected as exc:
        raise Failure(
            f"RuntimeError: The data parallel coordinator at {addr}:{port} rejected DP rank "
            f"{ctx.dp_rank}: {exc}.",
            failures.DIST_FRAMES,
            "engine",
            log_source="multiproc_executor.py:761",
        ) from exc
    return _wait_for(ctx, "start", member)


def _replicas_ready(ctx: Context) -> None:
    """The replicas' engines meet before the API serves: a dense model's only now (at the DP
    coordinator); a MoE model's met already as one world, and its DP head waits for every
    other replica's engine to be ready."""
    if ctx.dp_member is not None:
        ctx.dp_member.send({"type": "ready"})
    elif ctx.dp_head is not None:
        _gather(ctx, "ready", ctx.dp_head)
    else:
        _dp_rendezvous(ctx)


def _wait_for(ctx: Context, kind: str, member: Member | None = None) -> dict[str, Any]:
    """Wait for a message from the head (rank side); aborts raise Interrupted."""
    member = member or ctx.member
    assert member is not None
    while True:
        ctx.check()
        try:
            msg = member.inbox.get(timeout=0.05)
        except queue.Empty:
            continue
        if msg.get("type") == kind:
            return msg
        if msg.get("type") in ("abort", "shutdown"):
            ctx.abort_reason = str(msg.get("type"))
            ctx.abort.set()
            raise Interrupted()


def _gather(ctx: Context, kind: str, head: Head | None = None) -> list[dict[str, Any]]:
    """Wait for `kind` from every other rank of `head` (the torch rendezvous's by default);
    a rank failure raises Interrupted."""
    head = head or ctx.head
    assert head is not None
    got: dict[int, dict[str, Any]] = {}
    while len(got) < len(head.expected):
        ctx.check()
        try:
            msg = head.inbox.get(timeout=0.05)
        except queue.Empty:
            continue
        if msg.get("type") == kind:
            got[int(msg["_rank"])] = msg
        elif msg.get("type") == "failed":
            ctx.abort_reason = "failed"
            ctx.abort_peer = f"rank {msg.get('_rank')}"
            ctx.abort.set()
            raise Interrupted()
    return list(got.values())


def _load_phase(
    ctx: Context, spec: ModelSpec, lay: mem.Layout, node: mem.NodeView
) -> mem.MemoryPlan:
    """Memory check, weights loading with progress, as every rank does on its own node."""
    a = ctx.args
    runner = ctx.runner
    plan = mem.plan_memory(spec, lay, node)
    if node.free < plan.requested:
        raise failures.free_memory(
            mem.format_gib(node.free),
            mem.format_gib(node.total),
            lay.util,
            mem.format_gib(plan.requested),
        )
    runner.info("gpu_model_runner.py:5039", f"Starting to load model {a.model}...")
    backend = a.attention_backend or ("FLASHMLA" if spec.attention == "mla" else "FLASH_ATTN")
    runner.info("cuda.py:318", f"Using AttentionBackendEnum.{backend.upper()} backend.")
    if spec.is_moe:
        moe = (a.moe_backend or "auto").upper()
        moe = "FLASHINFER_CUTLASS" if moe == "AUTO" else moe
        runner.info(
            "fused_moe.py:304",
            f"Using '{moe}' MoE backend out of potential backends: "
            "['FLASHINFER_TRTLLM', 'FLASHINFER_CUTLASS', 'TRITON', 'MARLIN'].",
        )
    if spec.ple_bytes:
        where = "on disk (VLLM_PLE_TABLE_MEMORY=disk)" if lay.ple_on_disk else "in GPU memory"
        runner.info(
            "ple.py:88",
            f"Per-layer embedding table ({mem.format_gib(spec.ple_bytes)} GiB) is kept {where}.",
        )
    ckpt = mem.format_gib(spec.weight_bytes)
    ram = f"{ctx.st.mem_available / GIB:.2f}"
    runner.info(
        "weight_utils.py:1108",
        f"Filesystem type for checkpoints: EXT4. Checkpoint size: "
        f"{float(ckpt):.2f} GiB. Available RAM: {ram} GiB.",
    )
    shards = max(1, spec.num_shards)
    load_s = 2.0 + 0.15 * plan.weights / GIB
    desc = "Loading safetensors checkpoint shards"
    start = time.monotonic()
    runner.raw(tqdm_line(desc, 0, shards, 0.0), stderr=True)
    for i in range(1, shards + 1):
        # Each rank reads its own shards with no collective in between, so a peer that fails
        # meanwhile is noticed only afterwards: a rank that cannot hold its weights reports its
        # own out-of-memory error whichever rank failed first.
        ctx.pause(load_s / shards, peers=False)
        loaded = plan.weights * i / shards
        if loaded + mem.CUDA_CONTEXT_BYTES > node.free:
            free_mib = max(
                0.0, (node.free - mem.CUDA_CONTEXT_BYTES - plan.weights * (i - 1) / shards) / 2**20
            )
            raise failures.cuda_oom(
                plan.weights / shards / GIB,
                node.total / GIB,
                free_mib,
                (node.total - free_mib * 2**20) / GIB,
            )
        runner.raw(tqdm_line(desc, i, shards, time.monotonic() - start), stderr=True)
    runner.raw("", stderr=True)
    ctx.check()
    took = time.monotonic() - start
    runner.info("default_loader.py:501", f"Loading weights took {took:.2f} seconds")
    runner.info(
        "gpu_model_runner.py:5149",
        f"Model loading took {mem.format_gib(plan.weights)} GiB "
        f"memory and {took + 0.4 * ctx.st.pace:.6f} seconds",
    )
    return plan


def _profile_phase(ctx: Context, spec: ModelSpec, lay: mem.Layout, plan: mem.MemoryPlan) -> None:
    runner = ctx.runner
    if not lay.enforce_eager:
        digest = hashlib.sha1(f"{spec.model_id}{lay.tp}{lay.max_model_len}".encode()).hexdigest()[
            :10
        ]
        runner.info(
            "backends.py:1104",
            f"Using cache directory: /root/.cache/vllm/torch_compile_"
            f"cache/{digest}/rank_{ctx.rank}_0/backbone for vLLM's torch.compile",
        )
        t0 = time.monotonic()
        ctx.pause(1.0)
        runner.info(
            "backends.py:1166", f"Dynamo bytecode transform time: {time.monotonic() - t0:.2f} s"
        )
        t1 = time.monotonic()
        ctx.pause(2.0)
        runner.info(
            "backends.py:398",
            f"Compiling a graph for compile range (1, "
            f"{lay.max_num_batched_tokens}) takes {time.monotonic() - t1:.2f} s",
        )
        runner.info("monitor.py:53", f"torch.compile took {time.monotonic() - t0:.2f} s in total")
    t2 = time.monotonic()
    ctx.pause(1.0)
    runner.info("monitor.py:91", f"Initial profiling/warmup run took {time.monotonic() - t2:.2f} s")
    if not lay.enforce_eager:
        runner.info(
            "gpu_model_runner.py:6474",
            f"Estimated CUDA graph memory: {plan.cudagraph / GIB:.2f} GiB total",
        )
    ctx.pause(0.5)
    runner.info(
        "gpu_worker.py:759", f"Available KV cache memory: {mem.format_gib(plan.kv_bytes)} GiB"
    )
    if plan.kv_bytes <= 0:
        raise failures.no_cache_blocks()
    if lay.kv_cache_memory_bytes is None:
        runner.info(
            "gpu_worker.py:774",
            "CUDA graph memory profiling is enabled (default since "
            f"v0.21.0). The current --gpu-memory-utilization={lay.util:.4f} is equivalent to "
            f"--gpu-memory-utilization={max(0.0, lay.util - plan.cudagraph / plan.total):.4f} "
            "without CUDA graph memory profiling. To maintain the same effective KV cache "
            f"size as before, increase --gpu-memory-utilization to "
            f"{min(1.0, lay.util + plan.cudagraph / plan.total):.4f}. To disable, set "
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
        )


def _kv_check(ctx: Context, spec: ModelSpec, lay: mem.Layout, kv_bytes: int) -> mem.MemoryPlan:
    """The engine core's KV check over the smallest rank's cache (head / single node)."""
    node = mem.NodeView(total=0, free=0)
    plan = mem.plan_memory(spec, lay, node)
    plan.kv_bytes = kv_bytes
    if plan.kv_per_token:
        plan.kv_tokens = kv_bytes // plan.kv_per_token // lay.block * lay.block
    plan.max_concurrency = kv_bytes / plan.request_bytes if plan.request_bytes else 0.0
    if plan.request_bytes > kv_bytes:
        est = mem.max_model_len_for(spec, lay.tp, lay.kv_dtype_bytes, kv_bytes, lay.block)
        raise failures.max_seq_len(
            lay.max_model_len, mem.format_gib(plan.request_bytes), mem.format_gib(kv_bytes), est
        )
    assert ctx.engine is not None
    # One line since vLLM 0.32 (0.28 printed the size and the concurrency apart).
    ctx.engine.info(
        "kv_cache_utils.py:2327",
        f"GPU KV cache size: {plan.kv_tokens:,} tokens, Maximum concurrency for "
        f"{lay.max_model_len:,} tokens per request: {plan.max_concurrency:.2f}x",
    )
    return plan


def _graphs_phase(ctx: Context, lay: mem.Layout, plan: mem.MemoryPlan) -> None:
    runner = ctx.runner
    if lay.enforce_eager:
        return
    start = time.monotonic()
    for desc, total in (
        ("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51),
        ("Capturing CUDA graphs (decode, FULL)", 35),
    ):
        t0 = time.monotonic()
        runner.raw(tqdm_bar(desc, 0, total, 0.0), stderr=True)
        steps = 5
        for k in range(1, steps + 1):
            ctx.pause(1.0 / steps)
            done = total * k // steps
            runner.raw(tqdm_bar(desc, done, total, time.monotonic() - t0), stderr=True)
    runner.info(
        "gpu_model_runner.py:6581",
        f"Graph capturing finished in "
        f"{max(1, int(round(time.monotonic() - start)))} secs, took "
        f"{plan.cudagraph / GIB:.2f} GiB",
    )


def _api_phase(ctx: Context, spec: ModelSpec, lay: mem.Layout, plan: mem.MemoryPlan) -> None:
    """Scheduler, metrics and the HTTP server; ready."""
    a = ctx.args
    assert ctx.api is not None and ctx.server is not None
    names = _served_names(a)
    model = TimingModel(
        weight_bytes_rank=float(plan.weights),
        expert_fraction=spec.expert_fraction,
        experts_total=spec.experts_total,
        experts_active=spec.experts_active,
        params_active_rank=spec.params_active / ctx.world,
        kv_bytes_per_token=float(plan.kv_per_token),
        hidden_size=spec.hidden_size,
        layers=spec.num_hidden_layers,
        tp=lay.tp,
        num_speculative_tokens=lay.num_speculative_tokens if lay.spec_method else 0,
        scale=ctx.st.token_scale,
    )
    # An internally load-balanced DP head's API serves every replica's engine: one scheduler
    # (and one set of counters, engine="N") per replica, requests to the least loaded.
    engines = [ctx.dp_rank] if ctx.external_lb else list(range(ctx.dp))
    for index in engines:
        metrics = EngineMetrics(
            names[0],
            str(index),
            lay.max_model_len,
            {
                "block_size": str(lay.block),
                "cache_dtype": a.kv_cache_dtype,
                "enable_prefix_caching": str(_prefix_caching(a)),
                "gpu_memory_utilization": str(lay.util),
                "num_gpu_blocks": str(max(1, plan.kv_tokens // lay.block)),
            },
            num_speculative_tokens=lay.num_speculative_tokens if lay.spec_method else 0,
        )
        sched = Scheduler(
            model,
            lay.max_num_seqs,
            lay.max_num_batched_tokens,
            plan.kv_tokens,
            lay.block,
            _prefix_caching(a),
            metrics,
        )
        sched.start()
        ctx.engines[index] = sched
    ctx.scheduler = ctx.engines[engines[0]]
    if len(engines) > 1:
        queue_: RequestQueue = Balancer(list(ctx.engines.values()))
        text: MetricsText = MergedMetrics([e.metrics for e in ctx.engines.values()])
    else:
        queue_, text = ctx.scheduler, ctx.scheduler.metrics
    state = api.ApiState(spec, a, names, lay.max_model_len, queue_, text, ctx.api)
    ctx.state = state
    api.bind_handler(state)
    ctx.api.info("entry.py:136", "Supported tasks: ['generate']")
    if a.enable_auto_tool_choice and a.tool_call_parser:
        ctx.api.info("parser_manager.py:38", '"auto" tool choice has been enabled.')
    ctx.pause(0.5)
    ctx.api.warning(
        "model.py:1893",
        "Default vLLM sampling parameters have been overridden by "
        "the model's `generation_config.json`: `{'temperature': 1.0, 'top_k': 20, "
        "'top_p': 0.95}`. If this is not intended, please relaunch vLLM instance with "
        "`--generation-config vllm`.",
    )
    host, port = ctx.server.server_address[:2]
    url = f"http://{host!s}:{port}"
    ctx.api.info("entry.py:140", f"Starting vLLM server on {url}")
    ctx.api.info("launcher.py:186", "Available routes are:")
    for route, methods in api.ROUTES:
        ctx.api.info("launcher.py:195", f"Route: {route}, Methods: {methods}")
    ctx.pause(0.5)
    ctx.api.uvicorn(f"Started server process [{ctx.pid}]")
    ctx.api.uvicorn("Waiting for application startup.")
    ctx.api.uvicorn("Application startup complete.")
    # uvicorn says so before its socket listens: /health answers a moment after the line.
    if ctx.stop.wait(ctx.st.listen_after_s):
        raise Interrupted()
    if ctx.st.engine_dead_health_ok:  # scenario: the engine core is gone, /health still 200
        state.dead_reason = (
            "EngineCore encountered an issue. See stack trace (above) for the root cause."
        )
        state.health_despite_dead = True
    state.ready = True
    ctx.ready = True
    ctx.api.uvicorn(f"Uvicorn running on {url} (Press CTRL+C to quit)")


# --- serving ----------------------------------------------------------------------------------
def _api_servers(ctx: Context) -> int:
    """How many API processes vLLM starts here: --api-server-count, else one per replica
    under internal load balancing (vLLM's default), else one."""
    count = ctx.args.api_server_count
    if count is not None:
        return int(count)
    return ctx.dp if (ctx.dp > 1 and not ctx.external_lb) else 1


def _logs_stats(ctx: Context) -> bool:
    """vLLM turns its periodic stats lines off when several API processes share engines."""
    if _api_servers(ctx) <= 1:
        return True
    assert ctx.api is not None
    ctx.api.warning(
        "loggers.py:1386",
        "AsyncLLM created with api_server_count more than 1; disabling stats logging to "
        "avoid incomplete stats.",
    )
    return False


def _stats_loop(ctx: Context) -> None:
    """The periodic `Engine 000: Avg prompt throughput` line of every engine this API
    serves (only while that engine has activity), as vLLM's per-engine stat loggers."""
    assert ctx.api is not None
    interval = ctx.st.stats_interval_s
    was_active = dict.fromkeys(ctx.engines, False)
    last = time.monotonic()
    while not ctx.stop.wait(interval):
        if ctx.abort.is_set():
            return
        now = time.monotonic()
        span = max(1e-6, now - last)
        last = now
        for index, sched in ctx.engines.items():
            was_active[index] = _engine_stats(ctx, index, sched, span, was_active[index])


def _engine_stats(
    ctx: Context, index: int, sched: Scheduler, span: float, was_active: bool
) -> bool:
    """One engine's stats lines for the interval; whether it was active."""
    assert ctx.api is not None
    prompt, gen, drafted, accepted = sched.take_interval()
    snap = sched.snapshot()
    active = bool(prompt or gen or snap["running"] or snap["waiting"])
    if not active and not was_active:
        return False
    m = sched.metrics
    with m.lock:
        hit = 100.0 * m.prefix_hits / m.prefix_queries if m.prefix_queries else 0.0
    ctx.api.info(
        "loggers.py:310",
        f"Engine {index:03d}: Avg prompt throughput: "
        f"{prompt / span:.1f} "
        f"tokens/s, Avg generation throughput: {gen / span:.1f} tokens/s, Running: "
        f"{int(snap['running'])} reqs, Waiting: {int(snap['waiting'])} reqs, GPU KV "
        f"cache usage: {100 * snap['kv_usage']:.1f}%, Prefix cache hit rate: {hit:.1f}%",
    )
    if drafted:
        k = sched.timing.num_speculative_tokens or 1
        drafts = drafted / k
        ctx.api.info(
            "metrics.py:120",
            f"SpecDecoding metrics: Mean acceptance length: "
            f"{1 + accepted / max(1.0, drafts):.2f}, Accepted throughput: "
            f"{accepted / span:.2f} tokens/s, Drafted throughput: {drafted / span:.2f} "
            f"tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, Avg "
            f"Draft acceptance rate: {100.0 * accepted / drafted:.1f}%",
        )
    return active


def _engine_tokens(ctx: Context) -> int:
    """Every prompt and generated token this API's engines processed so far."""
    total = 0
    for sched in ctx.engines.values():
        m = sched.metrics
        with m.lock:
            total += m.prompt_tokens + m.generation_tokens
    return total


def _start_link_traffic(ctx: Context) -> None:
    """The simulated link traffic of a multi-rank engine (see `link_traffic`)."""
    path = ctx.st.link_file
    spec = lookup(ctx.args.model)
    if not path or ctx.scheduler is None or ctx.world <= 1 or spec is None:
        return
    per_token = link_traffic.bytes_per_token(
        spec.hidden_size, spec.num_hidden_layers, ctx.tp, ctx.pp
    )
    threading.Thread(
        target=link_traffic.link_loop,
        args=(path, lambda: _engine_tokens(ctx), per_token, ctx.stop, 0.25),
        daemon=True,
    ).start()


def _serve_until_done(ctx: Context) -> int:
    """Run until a signal, a peer's loss, or the die-after-ready scenario. Returns the exit code."""
    die_at = None
    if ctx.st.die_after_ready_s is not None:
        die_at = time.monotonic() + ctx.st.die_after_ready_s
    if ctx.scheduler is not None and _logs_stats(ctx):
        threading.Thread(target=_stats_loop, args=(ctx,), daemon=True).start()
    _start_link_traffic(ctx)
    if ctx.head is not None and ctx.state is not None and (ctx.args.data_parallel_size or 1) == 1:
        head = ctx.head
        ctx.state.lost_peer = lambda: lost_peer(head)
    while True:
        if ctx.stop.is_set():
            return _shutdown(ctx)
        if ctx.abort.is_set() and _keeps_serving(ctx):
            # Real vLLM's head does not notice a lost worker until a request needs it.
            st = ctx.state
            assert st is not None
            with st.lock:
                if st.engine_broken is None:
                    st.engine_broken = ctx.abort_peer or "a worker"
                failed_request = st.broken_request
            if not failed_request:
                time.sleep(0.05)
                continue
            return _peer_failure(ctx)
        if ctx.abort.is_set():
            return _peer_failure(ctx)
        if die_at is not None and time.monotonic() >= die_at:
            ctx.log.write(
                f"[spark-tui simulated node failure] rank {ctx.rank} exits now "
                f"(SPARK_SIM_DIE_AFTER_READY_S={ctx.st.die_after_ready_s:g})\n",
                stderr=True,
            )
            os._exit(137)
        if ctx.st.die_when_path is not None and os.path.exists(ctx.st.die_when_path):
            ctx.log.write(
                f"[spark-tui simulated node failure] rank {ctx.rank} exits now "
                f"(SPARK_SIM_DIE_WHEN_PATH={ctx.st.die_when_path} exists)\n",
                stderr=True,
            )
            os._exit(137)
        got_shutdown = False
        for member in (ctx.member, ctx.dp_member):
            if member is None:
                continue
            try:
                while True:
                    if member.inbox.get_nowait().get("type") == "shutdown":
                        got_shutdown = True
            except queue.Empty:
                pass
        if got_shutdown:
            ctx.runner.info(
                "multiproc_executor.py:588",
                "The head node shut down the service; stopping this rank.",
            )
            _close(ctx)
            return 0
        time.sleep(0.05)


def _keeps_serving(ctx: Context) -> bool:
    """A head whose worker was lost after ready keeps its API up (as real vLLM 0.32 does)."""
    return (
        not ctx.headless
        and ctx.state is not None
        and ctx.abort_reason == "lost"
        and ctx.abort_after_ready
        and (ctx.args.data_parallel_size or 1) == 1
    )


def _shutdown(ctx: Context) -> int:
    """Graceful stop on SIGTERM/SIGINT."""
    for head in (ctx.head, ctx.dp_head):
        if head is not None:
            head.broadcast({"type": "shutdown"})
    if ctx.state is not None:
        ctx.state.ready = False
    if ctx.api is not None and ctx.ready:
        ctx.api.uvicorn("Shutting down")
        ctx.api.uvicorn("Waiting for application shutdown.")
        ctx.api.uvicorn("Application shutdown complete.")
        ctx.api.uvicorn(f"Finished server process [{ctx.pid}]")
    _close(ctx)
    return 0


def _close(ctx: Context) -> None:
    if ctx.ray_workers is not None:
        ctx.ray_workers.stop()
    for sched in ctx.engines.values():
        sched.stop()
    if ctx.server is not None:
        try:
            ctx.server.shutdown()
            ctx.server.server_close()
        except OSError:
            pass
    for head in (ctx.head, ctx.dp_head):
        if head is not None:
            head.close()
    for member in (ctx.member, ctx.dp_member):
        if member is not None:
            member.close()
    if ctx.world_store is not None:
        ctx.world_store.close()


def _peer_failure(ctx: Context) -> int:
    """A peer disappeared, failed or aborted: log as vLLM/NCCL do and exit non-zero."""
    runner = ctx.runner
    if ctx.abort_reason == "ray_lost":
        return _ray_lost(ctx)
    if ctx.abort_reason == "lost" and ctx.abort_after_ready:
        lines = failures.peer_lost_lines(ctx.rank, ctx.world, ctx.abort_peer, NCCL_VERSION_FULL)
        runner.raw("\n".join(lines), stderr=True)
    if ctx.headless:
        if ctx.abort_reason == "abort":
            runner.error(
                "multiproc_executor.py:761",
                "The head node aborted the startup; shutting down this headless rank.",
            )
        else:
            exc = (
                "RuntimeError: NCCL error: remote process exited or there was a network error, "
                f"NCCL version {NCCL_VERSION_FULL}"
            )
            if not ctx.abort_after_ready:
                runner.raw(
                    f"[rank{ctx.rank}]:[E] ProcessGroupNCCL: connection to the head node "
                    f"{ctx.abort_peer} closed during startup",
                    stderr=True,
                )
            runner.raw(
                "\n".join(
                    failures.traceback_lines(
                        failures.WORKER_START[:1]
                        + [
                            (
                                f"{failures.SITE}/vllm/v1/executor/multiproc_executor.py",
                                811,
                                "worker_busy_loop",
                                "output = func(*args, **kwargs)",
                            ),
                        ],
                        exc,
                    )
                ),
                stderr=True,
            )
        _close(ctx)
        return 1
    assert ctx.engine is not None and ctx.api is not None
    who = ctx.abort_peer or "a worker"
    if ctx.abort_after_ready:
        ctx.engine.error(
            "multiproc_executor.py:270",
            f"Worker proc VllmWorker-{_peer_rank(who)} "
            f"({who}) died unexpectedly, shutting down executor.",
        )
        ctx.engine.error("core.py:1512", "EngineCore encountered a fatal error.")
        if ctx.state is not None:
            ctx.state.dead_reason = (
                "EngineCore encountered an issue. See stack trace (above) for the root cause."
            )
        ctx.api.error("async_llm.py:906", "AsyncLLM output_handler failed.")
        ctx.api.raw(
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
            stderr=True,
        )
        time.sleep(min(1.0, 0.5 + ctx.st.pace))
        ctx.api.uvicorn("Shutting down")
        ctx.api.uvicorn("Waiting for application shutdown.")
        ctx.api.uvicorn("Application shutdown complete.")
        ctx.api.uvicorn(f"Finished server process [{ctx.pid}]")
    else:
        ctx.engine.error(
            "multiproc_executor.py:270",
            f"Worker proc VllmWorker-{_peer_rank(who)} "
            f"({who}) died unexpectedly, shutting down executor.",
        )
        failures.report_engine_failure(
            Failure(
                "Exception: WorkerProc initialization failed due to an exception in a "
                "background process. See stack trace for root cause.",
                [],
                "engine",
            ),
            ctx.engine,
            ctx.api,
            None,
        )
    _close(ctx)
    return 1


def _peer_rank(who: str) -> str:
    digits = "".join(ch for ch in who.split("<")[0] if ch.isdigit())
    return digits[-1:] if who.startswith("rank") and digits else "1"


def _fail(ctx: Context, failure: Failure) -> int:
    """Print a failure where vLLM prints it, tell the other ranks, exit with its code."""
    if failure.stage == "config":
        failures.report_config_failure(failure, ctx.bare)
    elif ctx.headless:
        assert ctx.worker is not None
        # A headless replica's leader runs an engine core of its own; a TP/PP worker node
        # only its workers.
        engine = ctx.core if ctx.dp > 1 and ctx.tp_leader else ctx.worker
        failures.report_engine_failure(failure, engine, None, ctx.worker)
    else:
        assert ctx.engine is not None
        failures.report_engine_failure(
            failure, ctx.engine, ctx.api, ctx.worker if ctx.multiproc else None
        )
    for member in (ctx.member, ctx.dp_member):
        if member is not None:
            member.send({"type": "failed", "error": failure.exc_line.split("\n")[0]})
            time.sleep(0.05)
    for head in (ctx.head, ctx.dp_head):
        if head is not None:
            head.broadcast({"type": "abort", "reason": failure.exc_line.split("\n")[0]})
        time.sleep(0.05)
    _close(ctx)
    return failure.exit_code


def _install_signals(ctx: Context) -> None:
    def handler(signum: int, _frame: Any) -> None:
        if ctx.deaf:
            ctx.stop_ignored = True
            return
        ctx.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _end_with_owner(pid: int, period: float = 1.0, grace: float = 10.0) -> None:
    """Stop this rank once the simulated node's process is gone (killed without closing its
    nodes): as `docker stop` would, then for good after `grace` s."""
    while _owner_alive(pid):
        time.sleep(period)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    os._exit(137)


def _load_chat_template(out: Channel, template: str) -> None:
    """Read `--chat-template` as vLLM does: a file when it can be opened, else literal
    template text when it looks like one, else a startup error."""
    try:
        with open(template, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        if any(ch in template for ch in "{}\n"):
            return
        raise failures.chat_template_unreadable(template, str(exc)) from None
    out.info("chat_utils.py:1480", f"Using supplied chat template: {template} ({len(text)} chars)")


def run(args: argparse.Namespace) -> int:
    """Start one simulated rank of `vllm serve` and run it; returns the exit code."""
    ctx = Context(args, SimSettings.from_env())
    _install_signals(ctx)
    if ctx.st.owner_pid is not None:
        threading.Thread(
            target=_end_with_owner, args=(ctx.st.owner_pid,), name="owner", daemon=True
        ).start()
    ctx.log.write(
        f"INFO {time.strftime('%m-%d %H:%M:%S')} [__init__.py:216] Automatically detected platform cuda.\n"
    )
    try:
        spec = _config_phase(ctx)
        lay = mem.layout_from_args(args, spec, ctx.env)
        node = mem.NodeView.from_settings(ctx.st)
        if ctx.engine is not None:
            ctx.pause(0.5)
            ctx.engine.info("core.py:133", _engine_config_line(ctx, spec, lay))
        _distributed_phase(ctx, spec.is_moe)
        plan = _load_phase(ctx, spec, lay, node)
        _profile_phase(ctx, spec, lay, plan)
        if ctx.member is not None:
            ctx.member.send({"type": "loaded", "kv_bytes": plan.kv_bytes})
            kv = int(_wait_for(ctx, "kv")["kv_bytes"])
            _graphs_phase(ctx, lay, plan)
            _wait_for(ctx, "ready")
            if ctx.tp_leader and ctx.dp_multi:
                # Another replica's leader in the head's world: its engine joins the DP group.
                _dp_rendezvous(ctx)
        else:
            kv = plan.kv_bytes
            if ctx.head is not None:
                kv = min([kv] + [int(m["kv_bytes"]) for m in _gather(ctx, "loaded")])
            if not ctx.headless:
                plan = _kv_check(ctx, spec, lay, kv)
            if ctx.head is not None:
                ctx.head.broadcast({"type": "kv", "kv_bytes": kv})
            _graphs_phase(ctx, lay, plan)
            if ctx.engine is not None:
                ctx.engine.info(
                    "core.py:402",
                    "init engine (profile, create kv cache, warmup "
                    f"model) took {3.5 * ctx.st.pace:.2f} s",
                )
            if ctx.head is not None:
                ctx.head.broadcast({"type": "ready"})
            if ctx.dp_multi:
                _replicas_ready(ctx)
            if not ctx.headless:
                _api_phase(ctx, spec, lay, plan)
        ctx.ready = True
        return _serve_until_done(ctx)
    except Failure as failure:
        return _fail(ctx, failure)
    except Interrupted:
        if ctx.stop.is_set():
            _close(ctx)
            return 0
        return _peer_failure(ctx)
    except KeyboardInterrupt:
        _close(ctx)
        return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m spark_tui.sim.engine ARGS`."""
    from spark_tui.sim.engine import flags

    args = flags.parse(sys.argv[1:] if argv is None else argv)
    if args.subparser != "serve":
        sys.stderr.write(
            f"vllm {args.subparser}: not available in the spark-tui simulated "
            "engine (only `vllm serve` is simulated)\n"
        )
        return 2
    return run(args)
