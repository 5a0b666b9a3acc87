"""The exact commands a probe sends to a node.

Shared by the probe (which parses their output) and the simulated nodes (which answer
them as a GB10 would). Every command is a fixed string: no user value is ever put in.
"""

from __future__ import annotations

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
