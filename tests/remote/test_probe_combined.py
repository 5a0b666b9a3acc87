"""The combined probe command, run by a real /bin/sh: one section per probe command, and the
Hugging Face cache scan over a real cache folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from spark_tui.remote import parsers
from spark_tui.remote import probe_commands as pc

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _run(command: str, home: Path, path: str) -> str:
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _run_combined(home: Path, path: str) -> dict[str, tuple[str, str, int]]:
    return pc.split_combined(_run(pc.COMBINED, home, path))


def _logging_bin(tmp_path: Path, log: Path, names: list[str]) -> Path:
    """A folder of programs that note their name in `log`, then run the system's program."""
    folder = tmp_path / "logged"
    folder.mkdir()
    for name in names:
        real = shutil.which(name, path=SYSTEM_PATH)
        assert real is not None, name
        wrapper = folder / name
        wrapper.write_text(f'#!/bin/sh\necho {name} >>"{log}"\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    return folder


def _blob(hub: Path, repo: str, data: bytes) -> str:
    blobs = hub / repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    name = f"{len(list(blobs.iterdir())):040x}"
    (blobs / name).write_bytes(data)
    return name


def _snapshot(hub: Path, repo: str, rev: str, files: dict[str, bytes | None]) -> None:
    """A snapshot as huggingface_hub leaves it: links to blobs (None: a blob not downloaded)."""
    snap = hub / repo / "snapshots" / rev
    snap.mkdir(parents=True)
    for rel, data in files.items():
        target = _blob(hub, repo, data) if data is not None else "f" * 40
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(*[".."] * (rel.count("/") + 2), "blobs", target))


def _cache(home: Path) -> Path:
    hub = home / ".cache" / "huggingface" / "hub"
    config = json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2})
    # An index longer than the scan reads: its metadata comes first, the cut hides shard names.
    weight_map = {
        f"model.layers.{i}.weight": "model-00001-of-00002.safetensors" for i in range(3000)
    }
    # Past the cut: only a read of the whole index says the checkpoint holds this encoder.
    weight_map["model.audio_tower.conv.weight"] = "model-00002-of-00002.safetensors"
    index = json.dumps(
        {"metadata": {"total_size": 1234}, "weight_map": weight_map}, indent=2
    ).encode()
    assert len(index) > 65536
    _snapshot(
        hub,
        "models--org--tiny",
        "a" * 40,
        {
            "config.json": config.encode(),
            "model.safetensors.index.json": index,
            "model-00001-of-00002.safetensors": b"x" * 1000,
            "model-00002-of-00002.safetensors": None,  # still downloading
            "sub/config.json": b'{"not": "the model config"}',
        },
    )
    _snapshot(hub, "models--org--tiny", "b" * 40, {})
    _snapshot(
        hub, "models--gpt2", "c" * 40, {"config.json": b"not json", "model.safetensors": b"w"}
    )
    return hub


def test_each_section_holds_its_commands_output_error_and_status(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A stand-in nvidia-smi that prints no final newline and fails: output and status kept.
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'no newline'\necho 'driver gone' >&2\nexit 9\n")
    smi.chmod(0o755)
    sections = _run_combined(tmp_path, f"{bin_dir}:{SYSTEM_PATH}")
    assert sorted(sections) == sorted(pc.SECTIONS)
    assert sections["home"] == (f"{tmp_path}\n", "", 0)
    assert sections["nvidia_smi"] == ("no newline", "driver gone", 9)
    assert sections["arch"][0].strip() == os.uname().machine
    assert sections["meminfo"][0].startswith("MemTotal:")
    assert sections["docker_host"] == ("\n", "", 0)
    # ibdev2netdev is not on this PATH: the shell's "not found".
    assert sections["ibdev2netdev"][2] == 127
    assert "not found" in sections["ibdev2netdev"][1]


def test_the_combined_probe_starts_a_process_only_where_a_command_needs_one(
    tmp_path: Path,
) -> None:
    # A busy node (or a lab of many nodes on few cores) pays for every process: no temporary
    # files, no shell per section, no `cat` per interface, one `find`, one `awk` and one `head`
    # for the whole Hugging Face cache, builtins for what /proc says (no hostname, uname, cat), one
    # nvidia-smi and one ip.
    _cache(tmp_path)
    log = tmp_path / "started"
    tools = ["hostname", "uname", "cat", "ip", "df", "find", "awk", "head", "du", "cut", "sh"]
    tools += ["mktemp", "rm"]
    logged = _logging_bin(tmp_path, log, tools)
    for name in ("nvidia-smi", "ibdev2netdev"):
        stub = logged / name
        stub.write_text(f'#!/bin/sh\necho {name} >>"{log}"\necho {name} output\n')
        stub.chmod(0o755)
    sections = _run_combined(tmp_path, f"{logged}:{SYSTEM_PATH}")
    assert sections["nvidia_smi"] == ("nvidia-smi output\n", "", 0)
    assert len(parsers.parse_hf_cache_scan(sections["hf_cache"][0])) == 3
    started = sorted(log.read_text().split())
    assert started == sorted(
        ["nvidia-smi", "ibdev2netdev", "ip", "df"]  # one of each: the node's own tools
        + ["cat", "find", "awk", "head"]  # cat: the side of the pipe
        + ["sh"]  # the command's own `sh -c`, as the login shell starts it
    )


def test_render_is_what_split_reads_back() -> None:
    results = {"hostname": ("spark-1\n", "", 0), "hf_cache": ("", "du: denied\n\nfind: x", 1)}
    assert pc.split_combined(pc.render_combined(results)) == results


def test_the_cache_scan_finds_every_snapshot_its_complete_files_and_its_model_files(
    tmp_path: Path,
) -> None:
    _cache(tmp_path)
    scan = _run(pc.HF_CACHE_SCAN, tmp_path, SYSTEM_PATH)
    models = {(m.repo_id, (m.revision or "")[:1]): m for m in parsers.parse_hf_cache_scan(scan)}
    assert sorted(models) == [("gpt2", "c"), ("org/tiny", "a"), ("org/tiny", "b")]
    tiny, empty, gpt2 = models["org/tiny", "a"], models["org/tiny", "b"], models["gpt2", "c"]
    assert tiny.files is not None
    # The link to a blob not downloaded yet is not a file of the snapshot.
    assert sorted(tiny.files) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model.safetensors.index.json",
        "sub/config.json",
    ]
    assert tiny.files["model-00001-of-00002.safetensors"] == 1000
    assert tiny.size_bytes == sum(tiny.files.values())
    assert tiny.config == {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}
    # The index was cut after 64 KiB: its metadata is read, the shard names filled in.
    assert tiny.weight_bytes == 1234
    assert tiny.shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    # The modules its tensors belong to, from the whole index (None where there is no index).
    assert tiny.modules == ["model.audio_tower", "model.layers"]
    assert empty.modules is None and gpt2.modules is None
    assert empty.files == {} and empty.size_bytes == 0 and empty.config is None
    assert gpt2.config is None and gpt2.files == {"config.json": 8, "model.safetensors": 1}
    # The same inside the combined probe.
    combined = _run_combined(tmp_path, SYSTEM_PATH)["hf_cache"]
    assert parsers.parse_hf_cache_scan(combined[0]) == parsers.parse_hf_cache_scan(scan)


def test_the_cache_scan_of_a_node_without_a_cache_prints_nothing(tmp_path: Path) -> None:
    assert _run(pc.HF_CACHE_SCAN, tmp_path, SYSTEM_PATH) == ""
    assert _run(pc.HF_CACHE_SCAN, tmp_path / "missing", SYSTEM_PATH) == ""
