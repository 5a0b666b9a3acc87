"""What sparkrun users type, in spark-tui's words: the setting shortcuts of `sparkrun run`
(`--tp 2`, `-o KEY=VALUE`, ...) as `--set`, the host lists of `--hosts-file` and of sparkrun's
saved groups as `--hosts`, and a hint to spark-tui's own word for a flag it does not take."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

# sparkrun's setting shortcuts (its spellings) and the recipe key each sets.
SHORTCUTS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("--tp", "--tensor-parallel"), "tensor_parallel", "N"),
    (("--pp", "--pipeline-parallel"), "pipeline_parallel", "N"),
    (("--dp", "--data-parallel"), "data_parallel", "N"),
    (("--gpu-mem", "--gpu-memory-utilization"), "gpu_memory_utilization", "X"),
    (("--max-model-len",), "max_model_len", "N"),
)
# The commands that take them (they change a recipe's settings).
SHORTCUT_COMMANDS = ("check", "plan", "launch", "tune")
# The commands that take `--on NODE,NODE` (they pick the nodes a launch runs on).
ON_COMMANDS = ("check", "plan", "launch", "tune")

# sparkrun's words for things spark-tui spells otherwise.
SPARKRUN_WORDS = {
    "--cluster": "--sparkrun-cluster NAME (a host group saved with sparkrun; `--cluster ID` "
    "of stop, smoke, bench, logs, watch and tune names one of spark-tui's own "
    "running clusters)",
    "-H": "--hosts H1,H2",
    "--image": "the recipe's `container:` (copy the recipe into your recipes folder, edit it)",
    "--dry-run": "`spark-tui plan RECIPE` (prints what launch would run, touches nothing)",
    "--solo": "--tp 1 with one host",
    "--foreground": "`spark-tui launch --wait`, then `spark-tui logs --follow`",
    "--no-follow": "`spark-tui launch` (it returns once every rank has started)",
    "--init-port": "--set master_port=N",
}


class SetShortcut(argparse.Action):
    """`--tp 2` appended to `--set` as `tensor_parallel=2`, in command-line order."""

    def __init__(self, *args: Any, setting: str, **kwargs: Any) -> None:
        self.setting = setting
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        sets = list(getattr(namespace, self.dest, None) or [])
        sets.append(f"{self.setting}={values}")
        setattr(namespace, self.dest, sets)


def add_shortcuts(p: argparse.ArgumentParser) -> None:
    """sparkrun's setting shortcuts, each a `--set` (give them after --set's own)."""
    for names, key, metavar in SHORTCUTS:
        p.add_argument(
            *names,
            dest="sets",
            action=SetShortcut,
            setting=key,
            metavar=metavar,
            help=f"--set {key}={metavar} (sparkrun's {names[0]})",
        )
    p.add_argument(
        "-o",
        "--option",
        dest="sets",
        action="append",
        metavar="KEY=VALUE",
        help="--set KEY=VALUE (sparkrun's -o)",
    )


def add_host_sources(group: Any) -> None:
    """`--hosts-file FILE` and `--sparkrun-cluster NAME`, beside --hosts (one of them)."""
    group.add_argument(
        "--hosts-file", metavar="FILE", help="hosts, one per line (`#` comments), head first"
    )
    group.add_argument(
        "--sparkrun-cluster",
        metavar="NAME",
        help="the hosts of a group saved with sparkrun (`sparkrun cluster create NAME`)",
    )


def resolve_host_sources(args: argparse.Namespace) -> None:
    """Turn --hosts-file / --sparkrun-cluster into the `--hosts` list (InputError when the
    file or group cannot be read)."""
    path = getattr(args, "hosts_file", None)
    group = getattr(args, "sparkrun_cluster", None)
    if not (path or group):
        return  # sparkrun_hosts loads the registries: not for a command that names none
    from spark_tui.core.sparkrun_hosts import hosts_file, sparkrun_group

    if path:
        args.hosts = ",".join(hosts_file(path))
    elif group:
        args.hosts = ",".join(sparkrun_group(group))


def flag_hint(token: str, command: str | None, options: Sequence[str]) -> str:
    """spark-tui's word for one argument it does not take (a sparkrun or vLLM spelling)."""
    name = token.split("=", 1)[0]
    if not name.startswith("-"):
        return f"{command or 'spark-tui'} takes no argument {token!r} here; see --help"
    if name in SPARKRUN_WORDS:
        return SPARKRUN_WORDS[name]
    if name == "--on":
        return (
            f"--on (the nodes a launch runs on) is taken by {', '.join(ON_COMMANDS)}; a "
            "cluster already running is named with --cluster ID (`spark-tui status` lists them)"
        )
    if name in ("-o", "--option") or any(name in names for names, _, _ in SHORTCUTS):
        return f"{name} (a --set) is taken by {', '.join(SHORTCUT_COMMANDS)}, not here"
    # Loaded here only: every command (the cockpit's first frame too) imports this module.
    import difflib

    from spark_tui.core import settings_schema as schema

    setting = schema.get(name.lstrip("-").replace("-", "_")) or schema.for_flag(name)
    if setting is not None and not setting.plan_managed:
        return f"--set {setting.key}=VALUE (a recipe setting, vLLM's {setting.flag})"
    flags = sorted({o for o in options if o.startswith("-")})
    close = difflib.get_close_matches(name, flags, n=2)
    if close:
        return f"did you mean {' or '.join(close)}? (see {command or 'spark-tui'} --help)"
    return f"see `spark-tui {command or ''} --help`".replace("  ", " ")
