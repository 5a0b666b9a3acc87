"""`status` says which a running cluster is: loading (each rank's progress) or ready."""

from __future__ import annotations

from spark_tui.commands.status import render_state
from spark_tui.ops.cluster import ClusterStatus, RankStatus
from spark_tui.ops.diagnose import ClusterDiagnosis
from spark_tui.ops.readiness import RankProgress, Readiness
from spark_tui.service.events import Endpoint
from spark_tui.service.status import ClusterReport


def _cluster() -> ClusterStatus:
    ranks = [
        RankStatus(0, "spark-a", "c-r0", "running", "Up 1 minute", "head"),
        RankStatus(1, "spark-b", "c-r1", "running", "Up 1 minute", "worker"),
    ]
    return ClusterStatus("c", "glm-5.3-flash", None, None, ranks)


def _report(diag: ClusterDiagnosis) -> ClusterReport:
    endpoint = Endpoint("c", "spark-a", "http://10.0.0.1:8000/v1", None, "ssh -N -L ...")
    return ClusterReport(_cluster(), endpoint, diag)


def test_status_says_loading_with_each_ranks_progress_or_ready() -> None:
    loading = Readiness(
        "loading",
        (
            RankProgress(0, "spark-a", 0.75, "Loading safetensors checkpoint shards 3/4"),
            RankProgress(1, "spark-b", None, None),
        ),
    )
    diag = ClusterDiagnosis("c", "running", readiness=loading)
    assert render_state(_report(diag)) == (
        "loading 75%",
        [
            "  loading: rank 0 on spark-a Loading safetensors checkpoint shards 3/4 (75%)",
            "  loading: rank 1 on spark-b starting",
        ],
    )
    ready = ClusterDiagnosis("c", "running", readiness=Readiness("ready"))
    assert render_state(_report(ready)) == ("ready", [])
    assert render_state(_report(ClusterDiagnosis("c", "failed"))) == ("failed", [])
