"""Run history: masking, launch records from the real glm plan, baseline, changes, export."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from ops_helpers import FAKE_API_KEY, FAKE_HF_TOKEN, files_containing, glm_plan

from spark_tui.core.errors import InputError
from spark_tui.ops.export import export_runs, launch_script
from spark_tui.ops.history import (
    History,
    changed_settings,
    data_dir,
    is_secret_name,
    mask_secrets,
    mask_text,
)


def test_secret_names() -> None:
    for name in ("HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "--api-key", "DB_PASSWORD"):
        assert is_secret_name(name), name
    for name in ("max_num_batched_tokens", "prompt_tokens", "--tool-call-parser", "cluster_id"):
        assert not is_secret_name(name), name
    # vLLM's flag (eugr's GLM-5.2 recipe passes it 2048): a threshold, not a token.
    assert not is_secret_name("--long-prefill-token-threshold")
    assert is_secret_name("MY_SECRET_VALUE") and is_secret_name("--hf-token")


def test_mask_secrets_keys_argv_text_and_literals() -> None:
    values = {FAKE_HF_TOKEN: "HF_TOKEN"}
    data = {
        "env": {"HF_TOKEN": FAKE_HF_TOKEN, "MY_SECRET": "abc", "NCCL_IB_HCA": "rocep1s0f1"},
        "ref": {"HF_TOKEN": "${HF_TOKEN}"},
        "argv": [
            "vllm",
            "serve",
            "m",
            "--api-key",
            "sk-live-1",
            "--max-num-batched-tokens",
            "4096",
        ],
        "text": f"docker run -e HF_TOKEN={FAKE_HF_TOKEN} -e X=1 --hf-token=abcd img",
        "log": f"token in a log line: {FAKE_HF_TOKEN}!",
        "settings": {"max_num_batched_tokens": 4096, "api_key": "k-123"},
    }
    out = mask_secrets(data, values)
    assert out["env"] == {
        "HF_TOKEN": "${HF_TOKEN}",
        "MY_SECRET": "${MY_SECRET}",
        "NCCL_IB_HCA": "rocep1s0f1",
    }
    assert out["ref"] == {"HF_TOKEN": "${HF_TOKEN}"}
    assert out["argv"] == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "***",
        "--max-num-batched-tokens",
        "4096",
    ]
    assert out["text"] == "docker run -e HF_TOKEN=${HF_TOKEN} -e X=1 --hf-token=*** img"
    assert out["log"] == "token in a log line: ${HF_TOKEN}!"
    assert out["settings"] == {"max_num_batched_tokens": 4096, "api_key": "***"}
    # A reference in shell form survives untouched.
    assert mask_text('-e HF_TOKEN="${HF_TOKEN:-}"', values) == '-e HF_TOKEN="${HF_TOKEN:-}"'


def test_data_dir_follows_the_env(private_data_dir: Path) -> None:
    assert data_dir() == private_data_dir
    assert History().root == private_data_dir / "history"


def test_launch_record_from_the_glm_plan() -> None:
    history = History()
    plan = glm_plan()
    run = history.record_launch(
        plan,
        {},
        {"spark-a": "sha256:aaa", "spark-b": "sha256:bbb"},
        "rev-1234",
    )
    assert run.kind == "launch" and run.recipe == "glm-5.3-flash"
    assert run.cluster_key == "10.0.0.1,10.0.0.2" and run.cluster_id == plan.cluster_id
    assert run.settings_hash == plan.settings_hash
    assert run.model == "nvidia/GLM-5.3-Flash-FP4-Local" and run.model_revision == "rev-1234"
    assert run.image == "eugr/spark-vllm-b12x:nightly-20261015"
    # Each node's own network values, never the head's copied to the worker.
    assert run.network["spark-a"]["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert run.network["spark-b"]["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert run.network["spark-b"]["--master-addr"] == "192.168.100.10"
    assert [c["argv"][-1] for c in run.commands] == ["0", "--headless"]
    assert run.commands[0]["env"]["HF_TOKEN"] == "${HF_TOKEN}"
    assert run.shell and "rank0()" in run.shell
    assert run.base_url == "http://10.0.0.1:8000/v1"
    stored = json.loads((history.root / f"{run.id}.json").read_text())
    assert stored["id"] == run.id
    assert oct(os.stat(history.root / f"{run.id}.json").st_mode & 0o777) == "0o600"
    assert history.get_run(run.id[:17]).id == run.id


def test_changed_settings() -> None:
    from spark_tui.core.recipe_loader import find_recipe
    from spark_tui.service.history import recipe_defaults

    defaults = recipe_defaults(find_recipe("glm-5.3-flash"))
    history = History()
    first = history.record_launch(glm_plan(), {}, defaults=defaults)
    second = history.record_launch(
        glm_plan({"max_num_seqs": 8}), {"max_num_seqs": 8}, defaults=defaults
    )
    other = history.record_launch(
        glm_plan({"max_num_seqs": 2}), {"max_num_seqs": 2}, defaults=defaults
    )
    plain = history.record_launch(glm_plan(), {}, defaults=defaults)
    assert changed_settings(second, first) == [{"name": "max_num_seqs", "before": 4, "after": 8}]
    assert changed_settings(other, second) == [{"name": "max_num_seqs", "before": 8, "after": 2}]
    # A launch names what differs from the recipe's defaults, not from the launch before:
    # the plain launch after a tuned one is the recipe's own.
    assert first.changed == [] and plain.changed == []
    assert second.changed == [{"name": "max_num_seqs", "before": 4, "after": 8}]
    assert other.changed == [{"name": "max_num_seqs", "before": 4, "after": 2}]
    launches = [r.id for r in history.list_runs("launch")]
    assert launches == [first.id, second.id, other.id, plain.id]


def test_unknown_run_id_is_an_input_error() -> None:
    with pytest.raises(InputError) as err:
        History().get_run("nope")
    assert "spark-tui history" in err.value.remedy


def _bench(tps: float) -> dict[str, Any]:
    return {
        "base_url": "http://127.0.0.1:8000",
        "model": "m",
        "config": {"concurrency": [1], "prompt_tokens": 8, "output_tokens": 8},
        "levels": [
            {
                "concurrency": 1,
                "requests": 2,
                "errors": 0,
                "duration_s": 1.0,
                "figures": {"total_output_tps": tps, "ttft_p50_s": 0.1, "errors": 0.0},
                "per_request": {"latency_s": [1.0, 1.01], "ttft_s": [0.1, 0.1]},
            }
        ],
    }


def test_no_secret_in_any_record_or_export(private_data_dir: Path, tmp_path: Path) -> None:
    history = History()
    plan = glm_plan()
    # A secret smuggled into the plan's env and argv must be masked too.
    plan_dict = plan.to_dict()
    plan_dict["ranks"][0]["env"]["HF_TOKEN"] = FAKE_HF_TOKEN
    plan_dict["ranks"][0]["argv"] += ["--api-key", FAKE_API_KEY]
    launch = history.record_launch(
        plan_dict, {"hf_token": FAKE_HF_TOKEN}, shell=f"echo {FAKE_HF_TOKEN}"
    )
    smoke = history.record_smoke(
        [{"name": "health", "ok": True, "detail": f"saw {FAKE_API_KEY}"}], launch=launch
    )
    a = history.record_bench(_bench(10.0), launch=launch)
    b = history.record_bench(_bench(20.0), launch=launch)
    out = tmp_path / "export"
    written = export_runs(history, [a.id, b.id], out)
    assert {p.name for p in written} == {f"launch-{launch.id}.sh", "report.md"}
    report = (out / "report.md").read_text()
    assert "total tok/s" in report and "+100.0 %" in report
    assert smoke.id in report
    for secret in (FAKE_HF_TOKEN, FAKE_API_KEY):
        assert files_containing(private_data_dir, secret) == []
        assert files_containing(out, secret) == []
    assert launch_script(history.get_run(launch.id)).startswith("#!/usr/bin/env bash")
