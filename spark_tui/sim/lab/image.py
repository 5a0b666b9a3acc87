"""The lab's container image: a small root filesystem with python3 that carries the simulated
engine as `vllm`, built locally with no registry and tagged with every bundled recipe's image.

The root filesystem is made from the host's own python3 (its interpreter, standard library and
the shared libraries `ldd` names, plus busybox for /bin/sh): about a second, cached under the
cache directory. When that python cannot be used, or `SPARK_TUI_LAB_BASE=debootstrap` is set,
`debootstrap --variant=minbase --include=python3` builds a Debian root instead (about 60 to 90 s,
cached the same way). The engine's files are added fresh on every `lab up`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import spark_tui
from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.sim.lab import shims
from spark_tui.sim.lab.preflight import which
from spark_tui.sim.lab.run import run

LAB_IMAGE = "spark-tui-lab/engine:latest"
# Bumped when the way the root filesystem is made changes, so stale caches are not reused.
_BUILD_VERSION = "1"
_EXCLUDED = {
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "site-packages",
    "dist-packages",
}
_VLLM = '#!/bin/sh\n# vllm of the spark-tui lab: the simulated engine.\nexec python3 -m spark_tui.sim.engine "$@"\n'
_PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"


@dataclass
class ImageResult:
    """What `build_and_load` made: the image id, its tags and how long each step took."""

    image_id: str
    tags: list[str]
    base: str
    rootfs_seconds: float
    rootfs_cached: bool
    load_seconds: float


# --- which images ---------------------------------------------------------------------------


def recipe_images() -> list[str]:
    """The container image of every bundled recipe (sorted, without duplicates)."""
    from spark_tui.core.errors import RecipeError
    from spark_tui.core.recipe_loader import bundled_recipes_dir, load_recipe_file

    images: set[str] = set()
    folder = bundled_recipes_dir()
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    for path in files:
        try:
            image = load_recipe_file(path, source="bundled").container
        except RecipeError:
            continue
        # A digest reference cannot be given as a tag to a locally built image.
        if image and "@" not in image:
            images.add(image.strip())
    return sorted(images)


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` -> (repo, tag), leaving a registry's `host:port` alone."""
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = ref.rpartition(":")
        return repo, tag
    return ref, "latest"


# --- the root filesystem --------------------------------------------------------------------


@contextmanager
def locked(cache_dir: Path) -> Iterator[None]:
    import fcntl  # Unix only, like the lab

    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def python_candidates() -> list[str]:
    import sys

    cands = ["/usr/bin/python3", os.path.realpath(sys.executable)]
    return [c for i, c in enumerate(cands) if os.path.exists(c) and c not in cands[:i]]


def describe_python(exe: str) -> dict[str, str] | None:
    code = (
        "import json, os, sys, sysconfig; print(json.dumps({"
        "'exe': os.path.realpath(sys.executable), "
        "'stdlib': sysconfig.get_paths()['stdlib'], "
        "'dynload': sysconfig.get_config_var('DESTSHARED') or '', "
        "'version': '%d.%d' % sys.version_info[:2]}))"
    )
    proc = run([exe, "-S", "-c", code], check=False, timeout=15)
    if proc.returncode != 0:
        return None
    info: dict[str, str] = json.loads(proc.stdout)
    return info


def _stamp(path: str) -> str:
    st = os.stat(path)
    return f"{path}:{st.st_size}:{int(st.st_mtime)}"


def ldd(paths: list[str]) -> set[str]:
    libs: set[str] = set()
    for chunk in range(0, len(paths), 64):
        proc = run(["ldd", *paths[chunk : chunk + 64]], check=False, timeout=30)
        for line in proc.stdout.splitlines():
            m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s+(/\S+)\s+\(", line)
            if m:
                libs.add(m.group(1))
    return libs


def _copy_file(src: str, root: Path) -> None:
    dest = root / src.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dest)


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _EXCLUDED or n.startswith("config-")}


def skeleton(root: Path) -> None:
    for d in ("bin", "etc", "tmp", "root", "proc", "sys", "dev", "opt", "var/tmp", "usr/local/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "var" / "tmp").chmod(0o1777)
    (root / "etc" / "passwd").write_text(_PASSWD)
    (root / "etc" / "group").write_text(_GROUP)


def add_busybox(root: Path) -> list[str]:
    busybox = which("busybox")
    if busybox is None:
        raise SparkError("busybox is not installed", "apt-get install -y busybox-static")
    _copy_file(busybox, root)
    target = root / busybox.lstrip("/")
    if target != root / "bin" / "busybox":
        shutil.move(target, root / "bin" / "busybox")
    applets = run([busybox, "--list"]).stdout.split()
    for applet in applets:
        link = root / "bin" / applet
        if not link.exists() and applet != "busybox":
            link.symlink_to("busybox")
    return [busybox]


def _build_hostpy(info: dict[str, str], root: Path) -> None:
    skeleton(root)
    binaries = add_busybox(root)
    exe = info["exe"]
    _copy_file(exe, root)
    for alias in ("/usr/bin/python3", "/usr/local/bin/python3"):
        link = root / alias.lstrip("/")
        if alias != exe and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(exe)
    stdlib = info["stdlib"]
    shutil.copytree(stdlib, root / stdlib.lstrip("/"), symlinks=True, ignore=_ignore)
    dynload = info["dynload"]
    if dynload and os.path.isdir(dynload) and not (root / dynload.lstrip("/")).exists():
        shutil.copytree(dynload, root / dynload.lstrip("/"), symlinks=True)
    sos = [str(p) for p in (root / dynload.lstrip("/")).glob("*.so")] if dynload else []
    host_sos = ["/" + str(Path(p).relative_to(root)) for p in sos]
    for lib in sorted(ldd([exe, *binaries, *host_sos])):
        if not (root / lib.lstrip("/")).exists():
            _copy_file(lib, root)


def _check_rootfs(root: Path) -> bool:
    """Does python3 start in the new root and import what the engine needs?"""
    code = "import asyncio, json, http.server, socket, hashlib, ssl, argparse; print('ok')"
    proc = run(["chroot", root, "/usr/bin/python3", "-c", code], check=False, timeout=30)
    return proc.returncode == 0 and proc.stdout.strip() == "ok"


def _debootstrap_mirror() -> str:
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        m = re.search(r"^URIs:\s*(\S+/debian)\s*$", sources.read_text(), re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def _build_debootstrap(root: Path) -> None:
    if which("debootstrap") is None:
        raise SparkError("debootstrap is not installed", "apt-get install -y debootstrap")
    run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=python3",
            "bookworm",
            root,
            _debootstrap_mirror(),
        ],
        timeout=600,
    )
    shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (root / "usr" / "local" / "bin").mkdir(parents=True, exist_ok=True)


def rootfs(cache_dir: Path) -> tuple[Path, str, bool, float]:
    """The cached root filesystem (built when missing): (path, base, was_cached, seconds)."""
    started = time.monotonic()
    want = os.environ.get("SPARK_TUI_LAB_BASE", "hostpy")
    with locked(cache_dir):
        if want != "debootstrap":
            for exe in python_candidates():
                info = describe_python(exe)
                if info is None:
                    continue
                parts = [_BUILD_VERSION, _stamp(info["exe"]), info["stdlib"]]
                busybox = which("busybox")
                parts.append(_stamp(busybox) if busybox else "-")
                key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
                path = cache_dir / f"rootfs-hostpy-{key}"
                if path.is_dir():
                    return path, "host python " + info["version"], True, 0.0
                tmp = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
                try:
                    _build_hostpy(info, tmp)
                    if _check_rootfs(tmp):
                        tmp.rename(path)
                        return path, "host python " + info["version"], False, _since(started)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        path = cache_dir / f"rootfs-debootstrap-bookworm-{_BUILD_VERSION}"
        if path.is_dir():
            return path, "debootstrap bookworm", True, 0.0
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
        try:
            _build_debootstrap(tmp)
            if not _check_rootfs(tmp):
                raise OperationFailed(
                    "the debootstrap root filesystem has no working python3",
                    f"remove {cache_dir} and run `spark-tui lab up` again",
                )
            tmp.rename(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path, "debootstrap bookworm", False, _since(started)


def _since(t: float) -> float:
    return round(time.monotonic() - t, 2)


# --- the engine overlay and the tar ---------------------------------------------------------


def engine_source() -> Path:
    """The simulated engine's package directory (standard library only)."""
    engine = Path(spark_tui.__file__).resolve().parent / "sim" / "engine"
    if not (engine / "__init__.py").exists():
        raise SparkError(
            f"the simulated engine is missing at {engine}",
            "reinstall spark-tui (pip install -e .)",
        )
    return engine


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if "__pycache__" in info.name.split("/") and info.name.startswith("./opt/"):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o755) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def write_image_tar(root: Path, out: Path) -> None:
    """The root filesystem plus, fresh, the engine as `vllm` and the GB10 shims."""
    pkg = Path(spark_tui.__file__).resolve().parent
    engine = engine_source()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(root, arcname=".", filter=_root_owned)
        for d in ("./opt/spark-tui", "./opt/spark-tui/spark_tui", "./opt/spark-tui/spark_tui/sim"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        tar.add(pkg / "__init__.py", arcname="./opt/spark-tui/spark_tui/__init__.py")
        tar.add(pkg / "sim" / "__init__.py", arcname="./opt/spark-tui/spark_tui/sim/__init__.py")
        tar.add(engine, arcname="./opt/spark-tui/spark_tui/sim/engine", filter=_root_owned)
        _add_text(tar, "./usr/local/bin/vllm", _VLLM)
        _add_text(tar, "./usr/local/bin/nvidia-smi", shims.NVIDIA_SMI)
        _add_text(tar, "./usr/local/bin/ibdev2netdev", shims.IBDEV2NETDEV)


def image_changes(env: dict[str, str]) -> list[str]:
    """The Dockerfile-like `--change` lines of the imported image."""
    base = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": "/opt/spark-tui",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "SPARK_SIM_LAB": "1",
    }
    return [f"ENV {k}={v}" for k, v in {**base, **env}.items()] + ["WORKDIR /"]


def _api(socket: Path) -> Any:
    import docker

    return docker.APIClient(base_url=f"unix://{socket}", timeout=120)


def _load(socket: Path, saved: Path) -> None:
    with open(saved, "rb") as f:
        for _ in _api(socket).load_image(f):
            pass


def _tag(socket: Path, image_id: str, tags: list[str]) -> None:
    api = _api(socket)
    for ref in tags[1:]:
        r, t = split_ref(ref)
        api.tag(image_id, r, t)
    got = api.inspect_image(LAB_IMAGE)["Id"]
    if got != image_id:
        raise OperationFailed(
            f"the lab image differs on {socket}: {got} vs {image_id}",
            "run `spark-tui lab down` and try again",
        )


def build_and_load(
    cache_dir: Path, work_dir: Path, sockets: list[Path], env: dict[str, str]
) -> ImageResult:
    """Build the image once, import it into the first node's dockerd and load the same image
    (same id) into the others, then tag it with the lab's name and every recipe image."""
    root, base, cached, rootfs_seconds = rootfs(cache_dir)
    started = time.monotonic()
    tar_path = work_dir / "engine-image.tar"
    write_image_tar(root, tar_path)
    repo, tag = split_ref(LAB_IMAGE)
    first = _api(sockets[0])
    try:
        first.import_image(src=str(tar_path), repository=repo, tag=tag, changes=image_changes(env))
    except Exception as exc:  # docker.errors.APIError and connection errors
        raise OperationFailed(
            f"importing the lab image failed: {exc}", "run `spark-tui lab down` and try again"
        ) from exc
    finally:
        tar_path.unlink(missing_ok=True)
    image_id = first.inspect_image(LAB_IMAGE)["Id"]
    tags = [LAB_IMAGE, *[i for i in recipe_images() if i != LAB_IMAGE]]
    if len(sockets) > 1:
        saved = work_dir / "engine-image-save.tar"
        with open(saved, "wb") as f:
            for chunk in first.get_image(LAB_IMAGE):
                f.write(chunk)
        try:
            with ThreadPoolExecutor(max_workers=min(4, len(sockets) - 1)) as pool:
                list(pool.map(lambda s: _load(s, saved), sockets[1:]))
        finally:
            saved.unlink(missing_ok=True)
    for socket in sockets:
        _tag(socket, image_id, tags)
    return ImageResult(
        image_id=image_id,
        tags=tags,
        base=base,
        rootfs_seconds=rootfs_seconds,
        rootfs_cached=cached,
        load_seconds=_since(started),
    )
