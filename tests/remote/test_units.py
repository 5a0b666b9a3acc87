"""Pure parts of the remote layer and operations: no network."""

from __future__ import annotations

from pathlib import Path

from spark_tui.core.plan import ContainerSpec, DockerOptions
from spark_tui.ops.launch import exit_reason
from spark_tui.ops.logs import BoundaryDedupe
from spark_tui.remote.docker_remote import (
    LogRecord,
    _image_infos,
    create_kwargs,
    since_seconds,
    split_stamp,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rec(ns: int, text: str) -> LogRecord:
    return LogRecord(stamp=str(ns), ts_ns=ns, text=text)


def test_dedupe_resume_drops_only_repeats() -> None:
    d = BoundaryDedupe()
    first = [rec(10, "a"), rec(20, "same"), rec(20, "same"), rec(30, "b")]
    assert [d.accept(r) for r in first] == [True, True, True, True]
    d.resume()
    # Docker sends the boundary again (from a moment before 30), then new lines.
    again = [rec(20, "same"), rec(20, "same"), rec(30, "b"), rec(30, "c"), rec(40, "d")]
    assert [d.accept(r) for r in again] == [False, False, False, True, True]
    assert d.last_ns == 40


def test_dedupe_keeps_identical_lines_in_one_stream() -> None:
    d = BoundaryDedupe()
    lines = [rec(5, "[transformers] Unrecognized keys")] * 3
    assert all(d.accept(r) for r in lines)  # real repeats are not dropped


def test_dedupe_out_of_order_line_after_resume_is_new() -> None:
    d = BoundaryDedupe()
    for r in (rec(10, "a"), rec(30, "b")):
        d.accept(r)
    d.resume()
    # A line stamped before the newest one but never seen (stdout/stderr interleaving).
    assert d.accept(rec(29, "late")) is True
    assert d.accept(rec(30, "b")) is False


def test_split_stamp_and_since() -> None:
    stamp, ns, text = split_stamp("2025-09-09T15:19:30.000000123Z INFO hello world")
    assert (stamp, text) == ("2025-09-09T15:19:30.000000123Z", "INFO hello world")
    assert ns % 1_000_000_000 == 123
    assert split_stamp("no stamp here") == ("", 0, "no stamp here")
    # `since` is a little before the stamp, never after it.
    assert since_seconds(ns) < ns / 1e9


def test_create_kwargs_playbook_options() -> None:
    spec = ContainerSpec(
        name="spark-tui-abc-r1",
        image="eugr/spark-vllm-b12x:nightly-20261015",
        labels={"spark-tui.cluster": "abc", "spark-tui.rank": "1"},
        env={"HF_TOKEN": "${HF_TOKEN}", "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1"},
        mounts={"/home/nvidia/.cache/huggingface": "/root/.cache/huggingface"},
        docker=DockerOptions(),
        command=["vllm", "serve", "m", "--node-rank", "1", "--headless"],
    )
    kw = create_kwargs(spec, {"HF_TOKEN": "hf_secret", "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1"})
    assert kw["command"] == ["vllm", "serve", "m", "--node-rank", "1", "--headless"]
    assert kw["environment"]["HF_TOKEN"] == "hf_secret"
    assert kw["privileged"] is True
    assert kw["network_mode"] == "host" and kw["ipc_mode"] == "host"
    assert kw["shm_size"] == "16g"
    assert kw["device_requests"][0]["Count"] == -1
    assert kw["device_requests"][0]["Capabilities"] == [["gpu"]]
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kw["ulimits"]}
    assert limits == {
        "nofile": (1048576, 1048576),
        "memlock": (-1, -1),
        "stack": (67108864, 67108864),
    }
    assert kw["volumes"] == {
        "/home/nvidia/.cache/huggingface": {"bind": "/root/.cache/huggingface", "mode": "rw"}
    }
    assert "entrypoint" not in kw


def test_image_infos_digest_per_repo() -> None:
    raw = {
        "Id": "sha256:1111",
        "RepoTags": ["eugr/spark-vllm-b12x:nightly-20261015", "local/vllm:latest"],
        "RepoDigests": ["eugr/spark-vllm-b12x@sha256:aaaa"],
        "Size": 42,
    }
    infos = _image_infos(raw)
    assert [(i.ref, i.digest) for i in infos] == [
        ("eugr/spark-vllm-b12x:nightly-20261015", "sha256:aaaa"),
        ("local/vllm:latest", "sha256:aaaa"),
    ]
    assert _image_infos({"Id": "sha256:2", "RepoTags": None, "RepoDigests": []})[0].ref == (
        "sha256:2"
    )


def test_exit_reasons() -> None:
    assert "killed" in exit_reason({"ExitCode": 137})
    assert "out-of-memory" in exit_reason({"ExitCode": 137, "OOMKilled": True})
    assert "bad arguments" in exit_reason({"ExitCode": 2})
    assert exit_reason({"ExitCode": 3}) == "exited with code 3"
