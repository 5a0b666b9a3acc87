"""The exact commands a probe sends to a node.

Shared by the probe (which parses their output) and the simulated nodes (which answer
them as a GB10 would). Every command is a fixed string: no user value is ever put in.
"""

from __future__ import annotations

import re
import shlex

HOSTNAME = "hostname"
HOME = "sh -c 'echo \"$HOME\"'"
ARCH = "uname -m"
NVIDIA_SMI = "nvidia-smi"
NVIDIA_SMI_QUERY = (
    "nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader"
)
MEMINFO = "cat /proc/meminfo"
IBDEV2NETDEV = "ibdev2netdev"
IP_ADDR_JSON = "ip -j addr"
# Neighbours (ARP/NDP) of every interface (a simulated node answers it as a GB10 does).
IP_NEIGH_JSON = "ip -j neigh"
# Link speeds of every netdev, one "name speed" line each ("-1" or empty when unknown).
NET_SPEEDS = (
    "sh -c 'for d in /sys/class/net/*; do "
    'printf "%s %s\\n" "${d##*/}" "$(cat "$d/speed" 2>/dev/null)"; done\''
)
# Free bytes where the Hugging Face cache lives (its parent when it does not exist yet).
DISK_FREE = (
    'sh -c \'d="${HF_HOME:-$HOME/.cache/huggingface}"; [ -d "$d" ] || d="$HOME"; df -B1 "$d"\''
)
# Every snapshot of every cached model: its path, its size on disk, each complete file with
# its size (a link to a missing blob is not listed), its config.json and the metadata of its
# safetensors index, between markers the parser splits on.
HF_CACHE_SCAN = (
    'sh -c \'hub="${HF_HOME:-$HOME/.cache/huggingface}/hub"; '
    'for s in "$hub"/models--*/snapshots/*; do [ -d "$s" ] || continue; '
    'echo "==> $s"; echo "--- size"; du -sLb "$s" 2>/dev/null | cut -f1; '
    'echo "--- files"; find -L "$s" -type f -printf "%s %P\\n" 2>/dev/null; '
    'for f in config.json model.safetensors.index.json; do echo "--- $f"; '
    '[ -f "$s/$f" ] && head -c 65536 "$s/$f"; echo; done; done\''
)

# The node's DOCKER_HOST (empty when unset): where its Docker socket is, when not the default.
DOCKER_HOST_ENV = "sh -c 'echo \"$DOCKER_HOST\"'"

# The commands a simulated node answers itself (the rest run in its simulated home).
SIMULATED = (
    HOSTNAME,
    ARCH,
    NVIDIA_SMI,
    NVIDIA_SMI_QUERY,
    MEMINFO,
    IBDEV2NETDEV,
    IP_ADDR_JSON,
    IP_NEIGH_JSON,
    NET_SPEEDS,
)

# Every probe command by the key the probe parses its output under, in the order it prints them.
SECTIONS: dict[str, str] = {
    "hostname": HOSTNAME,
    "home": HOME,
    "arch": ARCH,
    "nvidia_smi": NVIDIA_SMI,
    "nvidia_smi_query": NVIDIA_SMI_QUERY,
    "meminfo": MEMINFO,
    "ibdev2netdev": IBDEV2NETDEV,
    "ip_addr": IP_ADDR_JSON,
    "ip_neigh": IP_NEIGH_JSON,
    "net_speeds": NET_SPEEDS,
    "disk_free": DISK_FREE,
    "hf_cache": HF_CACHE_SCAN,
}

# Starts each section of the combined probe's output; no probe command prints it.
MARK = "@@spark-tui-probe-4e1f@@"
_SECTION = re.compile(
    rf"^{MARK} (\w+) (\d+)\n(.*?)\n{MARK} stderr\n(.*?)\n(?={MARK} |\Z)",
    re.DOTALL | re.MULTILINE,
)


def _combined_script() -> str:
    # Every command runs at once in the background (as separate sessions did), into files
    # of its own; shell builtins write each section's markers, and one `cat` prints all the
    # sections in order (few processes: on a busy node each fork counts).
    lines = ["d=$(mktemp -d) || exit 125", "trap 'rm -rf \"$d\"' EXIT"]
    files = []
    for key, cmd in SECTIONS.items():
        f = f'"$d/{key}'
        lines.append(
            f'{{ {cmd} >{f}.out" 2>{f}.err" </dev/null; '
            f"printf '%s %s %s\\n' {MARK} {key} $? >{f}.head\"; "
            f"printf '\\n%s stderr\\n' {MARK} >{f}.mid\"; echo >{f}.end\"; }} &"
        )
        files += [f'{f}.{part}"' for part in ("head", "out", "mid", "err", "end")]
    lines += ["wait", "cat " + " ".join(files)]
    return "sh -c " + shlex.quote("\n".join(lines))


# Every probe command in one SSH session: a node's sshd sets up one session, not one per
# command (sessions dominate a probe's cost when many nodes' sshd share few cores).
COMBINED = _combined_script()


def split_combined(output: str) -> dict[str, tuple[str, str, int]]:
    """The (stdout, stderr, exit status) of each section of COMBINED's output, by key."""
    return {m[1]: (m[3], m[4], int(m[2])) for m in _SECTION.finditer(output)}


def render_combined(results: dict[str, tuple[str, str, int]]) -> str:
    """COMBINED's output for these (stdout, stderr, exit status) by key (as a node prints it)."""
    return "".join(
        f"{MARK} {key} {rc}\n{out}\n{MARK} stderr\n{err}\n"
        for key, (out, err, rc) in results.items()
    )
