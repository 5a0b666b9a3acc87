"""The combined probe command, run by a real /bin/sh: one section per probe command."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from spark_tui.remote import probe_commands as pc


def _run_combined(home: Path, path: str) -> dict[str, tuple[str, str, int]]:
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        ["/bin/sh", "-c", pc.COMBINED], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return pc.split_combined(proc.stdout)


def test_each_section_holds_its_commands_output_error_and_status(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A stand-in nvidia-smi that prints no final newline and fails: output and status kept.
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'no newline'\necho 'driver gone' >&2\nexit 9\n")
    smi.chmod(0o755)
    sections = _run_combined(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert list(sections) == list(pc.SECTIONS)
    assert sections["home"] == (f"{tmp_path}\n", "", 0)
    assert sections["nvidia_smi"] == ("no newline", "driver gone\n", 9)
    assert sections["arch"][0].strip() == os.uname().machine
    assert sections["meminfo"][0].startswith("MemTotal:")
    # ibdev2netdev is not on this PATH: the shell's "not found".
    assert sections["ibdev2netdev"][2] == 127


def test_render_is_what_split_reads_back() -> None:
    results = {"hostname": ("spark-1\n", "", 0), "hf_cache": ("", "du: denied\n\n", 1)}
    assert pc.split_combined(pc.render_combined(results)) == results
