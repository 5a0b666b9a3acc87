"""SIMULATED DGX Sparks: loopback SSH servers answering as GB10 nodes, each with a simulated
Docker Engine API that runs the simulated vLLM engine (`spark_tui.sim.engine`).

Public API::

    from spark_tui.sim.nodes import Scenario, SimCluster

    async with SimCluster(Scenario(nodes=2, memory_gb=128, ssh_port=0)) as cluster:
        cluster.inventory_path    # inventory YAML: name, host, port, user, identity_file,
                                  # known_hosts per node (what --inventory takes)
        cluster.known_hosts_path  # one `[addr]:port ssh-ed25519 ...` line per node
        cluster.identity_file     # the client's ed25519 private key
        cluster.inventory         # list[InventoryNode]
        cluster.nodes             # list[SimNode], head first
        cluster.describe()        # what runs and how to use it, for a person

`Scenario` knobs: `nodes`, `memory_gb` (64 or 128 as sold; any size works), `page_cache_gb`
(+ `page_cache_nodes`, default every node: page cache holding memory, so the drop-caches
remedy can be shown; running `echo 3 > /proc/sys/vm/drop_caches` in any usual spelling on
a node drops it), `worker_dies_after` (+ `dying_node`, default the last node: its engine
exits that many seconds after ready), `odd_digest_node` (its image digests differ),
`cx_ports` (which ConnectX port is cabled per node; default alternates so names differ),
`pace` and `token_scale` (engine speed), `base_address` (node 1's loopback address, the
others follow; `random_loopback_base()` keeps parallel test runs apart), `ssh_port`
(default 2222; 0 picks a free port per node) and `user`.

`SimCluster(..., free_addresses=True)` takes the first loopback range from `base_address`
on where nothing listens and the SSH and engine ports bind (`addresses`), so two demos or
a demo and `spark-tui sim` never share an address. `own_loop=True` runs the nodes on an
event loop of their own in a thread (`loop_thread`): what the demo does beside Textual,
whose eager tasks (Python 3.12+) asyncssh's server authentication does not survive.

Each `SimNode` (attributes `name`, `hostname`, `address`, `port`, `user`, `home`,
`docker_socket`, `engine`, `page_cache_bytes`):
- serves SSH on `address:port`, key-only, for `user` with the cluster's client key;
- answers the probe commands of `spark_tui.remote.probe_commands.SIMULATED` itself with
  GB10 output (nvidia-smi memory "Not Supported", /proc/meminfo from the scenario, its own
  ConnectX names in ibdev2netdev and `ip -j addr`, its address on the cabled ConnectX
  netdev, the other nodes in `ip -j neigh`, 200 Gb/s links), plus `free [-b|-k]`;
- runs any other command for real with `/bin/sh -c` in its home (a real directory holding
  a Hugging Face cache of every bundled recipe's model), `HOME` set to it; closing the
  channel kills the command's process group;
- forwards direct-tcpip to its own address (127.0.0.1/localhost/0.0.0.0 map to it) or a
  peer's, and direct-streamlocal `/var/run/docker.sock` (or `/run/docker.sock`) to its
  Docker API; anything else is refused.

The Docker API (`docker_api`) works with the unmodified Docker SDK over the forwarded
socket: ping, version, info, images, containers create/start/inspect/list (label, name,
id, status filters)/logs (follow, timestamps, since, until, tail; multiplexed frames)/
stop/restart/kill/remove/wait. Every bundled recipe's image is present. A container whose
argv starts with `vllm` runs `python -m spark_tui.sim.engine ...` with the container's env
and the node's `SPARK_SIM_*` knobs (memory, page cache, bind address, pace, ...); running
engines hold `gpu_memory_utilization` x total of the node's memory until they exit. Log
timestamps are unique and increasing per container: resume a follow with `since` = the
last timestamp seen and skip lines not after it.
"""

from __future__ import annotations

from spark_tui.sim.nodes.cluster import SimCluster
from spark_tui.sim.nodes.node import SimNode
from spark_tui.sim.nodes.scenario import NodeScenario, Scenario, random_loopback_base

__all__ = ["NodeScenario", "Scenario", "SimCluster", "SimNode", "random_loopback_base"]
