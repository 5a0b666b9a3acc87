"""The archive a mod travels in: members named by their container path, parents first."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from spark_tui.core.errors import OperationFailed
from spark_tui.ops.mods import pack


def test_a_mod_folder_is_packed_under_its_container_path(tmp_path: Path) -> None:
    mod = tmp_path / "fix"
    (mod / "patches").mkdir(parents=True)
    (mod / "run.sh").write_text("#!/bin/sh\n")
    (mod / "patches" / "a.diff").write_text("--- a\n")
    with tarfile.open(fileobj=io.BytesIO(pack(mod, "/workspace/mods/fix"))) as tar:
        names = tar.getnames()
        assert tar.getmember("workspace").isdir() and tar.getmember("workspace/mods").isdir()
    assert names[:2] == ["workspace", "workspace/mods"]
    assert set(names[2:]) == {
        "workspace/mods/fix",
        "workspace/mods/fix/run.sh",
        "workspace/mods/fix/patches",
        "workspace/mods/fix/patches/a.diff",
    }


def test_a_file_copy_and_bad_destinations(tmp_path: Path) -> None:
    f = tmp_path / "tmpl.jinja"
    f.write_text("x")
    with tarfile.open(fileobj=io.BytesIO(pack(f, "/opt/t.jinja"))) as tar:
        assert tar.getnames() == ["opt", "opt/t.jinja"]
    for dest in ("relative/path", "/workspace/../etc"):
        with pytest.raises(OperationFailed, match="not an absolute path inside"):
            pack(f, dest)
    with pytest.raises(OperationFailed, match="is gone from the control machine"):
        pack(tmp_path / "gone", "/x")
