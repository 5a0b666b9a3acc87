"""Parsers of probe output, on copies of real GB10 output (tests/fixtures/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_tui.core.facts import Interface, NodeFacts
from spark_tui.remote import parsers as p

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# A shell prompt line in a sample: "user@host:~$ cmd" or "$ cmd".
PROMPT = re.compile(r"^(?:\S+@\S+:\S*\$ |\$ )(?P<cmd>.*)$")


def outputs(name: str) -> list[tuple[str, str]]:
    """The (command, output) pairs of a sample; the source comment lines are dropped."""
    pairs: list[tuple[str, list[str]]] = [("", [])]
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith("# "):
            continue
        m = PROMPT.match(line)
        if m:
            pairs.append((m.group("cmd"), []))
        else:
            pairs[-1][1].append(line)
    return [(cmd, "\n".join(body)) for cmd, body in pairs if cmd or "".join(body).strip()]


def output(name: str) -> str:
    (_, text), *_ = outputs(name)
    return text


GB10_SMI = [
    ("nvidia_smi_gb10_desktop_procs.txt", "580.95.05"),
    ("nvidia_smi_gb10_driver580_126.txt", "580.126.09"),
    ("nvidia_smi_gb10_driver580_142.txt", "580.142"),
    ("nvidia_smi_gb10_idle_with_procs.txt", "580.82.09"),
    ("nvidia_smi_gb10_no_procs.txt", "580.95.05"),
]


@pytest.mark.parametrize(("name", "driver"), GB10_SMI)
def test_nvidia_smi_gb10_memory_not_supported(name: str, driver: str) -> None:
    info = p.parse_nvidia_smi(output(name))
    assert info.name == "NVIDIA GB10"
    assert info.count == 1
    assert info.driver_version == driver
    assert info.cuda_version == "13.0"
    # GB10 says "Not Supported": no invented number, memory comes from /proc/meminfo.
    assert info.memory_total_bytes is None
    assert info.memory_used_bytes is None


def test_nvidia_smi_discrete_gpu_memory_is_read() -> None:
    text = """\
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   34C    P0             61W /  700W |       4MiB /  81559MiB |      0%      Default |
|   1  NVIDIA H100 80GB HBM3          On  |   00000000:2A:00.0 Off |                    0 |
| N/A   33C    P0             64W /  700W |     100MiB /  81559MiB |      0%      Default |
"""
    info = p.parse_nvidia_smi(text)
    assert info.name == "NVIDIA H100 80GB HBM3"
    assert info.count == 2
    assert info.memory_total_bytes == 2 * 81559 * 1024**2
    assert info.memory_used_bytes == 104 * 1024**2


def test_nvidia_smi_csv_with_header_na_memory() -> None:
    (cmd, text), *_ = outputs("nvidia_smi_query_gpu_csv_gb10_unsloth.txt")
    assert "--query-gpu" in cmd
    gpus = p.parse_nvidia_smi_csv(text)
    assert gpus == [
        {"index": "0", "name": "NVIDIA GB10", "memory.total": None, "memory.free": None}
    ]


def test_nvidia_smi_csv_noheader_with_columns() -> None:
    gpus = p.parse_nvidia_smi_csv(
        output("nvidia_smi_query_gpu_csv_noheader_gb10.txt"),
        columns=("name", "memory.used", "memory.total", "utilization.gpu"),
    )
    assert gpus == [
        {"name": "NVIDIA GB10", "memory.used": None, "memory.total": None, "utilization.gpu": "0"}
    ]


def test_nvidia_smi_csv_probe_query_columns() -> None:
    gpus = p.parse_nvidia_smi_csv("NVIDIA GB10, 580.95.05, [N/A], [N/A]\n")
    assert gpus[0]["name"] == "NVIDIA GB10"
    assert gpus[0]["driver_version"] == "580.95.05"
    assert gpus[0]["memory.total"] is None
    h100 = p.parse_nvidia_smi_csv("NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 4 MiB\n")
    assert h100[0]["memory.total"] == 81559 * 1024**2


def test_meminfo_matches_free() -> None:
    mem = p.parse_meminfo(output("constructed_meminfo_gb10.txt"))
    # The `free` the same node printed (free_kib_gb10.txt): total and available in KiB.
    free_lines = output("free_kib_gb10.txt").splitlines()
    mem_row = next(line.split() for line in free_lines if line.startswith("Mem:"))
    assert mem.total == int(mem_row[1]) * 1024
    assert mem.available == int(mem_row[6]) * 1024
    assert mem.free == int(mem_row[3]) * 1024
    assert mem.page_cache == (96532 + 2274120) * 1024  # Cached + Buffers
    assert mem.total is not None and 119 < mem.total / 1024**3 < 120


def test_meminfo_missing_fields_stay_unknown() -> None:
    mem = p.parse_meminfo("MemTotal:       65536000 kB\n")
    assert mem.total == 65536000 * 1024
    assert mem.available is None and mem.page_cache is None


def test_ibdev2netdev_two_nodes_port0_up() -> None:
    pairs = outputs("ibdev2netdev_port0_up_two_nodes.txt")
    assert [cmd for cmd, _ in pairs] == ["ibdev2netdev", "ibdev2netdev"]
    for _, text in pairs:
        ports = p.parse_ibdev2netdev(text)
        assert [(i.rdma_device, i.netdev, i.state) for i in ports] == [
            ("rocep1s0f0", "enp1s0f0np0", "up"),
            ("rocep1s0f1", "enp1s0f1np1", "down"),
            ("roceP2p1s0f0", "enP2p1s0f0np0", "up"),
            ("roceP2p1s0f1", "enP2p1s0f1np1", "down"),
        ]


def test_ibdev2netdev_port1_up() -> None:
    ports = p.parse_ibdev2netdev(output("ibdev2netdev_port1_up_playbook.txt"))
    up = [i.netdev for i in ports if i.is_up]
    assert up == ["enP2p1s0f1np1", "enp1s0f1np1"]


def test_ip_addr_text_cx7_down() -> None:
    links = p.parse_ip_addr(output("ip_addr_gb10_cx7_down.txt"))
    assert list(links) == [
        "lo",
        "enP7s7",
        "enp1s0f0np0",
        "enp1s0f1np1",
        "enP2p1s0f0np0",
        "enP2p1s0f1np1",
        "wlP9s9",
        "docker0",
    ]
    assert links["enp1s0f0np0"].state == "down"
    assert "NO-CARRIER" in links["enp1s0f0np0"].flags
    assert links["enp1s0f0np0"].ipv4 == []
    assert links["wlP9s9"].ipv4 == ["192.168.111.87/24"]
    assert links["enP7s7"].altnames == ["enP7p1s0"]
    assert links["enP7s7"].mac == "4c:bb:47:2f:fb:97"


def test_ip_addr_json_equals_text_for_the_same_node() -> None:
    text = p.parse_ip_addr(output("ip_addr_gb10_cx7_down.txt"))
    js = p.parse_ip_addr((FIXTURES / "constructed_ip_j_addr_gb10_cx7_down.json").read_text())
    assert list(js) == list(text)
    for name in js:
        assert (js[name].state, js[name].ipv4, js[name].mac) == (
            text[name].state,
            text[name].ipv4,
            text[name].mac,
        ), name


def test_net_speeds() -> None:
    speeds = p.parse_net_speeds(output("constructed_net_speeds_gb10_port1_up.txt"))
    assert speeds["enp1s0f1np1"] == 200000
    assert speeds["enp1s0f0np0"] is None
    assert speeds["lo"] is None


def test_build_interfaces_cx7_down_has_no_cluster_address() -> None:
    ports = [
        Interface(netdev=n, rdma_device=r, state="down")
        for r, n in [("rocep1s0f0", "enp1s0f0np0"), ("roceP2p1s0f1", "enP2p1s0f1np1")]
    ]
    links = p.parse_ip_addr(output("ip_addr_gb10_cx7_down.txt"))
    ifaces = p.build_interfaces(ports, links, {"enp1s0f0np0": None})
    node = NodeFacts(name="spark-fb97", address="192.168.111.87", interfaces=ifaces)
    assert node.connectx_up == []
    assert node.cluster_address is None
    assert all(i.speed_mbps is None and i.ipv4 is None for i in ifaces)


def test_build_interfaces_port1_up_with_link_local_and_speed() -> None:
    ports = p.parse_ibdev2netdev(output("ibdev2netdev_port1_up_playbook.txt"))
    links = p.parse_ip_addr((FIXTURES / "constructed_ip_j_addr_gb10_port1_up.json").read_text())
    speeds = p.parse_net_speeds(output("constructed_net_speeds_gb10_port1_up.txt"))
    ifaces = p.build_interfaces(ports, links, speeds)
    node = NodeFacts(name="hutch", address="192.168.1.163", interfaces=ifaces)
    assert [i.netdev for i in node.connectx_up] == ["enP2p1s0f1np1", "enp1s0f1np1"]
    by_name = {i.netdev: i for i in ifaces}
    assert by_name["enp1s0f1np1"].ipv4 == "169.254.127.30"
    assert by_name["enp1s0f1np1"].speed_mbps == 200000
    assert by_name["enP2p1s0f1np1"].ipv4 is None
    assert by_name["enp1s0f0np0"].speed_mbps is None
    assert node.cluster_address == "169.254.127.30"


def test_preferred_ipv4_routable_before_link_local() -> None:
    ports = [Interface(netdev="enp1s0f1np1", rdma_device="rocep1s0f1", state="up")]
    links = {
        "enp1s0f1np1": p.LinkAddrs(
            name="enp1s0f1np1", state="up", ipv4=["169.254.1.2/16", "192.168.100.10/24"]
        )
    }
    assert p.build_interfaces(ports, links)[0].ipv4 == "192.168.100.10"


def test_df_b1() -> None:
    assert p.parse_df_b1(output("constructed_df_b1_gb10.txt")) == 2526822035456
    assert p.parse_df_b1(output("constructed_df_b1_wrapped.txt")) == 1769037176832
    assert p.parse_df_b1("df: /nope: No such file or directory\n") is None


def test_hf_cache_scan() -> None:
    models = p.parse_hf_cache_scan(output("constructed_hf_cache_scan.txt"))
    assert [(m.repo_id, m.revision[:7] if m.revision else None) for m in models] == [
        ("Qwen/Qwen3-30B-A3B", "ad44e77"),
        ("Qwen/Qwen3-30B-A3B", "4c44647"),
        ("openai/gpt-oss-120b", "b5c939d"),
        ("gpt2", "607a30d"),
    ]
    qwen, old, oss, gpt2 = models
    assert qwen.size_bytes == 61078392832
    assert qwen.weight_bytes == 61064245248
    assert qwen.config is not None and qwen.config["num_key_value_heads"] == 4
    assert old.config is None and old.weight_bytes is None
    assert old.size_bytes == 0 and old.files == {}
    # Every complete file with its size, also below the snapshot's top folder; only the
    # top folder's config.json is the model's config.
    assert oss.files is not None and oss.files["original/config.json"] == 376
    assert qwen.files is not None and len(qwen.files) == 5
    assert qwen.files["model-00016-of-00016.safetensors"] == 57068956036
    # The index was cut by `head -c`: its total_size is still read.
    assert oss.weight_bytes == 65248815744
    assert oss.config is not None and oss.config["sliding_window"] == 128
    assert gpt2.weight_bytes is None and gpt2.config == {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "n_layer": 12,
        "n_head": 12,
        "n_embd": 768,
        "n_positions": 1024,
    }


def test_hf_cache_scan_empty_cache() -> None:
    assert p.parse_hf_cache_scan("") == []


def test_repo_id_from_cache_dir() -> None:
    assert p.repo_id_from_cache_dir("models--nvidia--GLM-5.3-Flash-FP4-Local") == (
        "nvidia/GLM-5.3-Flash-FP4-Local"
    )
    assert p.repo_id_from_cache_dir("models--gpt2") == "gpt2"
