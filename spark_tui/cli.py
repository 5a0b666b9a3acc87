"""The headless CLI. Each subcommand lives in `spark_tui.commands.<name>` and is imported
only when used, so `plan` and `check` never import Textual, asyncssh or the Docker SDK; its
arguments are in a module of `spark_tui.commands.arguments`, also imported only when used."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from spark_tui.commands.shortcuts import add_host_sources, flag_hint, resolve_host_sources
from spark_tui.core.errors import NoClusterError, SparkError


class Parser(argparse.ArgumentParser):
    """The CLI's parser; `commands` maps each subcommand to its own parser."""

    commands: dict[str, argparse.ArgumentParser]

    def __init__(self, *args: Any, **kw: Any) -> None:
        # No abbreviations: the top level would read `demo --host` as its own `--hosts`
        # (or refuse it as ambiguous), and a shortened flag is one a user never meant.
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)


def build_parser(command: str | None = None) -> Parser:
    """The whole CLI's parser, or with `command` only that subcommand's under the top level
    (`main` runs one: building the twenty others costs a headless `plan` more than its own
    arguments)."""
    parser = Parser(
        prog="spark-tui",
        description="Run one vLLM service across several DGX Sparks.",
    )
    parser.add_argument("--demo", action="store_true", help="open the cockpit on simulated Sparks")
    parser.add_argument(
        "--inventory", metavar="FILE", help="inventory YAML: nodes: [{name, host, ...}]"
    )
    parser.add_argument("--hosts", metavar="H1,H2", help="comma-separated SSH hosts, head first")
    add_host_sources(parser)
    parser.add_argument("--recipe", metavar="NAME", help="the recipe selected at start")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see the command palette)")
    parser.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust host keys not yet in known_hosts (changed keys are still refused)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, kind in SUBCOMMANDS.items():
        if command in (None, name):
            arguments = importlib.import_module(f"spark_tui.commands.arguments.{kind}")
            getattr(arguments, name)(sub)
    parser.commands = dict(sub.choices)
    return parser


# Each subcommand and what adds its parser to the subparsers (argparse's private
# _SubParsersAction, hence Any), in the order of `--help`.
# Each subcommand, in the order `--help` lists them, and the module of spark_tui.commands.arguments
# that adds its arguments (a function named for it).
SUBCOMMANDS: dict[str, str] = {
    "demo": "simulated",
    "sim": "simulated",
    "recipes": "nodes",
    "probe": "nodes",
    "check": "nodes",
    "plan": "nodes",
    "models": "nodes",
    "images": "nodes",
    "launch": "cluster",
    "status": "cluster",
    "watch": "cluster",
    "logs": "cluster",
    "stop": "cluster",
    "smoke": "cluster",
    "bench": "measure",
    "tune": "measure",
    "history": "measure",
    "lab": "lab",
}


def _refuse_unknown(parser: Parser, command: str | None, unknown: list[str]) -> int:
    """Usage, then what was not understood and spark-tui's word for it (exit 2, as argparse)."""
    own = parser.commands.get(command or "", parser)
    usage = own.format_usage()
    options = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", own.format_help())
    flags = [t for t in unknown if t.startswith("-")] or unknown
    sys.stderr.write(usage)
    for token in flags:
        where = f"`{command}`" if command else "spark-tui"
        print(f"spark-tui: {where} does not take {token}", file=sys.stderr)
        print(f"  remedy: {flag_hint(token, command, options)}", file=sys.stderr)
    return 2


def _node_flags(args: argparse.Namespace) -> str:
    """The user's own node arguments, as typed (`--inventory FILE` when none were)."""
    from spark_tui.commands.terminal import targets

    return targets(args).as_flags(live=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A first argument that names a subcommand is that subcommand for argparse too (the top
    # level takes no other positional).
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return _refuse_unknown(parser, args.command, unknown)
    name = args.command or "cockpit"
    args.argv = argv  # what the user typed: a command that says how to go on repeats it
    try:
        resolve_host_sources(args)
        if any(getattr(args, k, None) for k in ("inventory", "hosts", "facts")):
            # (Imported only here: the demo's first frame loads no more than it needs.)
            from spark_tui.commands.terminal import name_nodes

            name_nodes(args)
        module = importlib.import_module(f"spark_tui.commands.{name}")
        return int(module.run(args))
    except SparkError as exc:
        from spark_tui.commands.terminal import err

        if isinstance(exc, NoClusterError):
            # Raised where the nodes are a pool: the remedy names them as the user did.
            exc = exc.for_nodes(_node_flags(args))
        err(f"spark-tui: {exc.message}")
        err(f"  remedy: {exc.remedy}")
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl+C, or SIGTERM/SIGHUP (commands.interrupts)
        print("spark-tui: interrupted", file=sys.stderr)
        return int(getattr(exc, "exit_code", 130))
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
