"""Ray's own log lines (real Ray 2.60 output): startup phases, levels and failure causes."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.logclass import StreamClassifier, classify, explain_failure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


def test_ray_start_on_the_head_is_a_phase_and_its_notes_are_not_errors() -> None:
    kinds = [classify(line) for line in _lines("ray_start_head_2600.txt")]
    started = [
        c
        for c, t in zip(kinds, _lines("ray_start_head_2600.txt"), strict=True)
        if "Ray runtime started" in t
    ]
    assert started and all(c.kind == "phase" and c.scope == "ray" for c in started)
    assert not [c for c in kinds if c.kind == "error"]
    # The token-authentication note is Ray's WARNING: a warning, not an error.
    assert any(c.kind == "warning" for c in kinds)


def test_a_worker_that_cannot_reach_the_gcs_says_so() -> None:
    lines = _lines("ray_start_worker_gcs_unreachable_2600.txt")
    tracker = StreamClassifier()
    classes = [tracker.classify(line) for line in lines]
    gcs = [c for c, t in zip(classes, lines, strict=True) if "Failed to connect to GCS" in t]
    assert gcs and all(c.kind == "warning" and c.detail == "ray_gcs_unreachable" for c in gcs)
    assert not [c for c in classes if c.kind == "error"]


def test_the_engine_losing_a_ray_worker_is_explained() -> None:
    lines = _lines("vllm_fail_ray_worker_died_spark_ring.txt")
    why = explain_failure(lines)
    assert any("RayWorkerProc rank=[2] died unexpectedly" in t for t in why)
    assert any("EngineDeadError" in t for t in why)


def test_a_worker_that_joined_too_early_is_an_error_naming_the_cause() -> None:
    lines = _lines("ray_start_worker_head_not_ready_2600.txt")[1:]
    classes = [classify(line) for line in lines]
    assert [c.kind for c in classes] == ["error", "error"]
    assert classes[0].detail == "ray_head_not_ready"
    assert explain_failure(lines)
