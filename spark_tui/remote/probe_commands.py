"""The exact commands a probe sends to a node.

Shared by the probe (which parses their output) and the simulated nodes (which answer
them as a GB10 would). Every command is a fixed string: no user value is ever put in.
"""

from __future__ import annotations

import re
import shlex

# Read with shell builtins, not `hostname`, `uname -m` and `cat`: what those print, without
# their processes (a node's probe pays for each; a lab of many nodes shares a few cores).
# The kernel's own files: /proc/sys/kernel/hostname is what `hostname` prints (of the UTS
# namespace), /proc/sys/kernel/arch is `uname -m` (older kernels lack it: uname then).
HOSTNAME = 'sh -c \'read -r h </proc/sys/kernel/hostname && printf "%s\\n" "$h"\''
HOME = "sh -c 'echo \"$HOME\"'"
ARCH = (
    'sh -c \'read -r a 2>/dev/null </proc/sys/kernel/arch || a=$(uname -m) && printf "%s\\n" "$a"\''
)
# The table alone: it names the GPU, the driver and CUDA (the query below has no CUDA). Only
# a name too long for the table's column ends in "...": the probe then asks the query too.
NVIDIA_SMI = "nvidia-smi"
NVIDIA_SMI_QUERY = (
    "nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader"
)
MEMINFO = 'sh -c \'while IFS= read -r l; do printf "%s\\n" "$l"; done </proc/meminfo\''
IBDEV2NETDEV = "ibdev2netdev"
IP_ADDR_JSON = "ip -j addr"
# Neighbours (ARP/NDP) of every interface (a simulated node answers it as a GB10 does).
IP_NEIGH_JSON = "ip -j neigh"
# Both in one `ip` process: its batch mode prints each command's JSON array on its own line.
# The here-document is no process either (the shell writes a short one into a pipe itself).
IP_JSON = "sh -c 'ip -j -batch - <<EOF\naddr\nneigh\nEOF'"
# Link speeds of every netdev, one "name speed" line each ("-1" or empty when unknown).
# `read`, not `$(cat ...)`: shell builtins only, no process per interface.
NET_SPEEDS = (
    'sh -c \'for d in /sys/class/net/*; do sp=; read -r sp <"$d/speed" 2>/dev/null; '
    'printf "%s %s\\n" "${d##*/}" "$sp"; done\''
)
# Free bytes where the Hugging Face cache lives (its parent when it does not exist yet).
DISK_FREE = (
    'sh -c \'d="${HF_HOME:-$HOME/.cache/huggingface}"; [ -d "$d" ] || d="$HOME"; df -B1 "$d"\''
)
# Every snapshot of every cached model, in two processes however many models there are
# (a busy node pays per process): a `--- snapshot PATH` line for each, then one `find` line
# `SIZE PATH` per complete file of all of them (a link to a missing blob is not listed), then
# one `head` of every snapshot's config.json and safetensors index (`==> PATH <==` before
# each; a long index is cut after its metadata). The loop over the snapshots moves each one
# out of "$@" and appends its files that exist, so "$@" ends up holding just those files.
# Before the heads, one awk reads each whole index for the modules its tensors belong to
# (`--- module PATH model.audio_tower`, once each): a cut index would not say whether the
# checkpoint holds an encoder its config.json describes, which its weight in memory depends on.
_INDEX_MODULES = (
    'FILENAME ~ /index[.]json$/ { n = split($0, p, ","); for (i = 1; i <= n; i++) '
    'if (match(p[i], /"[^".]+[.][^".]+[.]/)) { m = substr(p[i], RSTART + 1, RLENGTH - 2); '
    'k = FILENAME " " m; if (!(k in seen)) { seen[k] = 1; print "--- module " k } } }'
)
HF_CACHE_SCAN = "sh -c " + shlex.quote(
    'hub="${HF_HOME:-$HOME/.cache/huggingface}/hub"; set --; '
    'for s in "$hub"/models--*/snapshots/*; do [ -d "$s" ] && set -- "$@" "$s"; done; '
    '[ $# -gt 0 ] || exit 0; printf -- "--- snapshot %s\\n" "$@"; '
    'find -L "$@" -type f -printf "%s %p\\n" 2>/dev/null; '
    "for s; do shift; for f in config.json model.safetensors.index.json; do "
    '[ -f "$s/$f" ] && set -- "$@" "$s/$f"; done; done; '
    f'[ $# -eq 0 ] || awk {shlex.quote(_INDEX_MODULES)} "$@"; '
    '[ $# -eq 0 ] || head -v -c 65536 -- "$@"; exit 0'
)

# The node's DOCKER_HOST (empty when unset): where its Docker socket is, when not the default.
DOCKER_HOST_ENV = "sh -c 'echo \"$DOCKER_HOST\"'"

# The commands a simulated node answers itself (the rest run in its simulated home).
SIMULATED = (
    HOSTNAME,
    HOME,
    ARCH,
    NVIDIA_SMI,
    NVIDIA_SMI_QUERY,
    MEMINFO,
    IBDEV2NETDEV,
    IP_ADDR_JSON,
    IP_NEIGH_JSON,
    IP_JSON,
    NET_SPEEDS,
    DOCKER_HOST_ENV,
)

# Every probe command by the key the probe parses its output under.
SECTIONS: dict[str, str] = {
    "hostname": HOSTNAME,
    "home": HOME,
    "arch": ARCH,
    "nvidia_smi": NVIDIA_SMI,
    "meminfo": MEMINFO,
    "ibdev2netdev": IBDEV2NETDEV,
    "ip": IP_JSON,
    "net_speeds": NET_SPEEDS,
    "disk_free": DISK_FREE,
    "hf_cache": HF_CACHE_SCAN,
    "docker_host": DOCKER_HOST_ENV,
}
# The section that runs beside the others: nvidia-smi takes a real GPU node the longest
# (its driver's start), the others are quick and run one after the other.
_BESIDE = ("nvidia_smi",)

# Starts each section of the combined probe's output; no probe command prints it.
MARK = "@@spark-tui-probe-4e1f@@"
_SECTION = re.compile(
    rf"^{MARK} (\w+)\n(.*?)\n{MARK} stderr (\d+)\n(.*?)\n(?={MARK} |\Z)",
    re.DOTALL | re.MULTILINE,
)


def _body(command: str) -> str:
    """What the combined script runs for a command: the script of an `sh -c '...'` in the
    combined script's own shell (one process fewer), any other command as it is."""
    words = shlex.split(command)
    return words[2] if words[:2] == ["sh", "-c"] and len(words) == 3 else command


def _section(key: str) -> str:
    # The command's output goes straight out (fd 3 is the script's stdout); its errors are
    # kept in a variable and printed after it with its exit status. Each command runs in the
    # subshell of that `$(...)`: its variables and `exit` stay in it.
    return (
        f"printf '%s %s\\n' {MARK} {key}\n"
        f"e=$( {{ {_body(SECTIONS[key])}\n}} 2>&1 >&3 </dev/null ); s=$?\n"
        f'printf \'\\n%s stderr %s\\n%s\\n\' {MARK} "$s" "$e"'
    )


def _combined_script() -> str:
    # No temporary files and a process only where a command needs one (a busy node pays
    # for each): the sections of _BESIDE run in the left side of a pipe, the others one
    # after the other on the right, which then copies the left side's output after its own.
    beside = "\n".join(_section(k) for k in _BESIDE)
    rest = "\n".join(_section(k) for k in SECTIONS if k not in _BESIDE)
    return "sh -c " + shlex.quote(f"{{ exec 3>&1\n{beside}\n}} | {{ exec 3>&1\n{rest}\ncat\n}}")


# Every probe command in one SSH session: a node's sshd sets up one session, not one per
# command (sessions dominate a probe's cost when many nodes' sshd share few cores).
COMBINED = _combined_script()


def split_combined(output: str) -> dict[str, tuple[str, str, int]]:
    """The (stdout, stderr, exit status) of each section of COMBINED's output, by key.
    The shell drops the trailing newlines of a command's errors."""
    return {m[1]: (m[2], m[4], int(m[3])) for m in _SECTION.finditer(output)}


def render_combined(results: dict[str, tuple[str, str, int]]) -> str:
    """COMBINED's output for these (stdout, stderr, exit status) by key (as a node prints it)."""
    return "".join(
        f"{MARK} {key}\n{out}\n{MARK} stderr {rc}\n{err.rstrip(chr(10))}\n"
        for key, (out, err, rc) in results.items()
    )
