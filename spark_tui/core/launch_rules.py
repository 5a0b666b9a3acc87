"""Rules about launching that the CLI and the cockpit share: what to do when a rank fails
for a reason the plan or the command line can explain."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from spark_tui.core import logclass
from spark_tui.core.errors import InputError
from spark_tui.core.plan import MASTER_ADDR, MASTER_PORT, RankSpec, flag_value
from spark_tui.core.serve_args import parse_serve_args
from spark_tui.core.serve_rules import (
    cpu_moe_dp_remedy,
    dense_replicas_hang,
    dense_replicas_remedy,
)

# torch's TCPStore client ("The client socket has timed out after 600000ms while trying to
# connect to (10.0.0.1, 29501).") and the rendezvous wrappers around it.
_RENDEZVOUS_TIMEOUT = re.compile(
    r"client socket has timed out after .*trying to connect to|"
    r"DistNetworkError|TCPStore.*(?:timed out|[Tt]imeout)|"
    r"[Tt]imed out .*(?:rendezvous|store)|rendezvous.*timed out",
)


def rendezvous_timeout(lines: Sequence[str]) -> bool:
    """Whether a rank's lines say it could not reach the rendezvous (the head's store)."""
    return any(_RENDEZVOUS_TIMEOUT.search(line) for line in lines)


_CHECK_FIRST = "`spark-tui check RECIPE --inventory FILE` checks every flag against the image"


def usage_error_remedy(lines: Sequence[str]) -> str | None:
    """The remedy for vLLM refusing its command line (argparse's usage error, exit 2), or
    None when the lines hold no such error."""
    for line in lines:
        cause = logclass.classify(line).detail
        if cause == "unknown_flag":
            refused = line.split("unrecognized arguments:", 1)[1].strip()
            return (
                f"this image's vLLM does not know `{refused}`: remove it from the recipe's "
                f"command (or the --set that added it), or use an image whose vLLM has it; "
                f"{_CHECK_FIRST} before a launch"
            )
        if cause == "usage_error":
            return (
                "vLLM refused its command line (the line above says which argument): fix it "
                f"in the recipe's command or the --set that gave it; {_CHECK_FIRST}"
            )
    return None


# The frame vLLM's CPU build raises from when a MoE model's data-parallel replicas exchange
# tokens (its communicator has no all_gatherv); the exception itself carries no message.
_MISSING_ALL_GATHERV = re.compile(r'device_communicator\.py", line \d+, in all_gatherv\b')


def _parallel(ranks: Sequence[RankSpec]) -> tuple[int, int, int] | None:
    """(TP, PP, DP) of the head's command, or None when it does not parse."""
    try:
        args = parse_serve_args(ranks[0].argv)
    except InputError:
        return None
    return args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size


def cpu_moe_dp_failure_remedy(lines: Sequence[str], ranks: Sequence[RankSpec]) -> str | None:
    """The remedy when a MoE model's data-parallel replicas stopped on vLLM's CPU build at
    their first request (the collective it lacks), or None for any other failure."""
    if not ranks or not any(_MISSING_ALL_GATHERV.search(line) for line in lines):
        return None
    sizes = _parallel(ranks)
    if sizes is None or sizes[2] <= 1:
        return None
    tp, pp, dp = sizes
    return (
        "this vLLM build cannot run a MoE model's data-parallel replicas: they exchange every "
        "MoE layer's tokens with all_gatherv, which its communicator lacks (vLLM's CPU build; "
        "`spark-tui check` refuses this layout there); " + cpu_moe_dp_remedy(tp, pp, dp)
    )


# Each rank's line as it joins the torch world (vllm/distributed/parallel_state.py,
# init_distributed_environment): "world_size=4 rank=1 local_rank=0
# distributed_init_method=tcp://10.77.101.11:29501 backend=gloo".
_WORLD_LINE = re.compile(
    r"\bworld_size=(\d+) rank=\d+ local_rank=\d+ distributed_init_method=(\S+)"
)


def world_size_mismatch_remedy(
    logged: Mapping[int, Sequence[str]], ranks: Sequence[RankSpec]
) -> str | None:
    """The remedy when ranks that share one rendezvous logged different world sizes, or
    None. They never meet and nothing fails: a dense model's data-parallel replicas that
    span nodes, where vLLM runs each replica's engine alone (a world of TP x PP) while the
    replica's other nodes join a world of every replica (TP x PP x DP). `logged`: each
    launch rank's lines, by rank."""
    # rendezvous -> world size -> the launch ranks that logged it there
    seen: dict[str, dict[int, list[int]]] = {}
    for rank, lines in sorted(logged.items()):
        for line in lines:
            m = _WORLD_LINE.search(line)
            if m is not None:
                sizes = seen.setdefault(m.group(2), {})
                group = sizes.setdefault(int(m.group(1)), [])
                if rank not in group:
                    group.append(rank)
    split = [(init, sizes) for init, sizes in seen.items() if len(sizes) > 1]
    if not split:
        return None
    init, sizes = split[0]
    nodes = {r.rank: r.node for r in ranks}

    def who(group: list[int]) -> str:
        named = [f"rank {n} on {nodes[n]}" if n in nodes else f"rank {n}" for n in group]
        return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]

    said = ", ".join(
        f"{who(group)} said world_size={size}" for size, group in sorted(sizes.items())
    )
    met = f"the ranks never met at the rendezvous {init}: {said}"
    parallel = _parallel(ranks) if ranks else None
    if parallel is None or parallel[2] <= 1:
        return f"{met}; `spark-tui check RECIPE --inventory FILE` names a layout that forms"
    tp, pp, dp = parallel
    return (
        f"{met}; {dense_replicas_hang(tp, pp, dp)} (`spark-tui check` refuses this layout); "
        + dense_replicas_remedy(tp, pp, dp)
    )


def rank_failure_remedy(
    lines: Sequence[str],
    ranks: Sequence[RankSpec],
    *,
    never_met: bool = False,
    logged: Mapping[int, Sequence[str]] | None = None,
) -> str | None:
    """A remedy for failures the command line or the plan explains: vLLM refusing a flag,
    a MoE model's replicas on a build without their collective, ranks that joined one
    rendezvous as worlds of different sizes (`logged`: every rank's lines, by rank), or
    (naming this cluster's port, addresses and firewall) a rendezvous that could not be
    reached, or `never_met`: workers that never got past it before the ready timeout; None
    for the others."""
    refused = usage_error_remedy(lines)
    if refused is not None:
        return refused
    collective = cpu_moe_dp_failure_remedy(lines, ranks)
    if collective is not None:
        return collective
    mismatch = world_size_mismatch_remedy(logged or {}, ranks)
    if mismatch is not None:
        return mismatch
    if not ranks or not (never_met or rendezvous_timeout(lines)):
        return None
    head = ranks[0]
    if head.role == "ray-head":
        addr, port = head.cluster_address, flag_value(head.argv, "--port") or "6379"
    else:
        addr = flag_value(head.argv, MASTER_ADDR) or head.env.get("HEAD_IP") or head.cluster_address
        port = flag_value(head.argv, MASTER_PORT) or head.env.get("MASTER_PORT") or "29501"
    others = ", ".join(f"{r.node} ({r.cluster_address})" for r in ranks[1:]) or "the workers"
    return (
        f"the ranks could not meet at the rendezvous {addr}:{port} on {head.node}: check that "
        f"{others} reach {addr} over the ConnectX link (ping {addr} from each), that no "
        f"firewall blocks TCP port {port} on {head.node} (e.g. `sudo ufw allow {port}/tcp`), "
        "and that every rank was started (a worker that never came leaves the head waiting)"
    )
