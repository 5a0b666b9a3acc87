"""The simulated GB10 outputs, checked against the real samples they are modelled on."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from spark_tui.sim.nodes import gb10
from spark_tui.sim.nodes.scenario import GIB, Scenario

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _meminfo(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+):\s+(\d+)", text, re.M)}


def _sample(name: str) -> list[str]:
    return [line.rstrip("\n") for line in (FIXTURES / name).read_text().splitlines()[1:]]


def test_nvidia_smi_matches_the_gb10_layout_and_says_not_supported() -> None:
    out = gb10.nvidia_smi(datetime(2025, 12, 6, 13, 53, 3), []).splitlines()
    real = _sample("nvidia_smi_gb10_no_procs.txt")
    assert out[0] == real[0]  # the date line, padded as nvidia-smi pads it
    # Every line but the power/temperature reading is the real one, character for character.
    assert [line for i, line in enumerate(out) if i != 9] == [
        line for i, line in enumerate(real) if i != 9
    ]
    assert "| Not Supported          |" in out[9]
    assert len(out[9]) == len(real[9]) == 91


def test_nvidia_smi_lists_running_engines_in_the_process_table() -> None:
    procs = [gb10.GpuProcess(214921, "python3", 110_000)]
    out = gb10.nvidia_smi(datetime(2025, 10, 3, 23, 16, 52), procs).splitlines()
    row = next(line for line in out if "214921" in line)
    real = next(line for line in _sample("nvidia_smi_gb10_idle_with_procs.txt") if "214921" in line)
    assert len(row) == len(real)
    assert row.index("214921") == real.index("214921")
    assert row.endswith("110000MiB |")
    assert "No running processes found" not in "\n".join(out)


def test_query_csv_reports_memory_as_na_like_gb10() -> None:
    assert gb10.nvidia_smi_query() == "NVIDIA GB10, 580.95.05, [N/A], [N/A]\n"


def test_meminfo_of_a_128_gb_node_has_the_real_totals() -> None:
    node = Scenario().node(1)
    info = _meminfo(gb10.meminfo(gb10.memory_state(node, 0, 0)))
    assert info["MemTotal"] == 125513720  # free_kib_gb10.txt
    assert info["MemFree"] == 118621120
    assert info["Buffers"] + info["Cached"] + info["SReclaimable"] == 2728844
    assert abs(info["MemAvailable"] - 120425308) < 120425308 * 0.001
    # The kernel's layout: "Name:" padded to 16 columns, the value right-aligned in 8.
    assert gb10.meminfo(gb10.memory_state(node, 0, 0)).startswith("MemTotal:       125513720 kB\n")


def test_meminfo_of_a_64_gb_node_is_proportional() -> None:
    node = Scenario(memory_gb=64).node(1)
    info = _meminfo(gb10.meminfo(gb10.memory_state(node, 0, 0)))
    assert info["MemTotal"] == 125513720 // 2
    assert info["MemFree"] < info["MemAvailable"] < info["MemTotal"]


def test_page_cache_raises_cached_and_lowers_free_but_stays_available() -> None:
    node = Scenario(page_cache_gb=30).node(1)
    idle = _meminfo(gb10.meminfo(gb10.memory_state(node, 0, 0)))
    held = _meminfo(gb10.meminfo(gb10.memory_state(node, node.page_cache_bytes, 0)))
    assert held["Cached"] - idle["Cached"] == 30 * GIB // 1024
    assert idle["MemFree"] - held["MemFree"] == 30 * GIB // 1024
    # Linux counts reclaimable page cache as available; GB10's CUDA does not.
    assert abs(held["MemAvailable"] - idle["MemAvailable"]) < 1024 * 1024


def test_memory_held_by_engines_lowers_free_and_available_and_evicts_cache() -> None:
    node = Scenario(page_cache_gb=100).node(1)
    engines = int(0.87 * node.mem_total_bytes)
    mem = gb10.memory_state(node, node.page_cache_bytes, engines)
    idle = gb10.memory_state(node, 0, 0)
    assert mem.available < idle.available - engines // 1024 + 1024 * 1024
    assert mem.free > 0 and mem.cached < idle.cached + 100 * GIB // 1024
    assert mem.free + mem.cached + mem.buffers + mem.sreclaimable + engines // 1024 <= mem.total


def test_free_uses_procps_columns() -> None:
    out = gb10.free(gb10.memory_state(Scenario().node(1), 0, 0)).splitlines()
    real = _sample("free_kib_gb10.txt")[1:]
    ends = [[m.end() for m in re.finditer(r"\S+", line)] for line in out]
    real_ends = [[m.end() for m in re.finditer(r"\S+", line)] for line in real]
    assert ends == real_ends
    assert out[1].split()[1] == "125513720"


def test_connectx_names_differ_between_neighbouring_nodes() -> None:
    s = Scenario(nodes=2)
    one, two = gb10.ibdev2netdev(s.node(1)), gb10.ibdev2netdev(s.node(2))
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in one
    assert "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" in one
    assert "rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)" in two
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)" in two
    # Same shape as the real two-node sample: four ports, "port 1 ==> netdev (State)".
    real = [line for line in _sample("ibdev2netdev_port0_up_two_nodes.txt") if "==>" in line]
    assert sorted(two.splitlines()) == sorted(real[:4])


def test_ip_addr_json_puts_the_node_address_on_its_cabled_port() -> None:
    s = Scenario(nodes=2, base_address="127.0.0.11")
    links = {e["ifname"]: e for e in json.loads(gb10.ip_addr_json(s.node(2)))}
    assert list(links)[:3] == ["lo", "enP7s7", "enp1s0f0np0"]
    up = links["enp1s0f0np0"]
    assert up["operstate"] == "UP" and "LOWER_UP" in up["flags"]
    inet = [a for a in up["addr_info"] if a["family"] == "inet"]
    assert inet[0]["local"] == "127.0.0.12" and inet[0]["prefixlen"] == 24
    down = links["enp1s0f1np1"]
    assert down["operstate"] == "DOWN" and "NO-CARRIER" in down["flags"]
    assert down["addr_info"] == []
    # The twin port on the second PCIe domain is up with a link-local address only.
    assert [a["family"] for a in links["enP2p1s0f0np0"]["addr_info"]] == ["inet6"]


def test_ip_neigh_lists_the_other_nodes_on_the_cabled_port() -> None:
    s = Scenario(nodes=3, base_address="127.0.0.11")
    neigh = json.loads(gb10.ip_neigh_json(s.node(1), s.all_nodes()))
    assert [(n["dst"], n["dev"]) for n in neigh] == [
        ("127.0.0.12", "enp1s0f1np1"),
        ("127.0.0.13", "enp1s0f1np1"),
    ]
    peer_links = {e["ifname"]: e for e in json.loads(gb10.ip_addr_json(s.node(2)))}
    assert neigh[0]["lladdr"] == peer_links["enp1s0f0np0"]["address"]


def test_net_speeds_reports_200g_on_up_connectx_ports() -> None:
    speeds = dict(
        (line.split(" ", 1) + [""])[:2] for line in gb10.net_speeds(Scenario().node(1)).splitlines()
    )
    assert speeds["enp1s0f1np1"] == "200000"
    assert speeds["enP2p1s0f1np1"] == "200000"
    assert speeds["enp1s0f0np0"] == "-1"
    assert speeds["lo"] == ""
    assert list(speeds) == sorted(speeds, key=str.encode)  # the shell glob's order


def test_mac_addresses_are_unique_across_nodes() -> None:
    s = Scenario(nodes=4)
    macs = [d.mac for n in s.all_nodes() for d in gb10.netdevs(n) if not d.loopback]
    assert len(macs) == len(set(macs))


def test_link_sample_reads_like_a_gb10_and_rises_with_the_engines_bytes() -> None:
    from spark_tui.core.link import rates
    from spark_tui.remote.link_sample import parse_sample

    node = Scenario(nodes=2).all_nodes()[0]
    cabled, down = gb10.primary_netdev(node), "enP2p1s0f0np0"
    wanted = [cabled, down, "eth9"]
    mem = gb10.memory_state(node, 0, 0)
    text, status = gb10.link_sample(node, mem, wanted, 1000.0, 0)
    # grep's status: eth9 is not there; the down port's speed reads -1, as the probe sees it.
    assert status == 2
    before = parse_sample(text, wanted)
    assert before.uptime_s == 1000.0 and before.mem_total == mem.total * 1024
    assert before.missing == ("eth9",)
    assert {c.interface: c.speed_mbps for c in before.interfaces} == {cabled: 200000, down: -1}
    later, _ = gb10.link_sample(node, mem, wanted, 1002.0, 5 * 10**9)
    busy, idle = rates(before, parse_sample(later, wanted))
    assert busy.rx_bytes_per_s == busy.tx_bytes_per_s == 2.5e9 + gb10.IDLE_LINK_BYTES_PER_S
    assert busy.share is not None and 0.09 < busy.share < 0.11
    assert idle.rx_bytes_per_s == 0  # a port with no cable moves nothing
