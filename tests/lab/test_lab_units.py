"""The lab's pure parts, on any machine: layout, names, GB10 shims and the host checks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from spark_tui.cli import main
from spark_tui.core.errors import InputError, SparkError
from spark_tui.remote import probe_commands
from spark_tui.sim.lab import preflight, shims
from spark_tui.sim.lab.config import LabConfig, connectx_name, rdma_name
from spark_tui.sim.lab.image import image_changes, split_ref

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _sample(name: str) -> list[str]:
    """A reference sample without its source line (and the prompt lines of pasted output)."""
    lines = (FIXTURES / name).read_text().splitlines()[1:]
    return [ln for ln in lines if not ln.startswith(("$ ", "nvidia@"))]


def _shim(tmp_path: Path, text: str, *args: str, env: dict[str, str] | None = None) -> str:
    script = tmp_path / "shim"
    script.write_text(text)
    script.chmod(0o755)
    proc = subprocess.run(
        ["/bin/sh", str(script), *args],
        capture_output=True,
        text=True,
        timeout=10,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_connectx_names_differ_between_nodes_and_fit_the_kernel_limit() -> None:
    names = [connectx_name(i) for i in range(1, 33)]
    assert names[:2] == ["enp1s0f1np1", "enP2p1s0f1np1"]
    assert len(set(names)) == len(names)
    assert max(len(n) for n in names) <= 15


def test_rdma_names_pair_as_in_the_playbook_sample() -> None:
    pairs = {}
    for line in _sample("ibdev2netdev_port1_up_playbook.txt"):
        dev, _, rest = line.partition(" port 1 ==> ")
        pairs[rest.split()[0]] = dev
    assert rdma_name("enp1s0f1np1") == pairs["enp1s0f1np1"] == "rocep1s0f1"
    assert rdma_name("enP2p1s0f1np1") == pairs["enP2p1s0f1np1"] == "roceP2p1s0f1"


def test_layout_of_a_lab() -> None:
    cfg = LabConfig(nodes=3, prefix="sparklab", subnet="10.77.0.0/24", state_dir=Path("/v/l"))
    n1, n2, n3 = cfg.all_nodes()
    assert cfg.bridge == "sparklab0" and cfg.bridge_address == "10.77.0.1"
    assert [n.address for n in (n1, n2, n3)] == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
    assert [n.netns for n in (n1, n2)] == ["sparklab-n1", "sparklab-n2"]
    assert all(len(n.veth_host) <= 15 and len(n.veth_peer) <= 15 for n in (n1, n2, n3))
    assert n2.docker_socket == Path("/v/l/nodes/n2/docker.sock")
    assert n1.name != n2.name


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nodes": 0},
        {"nodes": 33},
        {"memory_gb": 0},
        {"prefix": "Bad-Prefix"},
        {"prefix": "waytoolongprefix"},
        {"subnet": "8.8.8.0/24"},
        {"state_dir": Path("/tmp/" + "x" * 80)},
    ],
)
def test_bad_lab_configs_are_input_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError) as err:
        LabConfig(**kwargs)  # type: ignore[arg-type]
    assert err.value.remedy


def test_nvidia_smi_shim_prints_the_reference_table(tmp_path: Path) -> None:
    out = _shim(tmp_path, shims.NVIDIA_SMI).splitlines()
    reference = _sample("nvidia_smi_gb10_no_procs.txt")
    # The first line is the current date, as on a real node.
    assert out[1:] == reference[1:]
    assert "Not Supported" in out[9]


def test_nvidia_smi_shim_answers_the_probe_query_and_the_reference_csv_forms(
    tmp_path: Path,
) -> None:
    argv = probe_commands.NVIDIA_SMI_QUERY.split()[1:]
    assert _shim(tmp_path, shims.NVIDIA_SMI, *argv) == "NVIDIA GB10, 580.95.05, [N/A], [N/A]\n"
    header = _sample("nvidia_smi_query_gpu_csv_gb10_unsloth.txt")
    got = _shim(
        tmp_path,
        shims.NVIDIA_SMI,
        "--query-gpu=index,name,memory.total,memory.free",
        "--format=csv",
    )
    assert got.splitlines() == header
    noheader = _sample("nvidia_smi_query_gpu_csv_noheader_gb10.txt")
    got = _shim(
        tmp_path,
        shims.NVIDIA_SMI,
        "--query-gpu=name,memory.used,memory.total,utilization.gpu",
        "--format=csv,noheader,nounits",
    )
    assert got.splitlines() == noheader


def test_nvidia_smi_shim_refuses_unknown_fields_and_options(tmp_path: Path) -> None:
    script = tmp_path / "smi"
    script.write_text(shims.NVIDIA_SMI)
    bad_field = subprocess.run(
        ["/bin/sh", str(script), "--query-gpu=bogus", "--format=csv"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert bad_field.returncode == 2
    assert 'Field "bogus" is not a valid field to query.' in bad_field.stdout
    bad_option = subprocess.run(
        ["/bin/sh", str(script), "--no-such-option"], capture_output=True, text=True, timeout=10
    )
    assert bad_option.returncode == 2 and "not simulated" in bad_option.stderr


def test_ibdev2netdev_shim_reads_the_node_interfaces(tmp_path: Path) -> None:
    net = tmp_path / "net"
    for name, state in (("enp1s0f1np1", "up"), ("enP2p1s0f0np0", "down"), ("lo", "unknown")):
        (net / name).mkdir(parents=True)
        (net / name / "operstate").write_text(state + "\n")
    out = _shim(tmp_path, shims.IBDEV2NETDEV, env={"SPARK_LAB_SYS_CLASS_NET": str(net)})
    assert sorted(out.splitlines()) == [
        "roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)",
        "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)",
    ]
    # The same line format as a real node's (reference sample).
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in _sample("ibdev2netdev_port1_up_playbook.txt")


def _meminfo(text: str) -> dict[str, int]:
    return {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in text.splitlines())}


def test_meminfo_is_a_gb10s_and_scales_with_memory() -> None:
    mem_row = next(ln for ln in _sample("free_kib_gb10.txt") if ln.startswith("Mem:"))
    ref_total = int(mem_row.split()[1])
    m128 = _meminfo(shims.meminfo_text(128))
    assert m128["MemTotal"] == ref_total
    m64 = _meminfo(shims.meminfo_text(64))
    assert abs(m64["MemTotal"] - ref_total / 2) <= 1
    cached = _meminfo(shims.meminfo_text(128, page_cache_gb=20))
    # Page cache leaves MemFree but stays reclaimable (available).
    assert m128["MemFree"] - cached["MemFree"] == 20 * 1024 * 1024
    assert cached["MemAvailable"] == m128["MemAvailable"]
    assert all(m["MemFree"] <= m["MemAvailable"] <= m["MemTotal"] for m in (m128, m64, cached))


def test_engine_env_agrees_with_the_node_meminfo() -> None:
    env = shims.engine_env(64, 8.0, pace=0.05, token_scale=None)
    mem = _meminfo(shims.meminfo_text(64, 8.0))
    assert int(env["SPARK_SIM_MEM_TOTAL_BYTES"]) == mem["MemTotal"] * 1024
    assert int(env["SPARK_SIM_MEM_AVAILABLE_BYTES"]) == mem["MemAvailable"] * 1024
    assert int(env["SPARK_SIM_PAGE_CACHE_BYTES"]) == 8 * 1024**3
    assert env["SPARK_SIM_PACE"] == "0.05" and "SPARK_SIM_TOKEN_SCALE" not in env
    changes = image_changes(env)
    assert "ENV PYTHONPATH=/opt/spark-tui" in changes
    assert "ENV SPARK_SIM_PACE=0.05" in changes


def test_image_refs_split_like_docker() -> None:
    assert split_ref("nvcr.io/nvidia/vllm:26.05.post1-py3") == (
        "nvcr.io/nvidia/vllm",
        "26.05.post1-py3",
    )
    assert split_ref("localhost:5000/vllm") == ("localhost:5000/vllm", "latest")
    assert split_ref("vllm/vllm-openai") == ("vllm/vllm-openai", "latest")


def test_not_root_is_a_spark_error_with_a_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.sys, "platform", "linux")
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 1000)
    with pytest.raises(SparkError) as err:
        preflight.require_lab_host()
    assert "root" in err.value.message and "sudo" in err.value.remedy


def test_not_linux_is_a_spark_error_with_a_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.sys, "platform", "darwin")
    with pytest.raises(SparkError) as err:
        preflight.require_lab_host()
    assert "Linux" in err.value.message and "demo" in err.value.remedy


def test_missing_tools_name_their_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.sys, "platform", "linux")
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 0)
    monkeypatch.setattr(preflight, "which", lambda tool: None if tool == "dockerd" else "/x")
    with pytest.raises(SparkError) as err:
        preflight.require_lab_host()
    assert "dockerd (docker.io)" in err.value.message
    assert "apt-get install" in err.value.remedy


def test_cli_lab_up_without_inventory_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("spark_tui.commands.lab.require_lab_host", lambda: None)
    assert main(["lab", "up", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "--inventory" in err and "remedy:" in err
