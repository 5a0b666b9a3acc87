"""Per-node NCCL, Gloo, UCX and MPI socket settings, from that node's own facts.

A worker's ConnectX names may differ from the head's (`enp1s0f1np1` on one Spark,
`enP2p1s0f1np1` on the other), so these values are never copied between nodes.
"""

from __future__ import annotations

from spark_tui.core.errors import FactsError
from spark_tui.core.facts import Interface, NodeFacts

# The variable that names the node's RoCE HCAs (the playbook's IB_IF).
IB_IF_VAR = "NCCL_IB_HCA"
# Fixed values the playbook passes on every node.
FIXED_NETWORK_ENV = {"NCCL_IB_DISABLE": "0", "NCCL_IGNORE_CPU_AFFINITY": "1"}


def eth_interface(node: NodeFacts) -> Interface:
    """The node's first up ConnectX interface that carries an IPv4 (its socket interface)."""
    for iface in node.connectx_up:
        if iface.ipv4:
            return iface
    up = node.connectx_up
    if up:
        names = ", ".join(i.netdev for i in up)
        raise FactsError(
            f"{node.name}: ConnectX interface(s) {names} are up but have no IPv4 address",
            f"give the cluster link an address on {node.name} (Connect Multiple Sparks "
            "playbook, Configure Manually), then probe again",
        )
    raise FactsError(
        f"{node.name}: no ConnectX interface is up",
        f"check the QSFP cable on {node.name} and run `ibdev2netdev` there: one port "
        "must show (Up); then probe again",
    )


def rdma_devices(node: NodeFacts) -> list[str]:
    """Every up ConnectX RDMA device of the node, in probe order, without repeats."""
    seen: list[str] = []
    for iface in node.connectx_up:
        if iface.rdma_device and iface.rdma_device not in seen:
            seen.append(iface.rdma_device)
    return seen


def network_env(node: NodeFacts) -> dict[str, str]:
    """The network variables of the playbook's `docker run -e ...`, for this node."""
    eth = eth_interface(node).netdev
    # The playbook's order, so a printed plan reads like its `docker run`.
    return {
        "MN_IF_NAME": eth,
        "UCX_NET_DEVICES": eth,
        "NCCL_SOCKET_IFNAME": eth,
        IB_IF_VAR: ",".join(rdma_devices(node)),
        **FIXED_NETWORK_ENV,
        "OMPI_MCA_btl_tcp_if_include": eth,
        "GLOO_SOCKET_IFNAME": eth,
        "TP_SOCKET_IFNAME": eth,
    }
