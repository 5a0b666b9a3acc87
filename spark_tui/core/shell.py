"""A launch plan as the commands a person would type on each node (the playbook's form).

Every value goes through `shlex.quote`; a secret is written as `"${NAME:-}"` so the
user's own shell fills it in and its value is never part of the text. This is also the
"repeatable launch" export: per node a `mkdir -p` of the caches and a `docker run`, and
at the end the `docker stop` / `docker rm` of every rank.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence

from spark_tui.core.plan import FALLBACK_HOME, REFERENCE, LaunchPlan, RankSpec
from spark_tui.core.wording import plural

INDENT = "  "


def _word(value: str) -> str:
    """One shell word: a `${NAME}` reference stays expandable, anything else is quoted."""
    m = REFERENCE.fullmatch(value)
    if m:
        name, default = m.group(1), m.group(2) or ""
        if _plain(default):
            # Double quotes: the user's shell expands the reference, never word-splits it.
            return f'"${{{name}:-{default}}}"'
    return shlex.quote(value)


def _plain(text: str) -> bool:
    """Whether a default value is safe inside double quotes without escaping."""
    return all(ch.isalnum() or ch in "._-/:" for ch in text)


def _env_arg(key: str, value: str) -> str:
    """`K=V` for `-e`: a reference is expanded by the user's shell, a value is quoted."""
    if REFERENCE.fullmatch(value):
        return f"{key}={_word(value)}"
    return shlex.quote(f"{key}={value}")


def _host_path(path: str, home: str | None) -> str:
    """A host path; with an unknown home, `$HOME` (expanded by the user's shell)."""
    if home is None and (path == FALLBACK_HOME or path.startswith(FALLBACK_HOME + "/")):
        rest = path[len(FALLBACK_HOME) :]
        return '"$HOME"' + (shlex.quote(rest) if rest else "")
    return shlex.quote(path)


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def argv_lines(argv: Sequence[str]) -> list[str]:
    """argv split into lines: the command words first, then one flag (with its values) each."""
    lines: list[list[str]] = [[]]
    for token in argv:
        if _is_flag(token) and lines[-1]:
            lines.append([])
        lines[-1].append(token)
    return [" ".join(_word(t) for t in line) for line in lines if line]


def _continued(lines: list[str]) -> str:
    """Lines joined with shell continuations."""
    return " \\\n".join(lines)


def docker_run_lines(rank: RankSpec, create: bool = False) -> list[str]:
    """The `docker run` (or `docker create`) of one rank, one option group per line."""
    c = rank.container
    d = c.docker
    out = ["docker create" if create else "docker run -d", f"{INDENT}--name {shlex.quote(c.name)}"]
    for key, value in c.labels.items():
        out.append(f"{INDENT}--label {shlex.quote(f'{key}={value}')}")
    opts = []
    if d.privileged:
        opts.append("--privileged")
    if d.gpus:
        opts.append(f"--gpus {shlex.quote(d.gpus)}")
    if d.ipc:
        opts.append(f"--ipc {shlex.quote(d.ipc)}")
    if d.network:
        opts.append(f"--network {shlex.quote(d.network)}")
    if opts:
        out.append(INDENT + " ".join(opts))
    if d.shm_size:
        out.append(f"{INDENT}--shm-size={shlex.quote(d.shm_size)}")
    for name, limit in d.ulimits.items():
        out.append(f"{INDENT}--ulimit {shlex.quote(f'{name}={limit}')}")
    for key, value in c.env.items():
        out.append(f"{INDENT}-e {_env_arg(key, value)}")
    for host, target in c.mounts.items():
        out.append(f"{INDENT}-v {_host_path(host, c.home)}:{shlex.quote(target)}")
    if c.entrypoint:
        out.append(f"{INDENT}--entrypoint {shlex.quote(c.entrypoint[0])}")
    out.append(f"{INDENT}{shlex.quote(c.image)}")
    command = list(c.entrypoint[1:] if c.entrypoint else []) + list(c.command)
    cmd_lines = argv_lines(command)
    if cmd_lines:
        out.append(INDENT + cmd_lines[0])
        out.extend(INDENT * 2 + line for line in cmd_lines[1:])
    return out


def _comment(text: str) -> str:
    """Text safe inside a `#` comment: a newline there would end it and run the rest."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _sed_escape(text: str, pattern: bool) -> str:
    specials = "\\.[]*^$|" if pattern else "\\&|"
    return "".join("\\" + ch if ch in specials else ch for ch in text)


def copy_lines(rank: RankSpec) -> list[str]:
    """Per copy: a comment naming its control-machine source, then a `tar | docker cp -` that
    puts it at its path in the created container (parent folders made by the copy)."""
    out = []
    name = shlex.quote(rank.container.name)
    labels = {s.source: s.mod for s in rank.prelaunch if s.kind == "copy"}
    for source, dest in rank.container.copies:
        what = f"mod {labels[source]}" if labels.get(source) else "pre_exec copy"
        rel = dest.strip("/")
        out.append(
            _comment(f"# {what}: {source} from the control machine (copy it to this node first)")
        )
        # `tar -C PARENT BASE` renamed to the destination works for a folder and a file.
        parent, base = posixpath.split(source.rstrip("/"))
        expr = f"s|^{_sed_escape(base, True)}|{_sed_escape(rel, False)}|"
        member = shlex.quote(base)
        out.append(
            f"tar -C {shlex.quote(parent or '/')} --transform {shlex.quote(expr)} -cf - {member}"
            f" | docker cp - {name}:/"
        )
    return out


def _mkdir(rank: RankSpec) -> str:
    c = rank.container
    return "mkdir -p " + " ".join(_host_path(host, c.home) for host in c.mounts)


def _role_text(rank: RankSpec) -> str:
    return rank.role.replace("-", " ")


def _function(name: str, body: list[str]) -> list[str]:
    """A shell function whose body is the given commands (continuations kept)."""
    out = [f"{name}() {{"]
    for command in body:
        out.extend(INDENT + line for line in command.split("\n"))
    out.append("}")
    return out


def plan_to_shell(plan: LaunchPlan) -> str:
    """The plan as a shell script: one section per node, then the stop section.

    Each section is a function named for its rank (`rank0`, `stop1`, ...): run the file
    with that name on the node the section names, or copy the section's commands into a
    shell there. Run with no argument, the script only prints its usage.
    """
    head = plan.head
    sections: list[str] = []
    lines = [
        "#!/usr/bin/env bash",
        f"# spark-tui launch plan: recipe {plan.recipe}, cluster {plan.cluster_id}, "
        f"{plural(len(plan.ranks), 'node')}, runtime {plan.runtime}",
        f"# settings hash {plan.settings_hash}; API on {head.node} port {plan.endpoint['port']}",
        "# Run each section on the node it names, head first: `bash THIS_FILE rank0` on "
        f"{head.node}, and so on;",
        "# or copy a section's commands into a shell on that node.",
        "# Secrets are read from that shell: export HF_TOKEN there first if the model needs it.",
    ]
    for note in plan.notes:
        lines.append(f"# note: {note}")
    lines.append("set -eu")
    for rank in plan.ranks:
        name = f"rank{rank.rank}"
        sections.append(name)
        lines.append("")
        lines.append(f"# --- rank {rank.rank} on {rank.node} ({_role_text(rank)}) ---")
        if rank.container.copies:
            # The mods must be in place before the container starts: create, copy, start.
            body = [_mkdir(rank), _continued(docker_run_lines(rank, create=True))]
            body += copy_lines(rank)
            body.append(f"docker start {shlex.quote(rank.container.name)}")
        else:
            body = [_mkdir(rank), _continued(docker_run_lines(rank))]
        if rank.mods:
            names = ", ".join(rank.mods)
            lines.append(
                _comment(f"# mods, run in the container before the serve command: {names}")
            )
        lines += _function(name, body)
    if plan.serve_exec:
        sections.append("serve")
        lines.append("")
        lines.append(f"# --- serve on {head.node} (ray head), once every Ray worker has joined ---")
        serve = argv_lines(plan.serve_exec)
        name = shlex.quote(head.container.name)
        exec_lines = [f"docker exec {name} {serve[0]}"]
        exec_lines += [INDENT + line for line in serve[1:]]
        # `ray status` lists each active node as `1 node_<id>`: wait for all of them.
        status = " ".join(
            shlex.quote(a)
            for a in ["ray", "status", "--address", str(plan.rendezvous.get("ray_address", ""))]
        )
        wait = (
            f'until [ "$(docker exec {name} {status} 2>/dev/null | grep -c " node_")" '
            f"-ge {len(plan.ranks)} ]; do sleep 2; done"
        )
        lines += _function("serve", [wait, _continued(exec_lines)])
    lines.append("")
    lines.append("# --- stop: on each node, stop and remove its rank ---")
    for rank in plan.ranks:
        name = f"stop{rank.rank}"
        sections.append(name)
        quoted = shlex.quote(rank.container.name)
        lines.append(f"# on {rank.node}:")
        lines += _function(name, [f"docker stop {quoted}", f"docker rm {quoted}"])
    lines.append("")
    lines.append('case "${1:-}" in')
    for name in sections:
        lines.append(f"{INDENT}{name}) {name} ;;")
    usage = "|".join(sections)
    lines.append(f'{INDENT}*) echo "usage: $0 {usage}" >&2; exit 2 ;;')
    lines.append("esac")
    return "\n".join(lines) + "\n"
