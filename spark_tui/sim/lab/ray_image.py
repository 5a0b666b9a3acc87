"""Real Ray in the lab: Ray from the package registries, layered on the lab's engine image.

- `<cache>/ray-<version>/site/`: `pip install --target` of `ray==<version>` (with its
  dependencies) for the Python of the lab's root filesystem, plus the shared libraries its
  native binaries link (libstdc++, libgcc_s: the root filesystem only carries python3's).
  Built once (about a minute), then reused.
- `spark-tui-lab/engine-ray:<version>`: made per lab as the engine image is (the cached root
  filesystem and the simulated engine as `vllm`, with the engine image's environment), plus
  Ray at /opt/ray and `ray` on the PATH; imported into the first node's dockerd, saved once
  and loaded into the others, so every node has the same image id.

`python -m spark_tui.sim.lab.ray_image` builds (or finds) the site cache and prints what it
did; with `--state DIR` it also builds the image into that running lab. CI runs the first
form before the lab tests; the Ray lab tests run the second through `ensure_image`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_tui.core.errors import OperationFailed, SparkError
from spark_tui.sim.lab import image as lab_image
from spark_tui.sim.lab.config import DEFAULT_CACHE_DIR
from spark_tui.sim.lab.image import LAB_IMAGE, describe_python, ldd, locked, python_candidates
from spark_tui.sim.lab.run import run

RAY_VERSION = "2.60.0"
RAY_IMAGE = f"spark-tui-lab/engine-ray:{RAY_VERSION}"
_COMPLETE = ".spark-tui-complete"
_RAY_CLI = '#!/bin/sh\n# ray of the spark-tui lab (real Ray from PyPI).\nexec python3 -m ray.scripts.scripts "$@"\n'
# The engine image a Ray image was made from: a new lab (new engine files) makes a new one.
_FROM_LABEL = "spark-tui.lab-engine"

Say = Callable[[str], None]
# Parts of the Ray wheel that `ray start` and a driver never load (Java, C++ API, the ML
# libraries): left out of the image, which is then about a third smaller to build and load.
_UNUSED = ("jars", "cpp", "rllib", "tune", "train", "serve", "data", "air")


def site_dir(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    return cache_dir / f"ray-{RAY_VERSION}" / "site"


def _rootfs_python() -> dict[str, str]:
    for exe in python_candidates():
        info = describe_python(exe)
        if info is not None:
            return info
    raise OperationFailed(
        "no python3 found for the lab's root filesystem",
        "install python3 (apt-get install python3)",
    )


def ensure_site(cache_dir: Path = DEFAULT_CACHE_DIR, say: Say | None = None) -> tuple[Path, float]:
    """Ray installed (once) for the root filesystem's Python: (site dir, seconds spent)."""
    say = say or (lambda _m: None)
    site = site_dir(cache_dir)
    started = time.monotonic()
    with locked(cache_dir):
        if (site / _COMPLETE).exists():
            return site, 0.0
        version = _rootfs_python()["version"]
        site.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="site-", dir=site.parent))
        try:
            say(f"installing ray=={RAY_VERSION} for Python {version} (once, about a minute)")
            cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            cmd += ["--target", str(tmp), "--python-version", version, "--only-binary=:all:"]
            proc = run([*cmd, f"ray=={RAY_VERSION}"], check=False, timeout=1200)
            if proc.returncode != 0:
                raise OperationFailed(
                    f"pip could not install ray=={RAY_VERSION}: {proc.stderr.strip()[-400:]}",
                    "check that PyPI is reachable (pip config) and run again",
                )
            shutil.rmtree(tmp / "bin", ignore_errors=True)  # entry points of another python
            (tmp / _COMPLETE).write_text(RAY_VERSION + "\n")
            shutil.rmtree(site, ignore_errors=True)
            tmp.rename(site)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return site, round(time.monotonic() - started, 2)


def _native(site: Path) -> list[str]:
    """Ray's native programs and extension modules: the files whose libraries must come along."""
    ray = site / "ray"
    found = [str(p) for p in ray.rglob("*.so")]
    found += [str(ray / "core/src/ray/raylet/raylet"), str(ray / "core/src/ray/gcs/gcs_server")]
    return [f for f in found if os.path.isfile(f)]


def _image_tar(cache_dir: Path, site: Path, out: Path) -> None:
    """The lab's engine root filesystem and engine, plus Ray, its command and libraries."""
    root, _base, _cached, _seconds = lab_image.rootfs(cache_dir)
    lab_image.write_image_tar(root, out)
    with tarfile.open(out, "a", format=tarfile.GNU_FORMAT) as tar:
        data = _RAY_CLI.encode()
        info = tarfile.TarInfo("./usr/local/bin/ray")
        info.size, info.mode, info.mtime = len(data), 0o755, int(time.time())
        tar.addfile(info, io.BytesIO(data))
        have = set(tar.getnames())
        for lib in sorted(ldd(_native(site))):
            name = "." + lib
            if name not in have:
                tar.add(os.path.realpath(lib), arcname=name, filter=_owned)
        tar.add(site, arcname="./opt/ray", filter=_keep)


def _owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = info.name.split("/")
    if _COMPLETE in parts or "__pycache__" in parts:
        return None
    if len(parts) >= 4 and parts[2] == "ray" and parts[3] in _UNUSED:
        return None
    return _owned(info)


def _changes(engine_env: list[str], engine_id: str) -> list[str]:
    """The engine image's environment (the lab's pace and memory), Ray on PYTHONPATH."""
    env = dict(item.split("=", 1) for item in engine_env if "=" in item)
    env["PYTHONPATH"] = "/opt/spark-tui:/opt/ray"
    return [f"ENV {k}={v}" for k, v in env.items()] + [
        "WORKDIR /",
        f"LABEL {_FROM_LABEL}={engine_id}",
    ]


def _api(socket: Path) -> Any:
    import docker

    return docker.APIClient(base_url=f"unix://{socket}", timeout=600)


def ensure_image(
    sockets: list[Path], cache_dir: Path = DEFAULT_CACHE_DIR, say: Say | None = None
) -> dict[str, Any]:
    """The Ray image in every given dockerd (imported into the first, loaded into the others).

    Idempotent: an image made from the lab's current engine image is left alone. Returns
    what was done and how long it took.
    """
    say = say or (lambda _m: None)
    site, site_seconds = ensure_site(cache_dir, say)
    started = time.monotonic()
    first = _api(sockets[0])
    engine = first.inspect_image(LAB_IMAGE)
    engine_id = engine["Id"]
    try:
        have = first.inspect_image(RAY_IMAGE)
    except Exception:  # docker.errors.ImageNotFound
        have = None
    labels = ((have or {}).get("Config") or {}).get("Labels") or {}
    built = False
    if labels.get(_FROM_LABEL) != engine_id:
        say(f"making {RAY_IMAGE} on {sockets[0]}")
        repo, tag = RAY_IMAGE.rsplit(":", 1)
        with tempfile.TemporaryDirectory(dir=cache_dir) as d:
            tar_path = Path(d) / "ray-image.tar"
            _image_tar(cache_dir, site, tar_path)
            try:
                first.import_image(
                    src=str(tar_path),
                    repository=repo,
                    tag=tag,
                    changes=_changes((engine.get("Config") or {}).get("Env") or [], engine_id),
                )
            except Exception as exc:  # docker.errors.APIError and connection errors
                raise OperationFailed(
                    f"importing {RAY_IMAGE} failed: {exc}", "run `spark-tui lab down`, then again"
                ) from exc
        built = True
    image_id = first.inspect_image(RAY_IMAGE)["Id"]
    missing = [s for s in sockets[1:] if not _has(s, image_id)]
    if missing:
        with tempfile.TemporaryDirectory(dir=cache_dir) as d:
            saved = Path(d) / "ray-image-save.tar"
            with open(saved, "wb") as f:
                for chunk in first.get_image(RAY_IMAGE):
                    f.write(chunk)
            for sock in missing:
                with open(saved, "rb") as f:
                    for _ in _api(sock).load_image(f):
                        pass
    return {
        "image": RAY_IMAGE,
        "image_id": image_id,
        "built": built,
        "loaded_into": len(missing),
        "site_seconds": site_seconds,
        "image_seconds": round(time.monotonic() - started, 2),
    }


def _has(socket: Path, image_id: str) -> bool:
    try:
        return bool(_api(socket).inspect_image(RAY_IMAGE)["Id"] == image_id)
    except Exception:  # not there
        return False


def main(argv: list[str] | None = None) -> int:
    """Build the Ray site cache; with --state, the image into that running lab too."""
    ap = argparse.ArgumentParser(prog="python -m spark_tui.sim.lab.ray_image")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    ap.add_argument("--state", type=Path, help="a running lab's state dir: build its Ray image")
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        site, seconds = ensure_site(args.cache_dir, say)
        out: dict[str, Any] = {"site": str(site), "site_seconds": seconds}
        if args.state is not None:
            from spark_tui.sim.lab import Lab

            lab = Lab.load(args.state)
            if lab is None:
                raise OperationFailed(f"no lab at {args.state}", "run `spark-tui lab up` first")
            out.update(ensure_image([n.docker_socket for n in lab.nodes], args.cache_dir, say))
    except SparkError as exc:
        print(f"error: {exc.message}\nremedy: {exc.remedy}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
