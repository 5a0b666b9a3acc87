"""The probe reads with shell builtins what `hostname`, `uname -m` and `cat /proc/meminfo`
print, runs one `ip` for addresses and neighbours and one `nvidia-smi`: the same facts as the
tools' own outputs, fewer processes. Run by a real /bin/sh on this machine, and over SSH."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mini_sshd import MiniServer

from spark_tui.remote import parsers
from spark_tui.remote import probe_commands as pc
from spark_tui.remote.probe import probe_node
from spark_tui.remote.ssh import NodeConnection

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFERENCE_TABLE = FIXTURES / "nvidia_smi_gb10_driver580_142.txt"


def _sh(command: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/"}
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=30
    )


def test_builtins_print_what_hostname_uname_and_cat_print() -> None:
    assert _sh(pc.HOSTNAME).stdout == _sh("hostname").stdout
    assert _sh(pc.ARCH).stdout == _sh("uname -m").stdout
    ours = parsers.parse_meminfo(_sh(pc.MEMINFO).stdout)
    theirs = parsers.parse_meminfo(_sh("cat /proc/meminfo").stdout)
    assert ours.total == theirs.total and ours.total
    # Every line, in order (the values of a live machine move between two reads).
    keys = [line.split(":")[0] for line in _sh(pc.MEMINFO).stdout.splitlines()]
    assert keys == [line.split(":")[0] for line in Path("/proc/meminfo").read_text().splitlines()]


def test_arch_falls_back_to_uname_where_the_kernel_has_no_arch_file(tmp_path: Path) -> None:
    # A kernel without /proc/sys/kernel/arch: the same script with a missing file in its place.
    script = pc.ARCH.replace("/proc/sys/kernel/arch", str(tmp_path / "missing"))
    res = _sh(script)
    assert (res.stdout, res.stderr, res.returncode) == (_sh("uname -m").stdout, "", 0)


def test_one_ip_prints_the_addresses_and_the_neighbours_as_two_ip_commands_do() -> None:
    res = _sh(pc.IP_JSON)
    assert res.returncode == 0, res.stderr
    addr, neigh = parsers.split_ip_batch(res.stdout)
    assert sorted(parsers.parse_ip_addr(addr)) == sorted(
        parsers.parse_ip_addr(_sh(pc.IP_ADDR_JSON).stdout)
    )
    assert isinstance(json.loads(neigh), list)
    assert neigh.strip().startswith("[")


def test_split_ip_batch_on_gb10_outputs() -> None:
    addr = (FIXTURES / "constructed_ip_j_addr_gb10_port1_up.json").read_text().strip()
    neigh = (FIXTURES / "constructed_ip_j_neigh_gb10_port1_up.json").read_text().strip()
    assert parsers.split_ip_batch(f"{addr}\n{neigh}\n") == (addr + "\n", neigh + "\n")
    # The neighbours' command failed after the addresses': what came is kept.
    assert parsers.split_ip_batch(addr + "\n") == (addr + "\n", "")
    assert parsers.split_ip_batch("") == ("", "")
    with pytest.raises(ValueError):
        parsers.split_ip_batch('Object "-j" is unknown, try "ip help".\n')


def _stand_in_smi(folder: Path, table: str, query: str) -> Path:
    """An nvidia-smi printing `table` (no arguments) or `query`, noting each call in a log."""
    folder.mkdir()
    (folder / "table.txt").write_text(table)
    (folder / "query.txt").write_text(query)
    log = folder / "calls"
    smi = folder / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >>"{log}"\n'
        f'if [ $# -eq 0 ]; then exec cat "{folder}/table.txt"; fi\n'
        f'exec cat "{folder}/query.txt"\n'
    )
    smi.chmod(0o755)
    return log


def _reference_table() -> str:
    # The reference sample with its "$ nvidia-smi" prompt line and source comment left out.
    lines = REFERENCE_TABLE.read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith(("#", "$"))) + "\n"


@pytest.mark.parametrize("cut_short", [False, True])
async def test_one_nvidia_smi_unless_the_table_cut_the_gpu_name_short(
    tmp_path: Path, servers: list[MiniServer], monkeypatch: pytest.MonkeyPatch, cut_short: bool
) -> None:
    table = _reference_table()
    full = "NVIDIA GB10"
    if cut_short:  # as the table shows a long name: "NVIDIA RTX 6000 Ada Gene..."
        full = "NVIDIA RTX 6000 Ada Generation"
        table = table.replace("NVIDIA GB10            ", "NVIDIA RTX 6000 Ada Gene...")
        assert "Gene..." in table
    log = _stand_in_smi(tmp_path / "bin", table, f"{full}, 580.142, [N/A], [N/A]\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    known = tmp_path / "known_hosts"
    known.write_text(servers[0].known_hosts_line())
    conn = NodeConnection(servers[0].node("spark-a", known), ssh_config=None)
    await conn.connect()
    try:
        facts = await probe_node(conn, docker=False)
    finally:
        await conn.close()
    calls = log.read_text().splitlines()
    assert len(calls) == (2 if cut_short else 1)
    assert facts.gpu_name == full
    assert (facts.driver_version, facts.cuda_version) == ("580.142", "13.0")
