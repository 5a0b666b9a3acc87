"""The lab's pure parts, on any machine: layout, names, GB10 shims and the host checks."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_tui.cli import main
from spark_tui.core.errors import InputError, SparkError
from spark_tui.remote import probe_commands
from spark_tui.sim.lab import preflight, shims
from spark_tui.sim.lab.config import LabConfig, connectx_name
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


def test_nvidia_smi_shim_dates_its_table_as_date_does_without_a_date_process(
    tmp_path: Path,
) -> None:
    # No `date` on its PATH: the line comes from the shell's builtins (the probe runs the
    # shim on every lab node at once), in `date`'s form, UTC as the lab keeps.
    before = int(time.time())
    first = _shim(tmp_path, shims.NVIDIA_SMI, env={"PATH": "/nonexistent"}).splitlines()[0]
    after = int(time.time())
    printed = {
        time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(t)) + "       "
        for t in range(before - 1, after + 2)
    }
    assert first in printed


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


def test_lab_guard_skips_with_the_reason_or_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import labkit

    monkeypatch.setattr(labkit, "unavailable_reason", lambda: "the lab needs root")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the lab needs root"):
        labkit.lab_guard()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI=true"):
        labkit.lab_guard()
    monkeypatch.setattr(labkit, "unavailable_reason", lambda: None)
    labkit.lab_guard()  # nothing to say: the module runs


_CAP_NAMES = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP "
    "LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER "
    "SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE "
    "SYS_RESOURCE SYS_TIME"
).split()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux /proc")
def test_runc_wrapper_fits_limits_and_capabilities_to_what_the_host_can_grant(
    tmp_path: Path,
) -> None:
    import json
    import resource

    status = Path("/proc/self/status").read_text()
    eff = int(status.split("CapEff:")[1].split()[0], 16)
    bnd = int(status.split("CapBnd:")[1].split()[0], 16)
    caps = [f"CAP_{n}" for n in _CAP_NAMES]
    unlimited = 2**64 - 1
    config = {
        "process": {
            "rlimits": [
                {"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576},
                {"type": "RLIMIT_MEMLOCK", "hard": unlimited, "soft": unlimited},
                {"type": "RLIMIT_CORE", "hard": 7, "soft": 7},
            ],
            "capabilities": {"bounding": caps, "effective": list(caps)},
        }
    }
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    # Go writes the spec compactly, as runc's callers do.
    (bundle / "config.json").write_text(json.dumps(config, separators=(",", ":")))
    log = tmp_path / "limits.log"
    wrapper = tmp_path / "runc"
    wrapper.write_text(shims.runc_wrapper("/bin/echo", str(log)))
    wrapper.chmod(0o755)
    out = subprocess.run(
        [str(wrapper), "--root", "/x", "create", "--bundle", str(bundle), "cid"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["--root", "/x", "create", "--bundle", str(bundle), "cid"]
    got = json.loads((bundle / "config.json").read_text())["process"]
    limits = {r["type"]: (r["hard"], r["soft"]) for r in got["rlimits"]}
    can_raise = bool(eff >> 24 & 1)
    nofile_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if can_raise or nofile_hard in (resource.RLIM_INFINITY,) or nofile_hard >= 1048576:
        assert limits["RLIMIT_NOFILE"] == (1048576, 1048576)
    else:
        assert limits["RLIMIT_NOFILE"] == (nofile_hard, nofile_hard)
    memlock_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if can_raise or memlock_hard == resource.RLIM_INFINITY:
        assert limits["RLIMIT_MEMLOCK"] == (unlimited, unlimited)
    else:
        assert limits["RLIMIT_MEMLOCK"] == (memlock_hard, memlock_hard)
    assert limits["RLIMIT_CORE"] == (7, 7)  # not one the lab touches
    grantable = [c for i, c in enumerate(caps) if bnd >> i & 1]
    assert got["capabilities"]["bounding"] == grantable
    assert got["capabilities"]["effective"] == grantable
    changed = limits["RLIMIT_NOFILE"][0] != 1048576 or grantable != caps
    assert log.exists() == changed


def _host_hard_nofile() -> int | None:
    """The hard RLIMIT_NOFILE runc could not raise here (None: the host may raise any)."""
    import resource

    status = Path("/proc/self/status").read_text()
    eff = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff")), 16)
    if eff >> 24 & 1:  # CAP_SYS_RESOURCE: every limit can be raised
        return None
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


_RLIMITS = '"rlimits":[{"type":"RLIMIT_NOFILE","hard":1048576,"soft":1048576}]'


@pytest.mark.parametrize(
    ("argv", "spec"),
    [
        (["--root", "/run/r", "create", "--bundle", "{b}", "rank0"], "{b}/config.json"),
        (["--root", "/run/r", "exec", "--process", "{b}/process.json", "--detach", "rank0"], None),
    ],
    ids=["create", "exec"],
)
def test_runc_wrapper_is_silent_under_dash_and_fits_exec_limits_too(
    tmp_path: Path, argv: list[str], spec: str | None
) -> None:
    """The wrapper runs under /bin/sh (dash on Debian): nothing on stderr (it would start
    every rank's log), and `docker exec`'s process file gets the same lowered limits as
    the container's config, or runc fails with "error setting rlimit type 7"."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    target = Path((spec or "{b}/process.json").format(b=bundle))
    target.write_text('{"ociVersion":"1.0.2","process":{' + _RLIMITS + "}}\n")
    calls = tmp_path / "calls"
    fake = tmp_path / "runc"
    fake.write_text(f'#!/bin/sh\necho "$@" > {calls}\n')
    fake.chmod(0o755)
    log = tmp_path / "limits.log"
    wrapper = tmp_path / "spark-lab-runc"
    wrapper.write_text(shims.runc_wrapper(str(fake), str(log)))
    args = [a.format(b=bundle) for a in argv]
    proc = subprocess.run(
        ["/bin/sh", str(wrapper), *args], capture_output=True, text=True, timeout=10
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert calls.read_text().split() == args, "the real runc gets the same arguments"
    host = _host_hard_nofile()
    text = target.read_text()
    if host is not None and host < 1048576:
        assert f'"type":"RLIMIT_NOFILE","hard":{host},"soft":{host}' in text
        assert "RLIMIT_NOFILE 1048576 lowered" in log.read_text()
    else:
        assert _RLIMITS in text, "a host that can raise the limit keeps it"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A state directory short enough for the lab's unix sockets."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="lt", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_lab_down_without_a_state_file_removes_nothing(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its state, `lab down` must not guess (the default prefix would name another
    lab's namespaces): it says so and touches nothing."""
    from spark_tui.commands import lab as lab_cmd
    from spark_tui.sim.lab import Lab

    downed: list[LabConfig] = []
    monkeypatch.setattr(lab_cmd, "require_lab_host", lambda: None)
    monkeypatch.setattr(Lab, "down", lambda self, quiet=False: downed.append(self.cfg) or [])
    assert main(["lab", "down", "--state-dir", str(short_dir / "no-lab")]) == 0
    assert downed == [], "no lab was taken down"
    out = capsys.readouterr().out
    assert "nothing removed" in out and "--state-dir" in out


def test_lab_down_removes_only_the_names_its_config_gives(
    tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lab `ab` (1 node) must not delete lab `abv`'s bridge `abv0` (its pattern `ab` + `v\\d+`
    matches it) nor a namespace `ab-n2` that is not one of its nodes."""
    from spark_tui.sim.lab import Lab, network, procs

    netns = tmp_path / "netns"
    netns.mkdir()
    for name in ("ab-n1", "ab-n2", "abv-n1"):
        (netns / name).touch()
    links = ["lo", "ab0", "abv1", "abp1", "abv0", "abvv1"]
    ran: list[list[str]] = []

    def fake_run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        ran.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(network, "NETNS_DIR", netns)
    monkeypatch.setattr(network, "_links", lambda: [{"ifname": n} for n in links])
    monkeypatch.setattr(network, "run", fake_run)
    # No real process may be looked up or signalled from fake namespace files.
    monkeypatch.setattr(procs, "netns_file_id", lambda _p: None)
    monkeypatch.setattr(procs, "terminate", lambda pids, grace=0.0: set())
    cfg = LabConfig(nodes=1, prefix="ab", subnet="10.77.9.0/24", state_dir=short_dir / "state")
    Lab(cfg).down(quiet=True)
    deleted = {argv[-1] for argv in ran if argv[:2] in (["ip", "netns"], ["ip", "link"])}
    assert deleted == {"ab-n1", "ab0", "abv1", "abp1"}


def test_the_registry_stands_in_for_ghcr_and_docker_hub() -> None:
    import json

    from spark_tui.sim.lab.dockerd import daemon_json
    from spark_tui.sim.lab.registry import hosts_text

    cfg = LabConfig(nodes=2, prefix="ab", subnet="10.77.5.0/24", registry=True)
    assert cfg.registry_url == "http://10.77.5.2"
    assert cfg.registry_endpoints == "ghcr.io=http://10.77.5.2,docker.io=http://10.77.5.2"
    assert cfg.registry_netns == "ab-reg" and cfg.registry_veths == ("abr0", "abq0")
    config = json.loads(daemon_json(cfg.node(1), cfg.registry_url))
    assert config["insecure-registries"] == [
        "ghcr.io",
        "registry-1.docker.io",
        "index.docker.io",
        "10.77.5.2",
    ]
    assert config["registry-mirrors"] == ["http://10.77.5.2"]
    assert "insecure-registries" not in json.loads(daemon_json(cfg.node(1)))
    hosts = hosts_text(cfg.registry_address).splitlines()
    assert hosts[-1] == "10.77.5.2 ghcr.io registry-1.docker.io index.docker.io"


def test_ring_lab_cables_each_pair_of_neighbours_on_its_own_subnet() -> None:
    cfg = LabConfig(nodes=3, prefix="ringt", ring=True)
    cables = cfg.ring_cables()
    assert [(c.a.index, c.b.index) for c in cables] == [(1, 2), (2, 3), (3, 1)]
    assert [(c.a_address, c.b_address) for c in cables] == [
        ("10.79.1.1/24", "10.79.1.2/24"),
        ("10.79.2.1/24", "10.79.2.2/24"),
        ("10.79.3.1/24", "10.79.3.2/24"),
    ]
    # Their root-namespace names fit the kernel's 15 characters and do not collide.
    ends = [name for c in cables for name in (c.a_end, c.b_end)]
    assert len(set(ends)) == 6 and all(len(n) <= 15 for n in ends)
    # The bridge is the ring's LAN: its name is not a ConnectX one the shim would list.
    assert {n.ifname for n in cfg.all_nodes()} == {"enP7s7"}
    assert LabConfig(nodes=3, prefix="ringt").ring_cables() == []
