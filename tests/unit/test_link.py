"""Link and memory samples: the command, its parser on real output, rates and the summary."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from spark_tui.core.errors import InputError
from spark_tui.core.link import (
    InterfaceCounters,
    LinkSummary,
    NodeReading,
    counter_delta,
    fmt_gbs,
    fmt_share,
    rank_interfaces,
    rates,
)
from spark_tui.remote.link_sample import interfaces_of, parse_sample, sample_command

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_rank_interfaces_from_the_plans_network_env() -> None:
    env = {
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
        "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
        "UCX_NET_DEVICES": "enp1s0f1np1",
    }
    assert rank_interfaces(env) == ["enp1s0f1np1"]


def test_rank_interfaces_lists_exact_and_exclusions() -> None:
    env = {"NCCL_SOCKET_IFNAME": "=enP2p1s0f1np1,enp1s0f1np1", "GLOO_SOCKET_IFNAME": "eth0"}
    assert rank_interfaces(env) == ["enP2p1s0f1np1", "enp1s0f1np1", "eth0"]
    # An exclusion list names no interface to watch; nonsense never reaches a command.
    assert rank_interfaces({"NCCL_SOCKET_IFNAME": "^docker,lo"}) == []
    assert rank_interfaces({"NCCL_SOCKET_IFNAME": "x;rm -rf /", "GLOO_SOCKET_IFNAME": ""}) == []


def test_sample_command_quotes_and_refuses_odd_names() -> None:
    cmd = sample_command(["enp1s0f1np1", "enP2p1s0f1np1"])
    words = shlex.split(cmd)
    assert words[:5] == ["grep", "-H", ".", "/proc/uptime", "/proc/meminfo"]
    assert "/sys/class/net/enP2p1s0f1np1/statistics/tx_bytes" in words
    assert interfaces_of(cmd) == ["enp1s0f1np1", "enP2p1s0f1np1"]
    with pytest.raises(InputError) as err:
        sample_command(["eth0; reboot"])
    assert "ibdev2netdev" in err.value.remedy


def test_parse_real_linux_sample() -> None:
    # Captured on Linux: eth0's speed is -1 (virtual), lo's speed gives EINVAL (stderr only).
    text = (FIXTURES / "link_sample_linux_eth0_lo_1.txt").read_text()
    reading = parse_sample(text, ["eth0", "lo", "enp1s0f1np1"])
    assert reading.uptime_s == pytest.approx(11670.76)
    assert reading.mem_total == 24683792 * 1024
    assert reading.mem_available is not None and reading.mem_available > 0
    eth0, lo = reading.interfaces
    assert (eth0.interface, eth0.rx_bytes, eth0.speed_mbps) == ("eth0", 2078117537, -1)
    assert lo.speed_mbps is None and lo.rx_bytes == lo.tx_bytes > 0
    assert reading.missing == ("enp1s0f1np1",)


def test_rates_between_two_real_samples() -> None:
    ifs = ["eth0", "lo"]
    before = parse_sample((FIXTURES / "link_sample_linux_eth0_lo_1.txt").read_text(), ifs)
    after = parse_sample((FIXTURES / "link_sample_linux_eth0_lo_2.txt").read_text(), ifs)
    eth0, lo = rates(before, after)
    dt = after.uptime_s - before.uptime_s  # type: ignore[operator]
    assert eth0.rx_bytes_per_s == pytest.approx((eth0.rx_bytes - 2078117537) / dt)
    assert lo.rx_bytes_per_s is not None and lo.rx_bytes_per_s > 0
    # No speed (-1, EINVAL): no share.
    assert eth0.speed_bytes_per_s is None and eth0.share is None


def test_parse_gb10_sample_and_share_of_200g() -> None:
    text = (FIXTURES / "constructed_link_sample_gb10.txt").read_text()
    ifs = ["enp1s0f1np1", "enP2p1s0f1np1"]
    first = parse_sample(text, ifs)
    assert first.mem_total == 125513720 * 1024 and first.mem_available == 120425308 * 1024
    cx, down = first.interfaces
    assert cx.speed_mbps == 200000 and down.speed_mbps is None
    # 2.5 GB/s received over a 200 Gb/s (25 GB/s) link one second later: 10 %.
    later = NodeReading(
        first.uptime_s + 1.0,  # type: ignore[operator]
        first.mem_total,
        first.mem_available,
        (InterfaceCounters(cx.interface, cx.rx_bytes + 2_500_000_000, cx.tx_bytes, 200000),),
    )
    (r,) = rates(first, later)
    assert r.rx_bytes_per_s == pytest.approx(2.5e9) and r.tx_bytes_per_s == 0
    assert r.share == pytest.approx(0.10)
    assert fmt_gbs(r.rx_bytes_per_s) == "2.50" and fmt_share(r.share) == "10%"


def test_counter_wrap_and_reset() -> None:
    speed = 200000 * 1e6 / 8
    # A 32-bit counter wrapped: 100 bytes before the top, 900 after it.
    assert counter_delta(2**32 - 100, 900, 1.0, speed) == 1000
    # A 64-bit one.
    assert counter_delta(2**64 - 10, 10, 2.0, speed) == 10
    # Reset (interface re-created): faster than the link could go, so not a rate.
    assert counter_delta(5 * 10**12, 1000, 1.0, speed) is None
    # Unknown speed: a counter going down cannot be told from a reset.
    assert counter_delta(2**32 - 100, 900, 1.0, None) is None
    assert counter_delta(1, 2, 0.0, speed) is None


def test_summary_peak_mean_bytes_and_min_memory() -> None:
    s = LinkSummary()

    def reading(t: float, rx: int, tx: int, avail: int) -> NodeReading:
        return NodeReading(t, 100, avail, (InterfaceCounters("cx", rx, tx, 200000),))

    readings = [
        reading(0, 0, 0, 90),
        reading(1, 2 * 10**9, 10**9, 70),
        reading(2, 3 * 10**9, 10**9, 80),
    ]
    for a, b in zip(readings, readings[1:], strict=False):
        s.add("spark-a", b.mem_total, b.mem_available, rates(a, b))
    (fig,) = s.links()
    assert (fig.node, fig.interface, fig.samples) == ("spark-a", "cx", 2)
    assert fig.rx_peak_gbs == pytest.approx(2.0) and fig.rx_mean_gbs == pytest.approx(1.5)
    assert fig.tx_peak_gbs == pytest.approx(1.0) and fig.tx_mean_gbs == pytest.approx(0.5)
    assert fig.peak_share == pytest.approx(2e9 / 25e9)
    assert (fig.rx_bytes, fig.tx_bytes) == (10**9, 0)
    (mem,) = s.memory()
    assert (mem.total, mem.min_available, mem.samples) == (100, 70, 2)


def test_watch_prints_each_rank_interface_and_a_missing_one() -> None:
    from spark_tui.commands.watch import render
    from spark_tui.core.link import InterfaceRate
    from spark_tui.service import events as ev

    rate = InterfaceRate("enp1s0f1np1", 2.5e9, 1.25e9, 25e9, 10, 10)
    first = InterfaceRate("enp1s0f1np1", None, None, None)
    sample = ev.LinkSample("spark-a", 100, 50, (rate,), ("enP2p1s0f1np1",))
    assert render(sample) == [
        "link  spark-a  enp1s0f1np1  rx 2.50 GB/s  tx 1.25 GB/s  10% of 25 GB/s",
        "link  spark-a  enP2p1s0f1np1: no such interface on the node",
    ]
    assert render(ev.LinkSample("spark-a", 100, 50, (first,))) == [
        "link  spark-a  enp1s0f1np1  rx – GB/s  tx – GB/s  – of ? GB/s"
    ]
