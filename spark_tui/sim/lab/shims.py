"""Simulated GB10 tools for lab nodes: `nvidia-smi`, `ibdev2netdev`, `/proc/meminfo` and
the `nvidia-container-runtime-hook` dockerd needs for `--gpus all`. All simulated: the lab
has no GPU; the outputs follow the real ones in the shared reference samples."""

from __future__ import annotations

# MemTotal of a real 128 GB GB10 (reference free_kib_gb10.txt); other sizes scale from it.
GB10_128_MEMTOTAL_KB = 125_513_720
# What the OS and desktop of that node held ("used" and "buff/cache" in the same sample).
GB10_USED_KB = 5_088_412
GB10_CACHE_KB = 2_728_844
GB10_SWAP_KB = 16_777_212
KIB = 1024
GIB = 1024**3

NVIDIA_SMI = r"""#!/bin/sh
# nvidia-smi of a simulated NVIDIA GB10 (spark-tui lab shim: there is no GPU here).
# The output follows real GB10 nodes: memory is "Not Supported" / [N/A] on unified memory.
DRIVER=580.95.05
CUDA=13.0
NAME="NVIDIA GB10"
BUS=0000000F:01:00.0
UUID=GPU-5ba1c9e2-7d0b-4f3e-9c61-2f0d8a4be310

# Each helper sets a variable rather than printing, so a query runs no subshell: the probe
# asks every node at once, and on a lab of many nodes sharing a few cores each fork counts.
value() {  # $1 = field, $2 = 1 when units are printed; sets v
  case "$1" in
    index) v=0 ;;
    count) v=1 ;;
    name|gpu_name) v=$NAME ;;
    driver_version) v=$DRIVER ;;
    uuid|gpu_uuid) v=$UUID ;;
    pci.bus_id|gpu_bus_id) v=$BUS ;;
    persistence_mode) v=Enabled ;;
    pstate) v=P0 ;;
    compute_cap) v=12.1 ;;
    temperature.gpu) v=40 ;;
    memory.total|memory.used|memory.free|memory.reserved) v="[N/A]" ;;
    utilization.gpu|utilization.memory) if [ "$2" = 1 ]; then v="0 %"; else v=0; fi ;;
    power.draw) if [ "$2" = 1 ]; then v="11.00 W"; else v=11.00; fi ;;
    power.limit|enforced.power.limit) v="[N/A]" ;;
    *) return 1 ;;
  esac
}

header() {  # $1 = field, $2 = 1 when units are printed; sets h
  h=$1
  [ "$2" = 1 ] || return 0
  case "$1" in
    memory.*) h="$1 [MiB]" ;;
    utilization.*) h="$1 [%]" ;;
    power.*|enforced.power.limit) h="$1 [W]" ;;
  esac
}

query=""; format=""; list=""
for arg in "$@"; do
  case "$arg" in
    --query-gpu=*) query=${arg#--query-gpu=} ;;
    --format=*) format=${arg#--format=} ;;
    -L|--list-gpus) list=1 ;;
    -i|0|--id=0) ;;
    *) echo "nvidia-smi (spark-tui lab shim): option not simulated: $arg" >&2; exit 2 ;;
  esac
done

if [ -n "$list" ]; then
  echo "GPU 0: $NAME (UUID: $UUID)"
  exit 0
fi

if [ -n "$query" ]; then
  case ",$format," in *,csv,*) ;; *) echo "Format must be csv: --format=csv" >&2; exit 2 ;; esac
  units=1; head=1
  case ",$format," in *,nounits,*) units=0 ;; esac
  case ",$format," in *,noheader,*) head=0 ;; esac
  set -f; old=$IFS; IFS=", "
  hline=""; vline=""
  for f in $query; do
    if ! value "$f" "$units"; then
      echo "Field \"$f\" is not a valid field to query."
      echo
      echo "Run nvidia-smi --help-query-gpu for a list of valid fields."
      exit 2
    fi
    header "$f" "$units"
    hline="${hline:+$hline, }$h"; vline="${vline:+$vline, }$v"
  done
  IFS=$old
  [ "$head" = 1 ] && echo "$hline"
  echo "$vline"
  exit 0
fi

# The date line as `date '+%a %b %e %H:%M:%S %Y'` prints it in UTC (the lab's zone), from
# builtins (no `date` process): now is the boot time (/proc/stat btime, whole seconds) plus
# the uptime, then the civil date of that day (H. Hinnant's days-to-civil algorithm).
read -r up _ </proc/uptime
while read -r k v; do [ "$k" = btime ] && break; done </proc/stat
c=${up#*.}; s=$((v + ${up%.*} + (${c%"${c#?}"} >= 5)))
d=$((s / 86400)); t=$((s % 86400))
z=$((d + 719468)); era=$((z / 146097)); doe=$((z - era * 146097))
yoe=$(((doe - doe / 1460 + doe / 36524 - doe / 146096) / 365))
doy=$((doe - (365 * yoe + yoe / 4 - yoe / 100))); mp=$(((5 * doy + 2) / 153))
day=$((doy - (153 * mp + 2) / 5 + 1)); y=$((yoe + era * 400 + (mp >= 10)))
set -- Mar Apr May Jun Jul Aug Sep Oct Nov Dec Jan Feb; shift "$mp"; mon=$1
set -- Thu Fri Sat Sun Mon Tue Wed; shift $((d % 7)); wd=$1
printf '%s %s %2d %02d:%02d:%02d %d       \n' "$wd" "$mon" "$day" \
  $((t / 3600)) $((t % 3600 / 60)) $((t % 60)) "$y"
# printf, not `cat <<EOF`: no process for the table.
printf '%s\n' "+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI $DRIVER              Driver Version: $DRIVER      CUDA Version: $CUDA     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  $NAME                    On  |   $BUS Off |                  N/A |
| N/A   40C    P0             11W /  N/A  | Not Supported          |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+"
"""

IBDEV2NETDEV = r"""#!/bin/sh
# ibdev2netdev of a simulated Spark (spark-tui lab shim): the RDMA device and state of each
# ConnectX-named netdev of this node, read live from sysfs (rocep1s0f1 <-> enp1s0f1np1).
for arg in "$@"; do
  echo "ibdev2netdev (spark-tui lab shim): option not simulated: $arg" >&2; exit 2
done
for d in "${SPARK_LAB_SYS_CLASS_NET:-/sys/class/net}"/*; do
  n=${d##*/}
  case "$n" in en*np[0-9]) ;; *) continue ;; esac
  stem=${n#en}; stem=${stem%np*}
  # `read`, not `$(cat ...)`: no process per port (the probe runs this on every node at once).
  op=""; read -r op <"$d/operstate" 2>/dev/null
  if [ "$op" = up ]; then state=Up; else state=Down; fi
  echo "roce$stem port 1 ==> $n ($state)"
done
"""

RUNTIME_HOOK = """#!/bin/sh
# nvidia-container-runtime-hook stand-in (spark-tui lab): dockerd only accepts `--gpus all`
# when this exists on its PATH; runc hands it the container state on stdin. No GPU is set up.
cat >/dev/null
exit 0
"""


RUNC_WRAPPER = r"""#!/bin/sh
# runc for the spark-tui lab's dockerd. The playbook's `docker run` asks for --privileged
# and --ulimit nofile=1048576 memlock=-1. A host without CAP_SYS_RESOURCE (containers and
# sandboxes often lack it; a real Spark has it) cannot grant a capability outside its own
# bounding set nor raise a hard limit, and runc then fails ("unable to apply caps",
# "error setting rlimit"). This wrapper drops such capabilities and lowers such limits to
# the host's, noting each change in the log, and runs the real runc. Where the host can
# grant everything it changes nothing.
REAL_RUNC=@REAL_RUNC@
LOG=@LOG@
CAPS="CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
CHECKPOINT_RESTORE"
# The file to adjust: the bundle's config.json for create/run, the --process file for exec
# (`docker exec` hands runc the container's capabilities and rlimits again in it).
bundle=""; process=""; prev=""; cmd=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle=$a ;; --process|-p) process=$a ;; esac
  case "$a" in
    --bundle=*) bundle=${a#--bundle=} ;;
    --process=*) process=${a#--process=} ;;
    create|run|exec) [ -z "$cmd" ] && cmd=$a ;;
  esac
  prev=$a
done
spec=""
case "$cmd" in
  create|run) [ -n "$bundle" ] && spec="$bundle/config.json" ;;
  exec) spec=$process ;;
esac
# Hard limits from /proc/self/limits, not `ulimit -H`: dash (the /bin/sh of Debian) has no
# `ulimit -u`, and nothing this wrapper prints may reach the container's log.
hard() {
  awk -v n="$1" 'index($0, n) == 1 {
    split(substr($0, length(n) + 1), f, " "); if (f[2] != "unlimited") print f[2] }' /proc/self/limits
}
if [ -n "$spec" ] && [ -f "$spec" ]; then
  eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
  bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
  missing=""; bit=0
  for c in $CAPS; do
    [ $(( (0x$bnd >> bit) & 1 )) -eq 0 ] && missing="$missing CAP_$c"
    bit=$((bit + 1))
  done
  nofile=""; memlock=""; stack=""; nproc=""
  if [ $(( (0x$eff >> 24) & 1 )) -eq 0 ]; then
    nofile=$(hard "Max open files"); nproc=$(hard "Max processes")
    memlock=$(hard "Max locked memory"); stack=$(hard "Max stack size")
  fi
  awk -v nofile="$nofile" -v memlock="$memlock" -v stack="$stack" -v nproc="$nproc" \
      -v missing="$missing" -v logfile="$LOG" -v bundle="$spec" '
    BEGIN { lim["RLIMIT_NOFILE"] = nofile; lim["RLIMIT_MEMLOCK"] = memlock
            lim["RLIMIT_STACK"] = stack; lim["RLIMIT_NPROC"] = nproc
            n = split(missing, drop, " ") }
    {
      s = $0; out = ""
      while (match(s, /"type":"RLIMIT_[A-Z]+","hard":[0-9]+,"soft":[0-9]+/)) {
        m = substr(s, RSTART, RLENGTH); split(m, f, /[:,]/)
        t = f[2]; gsub(/"/, "", t); hard = f[4] + 0; soft = f[6] + 0
        if ((t in lim) && lim[t] != "" && hard > lim[t] + 0) {
          printf "%s: %s %s lowered to the host hard limit %s\n", bundle, t, f[4], lim[t] >> logfile
          hard = lim[t] + 0; if (soft > hard) soft = hard
          m = sprintf("\"type\":\"%s\",\"hard\":%.0f,\"soft\":%.0f", t, hard, soft)
        }
        out = out substr(s, 1, RSTART - 1) m; s = substr(s, RSTART + RLENGTH)
      }
      s = out s
      dropped = ""
      for (i = 1; i <= n; i++) {
        c = "\"" drop[i] "\""
        if (index(s, c)) {
          gsub(c ",", "", s); gsub(c, "", s); dropped = dropped " " drop[i]
        }
      }
      gsub(/,\]/, "]", s)
      if (dropped != "")
        printf "%s: capabilities this host cannot grant dropped:%s\n", bundle, dropped >> logfile
      print s
    }' "$spec" > "$spec.lab" 2>>"$LOG" && mv "$spec.lab" "$spec"
fi
exec "$REAL_RUNC" "$@"
"""


def runc_wrapper(real_runc: str, log: str) -> str:
    """The lab's runc wrapper (see RUNC_WRAPPER) for this host's runc and log file."""
    import shlex

    return RUNC_WRAPPER.replace("@REAL_RUNC@", shlex.quote(real_runc)).replace(
        "@LOG@", shlex.quote(log)
    )


def mem_total_kb(memory_gb: int) -> int:
    """MemTotal of a simulated GB10 with `memory_gb` of unified memory."""
    return round(GB10_128_MEMTOTAL_KB * memory_gb / 128)


def memory_figures(memory_gb: int, page_cache_gb: float) -> dict[str, int]:
    """Total, free, available and page-cache figures of a simulated node, in KiB."""
    total = mem_total_kb(memory_gb)
    used = round(GB10_USED_KB * memory_gb / 128)
    page_cache = int(page_cache_gb * GIB / KIB)
    cached = GB10_CACHE_KB + page_cache
    free = max(total - used - cached, 0)
    # The page cache is reclaimable, so it counts as available (that is why vLLM's free
    # memory check can fail on a node whose MemAvailable looks fine).
    available = min(free + round(GB10_CACHE_KB * 0.66) + page_cache, total)
    return {
        "total": total,
        "used": used,
        "free": free,
        "cached": cached,
        "available": available,
        "page_cache": page_cache,
    }


def meminfo_text(memory_gb: int, page_cache_gb: float = 0.0) -> str:
    """A /proc/meminfo of a simulated GB10 (bind-mounted over the node's /proc/meminfo)."""
    m = memory_figures(memory_gb, page_cache_gb)
    buffers = 96_512
    rows = [
        ("MemTotal", m["total"]),
        ("MemFree", m["free"]),
        ("MemAvailable", m["available"]),
        ("Buffers", buffers),
        ("Cached", m["cached"] - buffers),
        ("SwapCached", 0),
        ("Active", m["used"] // 2 + m["cached"] // 3),
        ("Inactive", m["used"] // 4 + 2 * m["cached"] // 3),
        ("Unevictable", 0),
        ("Mlocked", 0),
        ("SwapTotal", GB10_SWAP_KB),
        ("SwapFree", GB10_SWAP_KB),
        ("Dirty", 112),
        ("Writeback", 0),
        ("AnonPages", m["used"] // 2),
        ("Mapped", 412_300),
        ("Shmem", 20_596),
        ("KReclaimable", 180_224),
        ("Slab", 402_112),
        ("SReclaimable", 180_224),
        ("SUnreclaim", 221_888),
        ("KernelStack", 18_432),
        ("PageTables", 24_576),
        ("CommitLimit", m["total"] // 2 + GB10_SWAP_KB),
        ("Committed_AS", m["used"] * 2),
        ("VmallocTotal", 133_141_626_880),
        ("VmallocUsed", 92_160),
        ("HugePages_Total", 0),
        ("HugePages_Free", 0),
        ("Hugepagesize", 2048),
    ]
    lines = []
    for key, value in rows:
        unit = "" if key.startswith("HugePages_") else " kB"
        lines.append(f"{key + ':':<16}{value:>8}{unit}")
    return "\n".join(lines) + "\n"


def engine_env(
    memory_gb: int, page_cache_gb: float, pace: float | None, token_scale: float | None
) -> dict[str, str]:
    """The SPARK_SIM_* variables the simulated engine reads, baked into the lab's image."""
    m = memory_figures(memory_gb, page_cache_gb)
    env = {
        "SPARK_SIM_MEM_TOTAL_BYTES": str(m["total"] * KIB),
        "SPARK_SIM_MEM_AVAILABLE_BYTES": str(m["available"] * KIB),
        "SPARK_SIM_PAGE_CACHE_BYTES": str(m["page_cache"] * KIB),
    }
    if pace is not None:
        env["SPARK_SIM_PACE"] = f"{pace:g}"
    if token_scale is not None:
        env["SPARK_SIM_TOKEN_SCALE"] = f"{token_scale:g}"
    return env
