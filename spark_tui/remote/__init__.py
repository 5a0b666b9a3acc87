"""Remote layer: SSH connections, probes, Docker over SSH.

- `ssh`: `NodeConnection` (one reused asyncssh connection per node: `connect()`,
  `run(cmd, timeout)`, `run_argv(argv)`, `forward_local_port(...)`,
  `forward_docker_socket()`, reconnect with backoff) and `ConnectionPool` (all nodes at
  once; `open(partial=...)`, `reachable`, `errors`, `pool[name]`).
- `hostkeys`: known_hosts checking; unknown keys need a yes (`confirm` callback or
  `accept_new_host_keys`), changed keys are refused (`HostKeyError`, exit 3).
- `parsers`: pure functions from real command output to facts.
- `probe`: `probe_node(conn)`, `probe_pool(pool)`, `probe_nodes(nodes, ...)` -> `NodeFacts`.
- `docker_remote`: `RemoteDocker.open(conn)`, the Docker SDK through the forwarded socket.
"""
