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


def data_parallel_refusals(args: ServeArgs, experts: int | None) -> list[Refusal]:
    """What vLLM refuses in a data-parallel command the launch plan completes.

    The plan runs every replica behind the head's API (internal load balancing: the
    replicas are headless and carry --data-parallel-start-rank, never a rank of their own).
    A recipe that asks for external or hybrid load balancing on top of that makes the head
    an external-LB rank: vLLM refuses it for a dense model (`experts` 0) and, with no
    --data-parallel-rank, for a MoE model too. `experts` None: not known, so said as a
    warning-worthy refusal of the dense case only.
    """
    if args.data_parallel_size <= 1:
        return []
    asked = [f"--{f}" for f in _LB_SWITCHES if args.has(f)]
    if not asked:
        return []
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
    return [Refusal(code, f"vLLM will stop at startup on the head: {words}", remedy)]
