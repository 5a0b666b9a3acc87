"""The namespace lab (Linux, root): simulated Sparks as network namespaces with a real
OpenSSH sshd and a real dockerd each, an image carrying the simulated engine as `vllm`, and
GB10 shims. Used by `spark-tui lab` and by tests/lab. Everything in it is simulated hardware."""

from spark_tui.sim.lab.config import LabConfig, NodeLayout
from spark_tui.sim.lab.lab import Lab, LabInfo, NodeStatus
from spark_tui.sim.lab.preflight import require_lab_host, unavailable_reason

__all__ = [
    "Lab",
    "LabConfig",
    "LabInfo",
    "NodeLayout",
    "NodeStatus",
    "require_lab_host",
    "unavailable_reason",
]
