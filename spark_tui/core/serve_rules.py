"""Settings that depend on each other, and the refusals vLLM's own argument checks make.

`vllm serve --enable-auto-tool-choice` without `--tool-call-parser` stops every rank at
startup ("Error: --enable-auto-tool-choice requires --tool-call-parser"). The overrides
remove such a pair together; the fit check names what vLLM will refuse before a launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_tui.core.serve_args import ServeArgs


@dataclass(frozen=True)
class Dependency:
    """`setting` works only while `needs` is set: vLLM refuses the first without the second."""

    setting: str
    needs: str
    vllm_error: str
    example: str


DEPENDENCIES: tuple[Dependency, ...] = (
    Dependency(
        setting="enable_auto_tool_choice",
        needs="tool_call_parser",
        # vllm/entrypoints/launchers/cli_args.py validate_parsed_serve_args (vLLM 0.32)
        vllm_error="Error: --enable-auto-tool-choice requires --tool-call-parser",
        example="hermes",
    ),
)


def batched_below_seqs(batched: int, seqs: int) -> str:
    """vLLM 0.32's words (vllm/config/scheduler.py, SchedulerConfig.verify_max_model_len)
    for a step's token budget below its sequence count."""
    return (
        f"max_num_batched_tokens ({batched}) must be greater than or equal to "
        f"max_num_seqs ({seqs})."
    )


@dataclass(frozen=True)
class Refusal:
    """A command vLLM will refuse at startup: its own words and what to change."""

    code: str
    message: str
    remedy: str


def refusals(args: ServeArgs) -> list[Refusal]:
    """What vLLM's argument validation will refuse in this command, before any rank starts."""
    out: list[Refusal] = []
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        dep = DEPENDENCIES[0]
        out.append(
            Refusal(
                "tool_choice_without_parser",
                f"vLLM will stop at startup on every rank: {dep.vllm_error}",
                f"name the model's parser (--set {dep.needs}={dep.example}, or the parser "
                "the model card gives), or turn tool calling off with "
                f"--set {dep.setting}=false",
            )
        )
    batched, seqs = args.max_num_batched_tokens, args.max_num_seqs
    # Only two sizes the command gives: vLLM lowers a max_num_seqs it defaults to the token
    # budget given (engine/arg_utils.py), and a defaulted budget depends on the device.
    if batched is not None and seqs is not None and batched < seqs:
        out.append(
            Refusal(
                "batched_tokens_below_seqs",
                "vLLM will stop at startup on every rank: " + batched_below_seqs(batched, seqs),
                f"--set max_num_batched_tokens={seqs} (at least max_num_seqs), or "
                f"--set max_num_seqs={batched} (at most max_num_batched_tokens)",
            )
        )
    if args.has("enable-log-outputs") and not args.has("enable-log-requests"):
        out.append(
            Refusal(
                "log_outputs_without_requests",
                "vLLM will stop at startup on every rank: "
                "Error: --enable-log-outputs requires --enable-log-requests",
                "add --enable-log-requests to the command, or drop --enable-log-outputs",
            )
        )
    return out


# vLLM 0.32's words (vllm/engine/arg_utils.py, create_engine_config) for an externally
# load-balanced data-parallel rank of a dense model, and for one with no rank of its own.
NON_MOE_EXTERNAL_DP = (
    "ValueError: Non-MoE models do not support external data parallel mode. For external "
    "load balancing, launch independent vLLM instances without --data-parallel-* arguments."
)
EXTERNAL_DP_WITHOUT_RANK = (
    "ValueError: Invalid data-parallel launch options: `--data-parallel-external-lb` "
    "requires a data-parallel rank. Set `--data-parallel-rank`, or set "
    "`--data-parallel-size` greater than 1 and use `--nnodes` with `--node-rank` so the "
    "rank can be inferred."
)
_LB_SWITCHES = ("data-parallel-external-lb", "data-parallel-hybrid-lb")
# What the CPU build of vLLM 0.32 stops on at a MoE model's first request under data
# parallelism (vllm/distributed/device_communicators/base_device_communicator.py: the CPU
# communicator does not implement all_gatherv, which the MoE layers' allgather-reducescatter
# exchange between data-parallel ranks calls). Seen on the lab's real vLLM with the tiny
# Qwen3-MoE, DP 2 over two nodes, in the one-API form and in the per-node form alike.
CPU_MOE_DP_CRASH = (
    "NotImplementedError (base_device_communicator.py all_gatherv), then "
    "\"RuntimeError: Worker failed with error '', please check the stack trace above for the "
    'root cause"'
)


def data_parallel_refusals(
    args: ServeArgs, experts: int | None, *, cpu: bool = False
) -> list[Refusal]:
    """What vLLM refuses in a data-parallel command the launch plan completes.

    The plan runs every replica behind the head's API (internal load balancing: the
    replicas are headless and carry --data-parallel-start-rank, never a rank of their own).
    A recipe that asks for external or hybrid load balancing on top of that makes the head
    an external-LB rank: vLLM refuses it for a dense model (`experts` 0) and, with no
    --data-parallel-rank, for a MoE model too. `experts` None: not known, so said as a
    warning-worthy refusal of the dense case only. `cpu`: the command runs on vLLM's CPU
    build, which cannot run a MoE model's replicas at all.
    """
    if args.data_parallel_size <= 1:
        return []
    out = _spanning_dense_replicas(args, experts)
    if cpu and experts != 0:
        out.append(_cpu_moe_replicas(args, experts))
    asked = [f"--{f}" for f in _LB_SWITCHES if args.has(f)]
    if not asked:
        return out
    remedy = (
        f"drop {' and '.join(asked)} from the recipe's command: spark-tui runs data "
        "parallelism with one API server on the head balancing over every replica, which "
        "vLLM runs for dense and MoE models alike"
    )
    if experts:
        words = EXTERNAL_DP_WITHOUT_RANK
    elif experts == 0:
        words = NON_MOE_EXTERNAL_DP
    else:
        words = f"{NON_MOE_EXTERNAL_DP} (if the model is dense; a MoE model: {EXTERNAL_DP_WITHOUT_RANK})"
    code = "external_data_parallel"
    return [*out, Refusal(code, f"vLLM will stop at startup on the head: {words}", remedy)]


def _cpu_moe_replicas(args: ServeArgs, experts: int | None) -> Refusal:
    """A MoE model data parallel on vLLM's CPU build: the replicas start and answer /health,
    then the first request stops every engine (the MoE layers exchange tokens between the
    data-parallel ranks with a collective the CPU build lacks)."""
    tp, pp, dp = args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size
    moe = "the model is MoE" if experts else "if the model is MoE"
    return Refusal(
        "cpu_moe_data_parallel",
        f"vLLM's CPU build will stop at the first request ({moe}): a MoE model's "
        f"data-parallel replicas exchange every MoE layer's tokens, and the CPU build's "
        f"communicator cannot ({CPU_MOE_DP_CRASH}); the replicas reach ready first",
        cpu_moe_dp_remedy(tp, pp, dp),
    )


def cpu_moe_dp_remedy(tp: int, pp: int, dp: int) -> str:
    """What serves a MoE model on vLLM's CPU build in place of `dp` data-parallel replicas of
    TP `tp` x PP `pp`: one replica over the same nodes."""
    pipeline = f" --set pipeline_parallel={pp}" if pp > 1 else ""
    return (
        f"run one replica over the nodes (--set data_parallel=1 --set "
        f"tensor_parallel={tp * dp}{pipeline}), or a GPU build of vLLM (on the Sparks)"
    )


def _spanning_dense_replicas(args: ServeArgs, experts: int | None) -> list[Refusal]:
    """A dense model's data-parallel replica that spans nodes (TP x PP > 1, one GPU a
    Spark): vLLM 0.32 runs the replica's engine as an independent DP 1 engine
    (`reconfigure_for_independent_dp_rank` in v1/engine/core.py), whose workers form a world
    of TP x PP; the replica's other nodes run headless workers that skip that step and join
    a world of TP x PP x DP at the same rendezvous, so the ranks never meet and the launch
    hangs without an error (seen on the lab's real vLLM 0.32 with TP 2 x DP 2: the head's
    workers `world_size=2`, the next node's `world_size=4`). A MoE model keeps every replica
    in one world, so it is not refused here; `experts` None: not known."""
    tp, pp, dp = args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size
    if experts or tp * pp <= 1:
        return []
    dense = "the model is dense" if experts == 0 else "if the model is dense"
    return [
        Refusal(
            "dense_replicas_across_nodes",
            f"vLLM will hang at startup ({dense}): TP {tp} x PP {pp} x DP {dp} makes each "
            f"data-parallel replica span {tp * pp} nodes; {dense_replicas_hang(tp, pp, dp)}",
            dense_replicas_remedy(tp, pp, dp),
        )
    ]


def dense_replicas_hang(tp: int, pp: int, dp: int) -> str:
    """Why vLLM never forms a dense model's `dp` replicas of TP `tp` x PP `pp` that span
    nodes (each node one GPU)."""
    return (
        f"vLLM runs a dense model's replica as an independent engine of {tp * pp} ranks, "
        f"but the replica's other nodes wait for a world of {tp * pp * dp} ranks, so the "
        "replica never forms"
    )


def dense_replicas_remedy(tp: int, pp: int, dp: int) -> str:
    """What serves a dense model in place of `dp` replicas of TP `tp` x PP `pp` that span
    nodes: a replica per node, or one replica over the nodes."""
    return (
        f"run a replica per node (--set tensor_parallel=1 --set pipeline_parallel=1 "
        f"--set data_parallel={tp * pp * dp}), or one replica over the nodes "
        "(--set data_parallel=1)"
    )
