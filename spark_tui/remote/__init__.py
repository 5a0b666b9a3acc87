"""Remote layer: SSH connections, probes, discovery, Docker over SSH."""
