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
