"""Sentinel images against a REAL registry server (Debian's docker-registry, in the lab's own
namespace on the bridge): the lab's nodes reach it as ghcr.io (their /etc/hosts, plain HTTP)
and spark-tui's resolution reaches it through SPARK_TUI_REGISTRY_ENDPOINTS, so no public
registry is needed and none is reached.

The lab's own image is pushed from node 1 as the newest nightly (and as `latest`), a tiny
other image as an older nightly; node 2 holds a local build under the newest nightly's tag.
`plan` names the newest nightly and its digest; `check` names, before any launch, node 1
(which lacks it) and node 2 (another build); `launch` pulls it on both nodes from the
registry, and both end with the registry's digest; `status` and `history show` say tag and
digest."""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from labkit import (
    claim,
    cli,
    docker_client,
    footprint,
    lab_guard,
    leftovers,
    release,
    sweep_stale_test_labs,
    unique_config,
)

from spark_tui.core.images import NIGHTLY_REPOSITORY
from spark_tui.sim.lab import Lab
from spark_tui.sim.lab.image import LAB_IMAGE

lab_guard()

pytestmark = pytest.mark.lab

SENTINEL = f"{NIGHTLY_REPOSITORY}:latest"
NEWEST = f"{NIGHTLY_REPOSITORY}:2026-12-02"
OLDER = f"{NIGHTLY_REPOSITORY}:2026-11-28"
BASE_RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "glm-5.3-flash.yaml"


def _tiny_image_tar(data: bytes = b"another build\n") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _push(client: object, ref: str) -> None:
    repo, _, tag = ref.rpartition(":")
    out = client.api.push(repo, tag=tag, stream=True, decode=True)  # type: ignore[attr-defined]
    errors = [e["error"] for e in out if "error" in e]
    assert not errors, errors


@pytest.fixture(scope="module")
def registry_lab() -> Iterator[Lab]:
    """This module's own 2-node lab with its registry, the nightlies pushed to it."""
    sweep_stale_test_labs()
    cfg = unique_config(2, memory_gb=128, pace=0.05, token_scale=0.02, registry=True)
    claim(cfg)
    lab = Lab(cfg)
    left: list[str] = []
    try:
        lab.up()
        claim(cfg)
        fp = footprint(lab)
        head, worker = docker_client(lab, 1, timeout=300), docker_client(lab, 2, timeout=300)
        try:
            # The older nightly: another runnable build (the lab image and one more layer).
            made = head.api.create_container(LAB_IMAGE, command=["true"])
            head.api.commit(
                made["Id"], NIGHTLY_REPOSITORY, "2026-11-28", changes=["LABEL nightly=2026-11-28"]
            )
            head.api.remove_container(made["Id"])
            _push(head, OLDER)
            head.api.tag(LAB_IMAGE, NIGHTLY_REPOSITORY, "2026-12-02")
            _push(head, NEWEST)
            _push(head, SENTINEL)
            # Node 1 keeps the layers but not the tag: the launch must pull it.
            head.api.remove_image(NEWEST)
            # Node 2: a local build under the newest nightly's tag (no registry digest), and
            # another build of the older nightly than the registry's.
            worker.api.import_image_from_data(
                _tiny_image_tar(), repository=NIGHTLY_REPOSITORY, tag="2026-12-02"
            )
            worker.api.import_image_from_data(
                _tiny_image_tar(b"yet another build\n"),
                repository=NIGHTLY_REPOSITORY,
                tag="2026-11-28",
            )
            head.api.remove_image(OLDER)  # node 1 pulls it from the registry
        finally:
            head.close()
            worker.close()
        yield lab
    finally:
        left = lab.down(quiet=True)
        if not left:
            release(cfg)
    assert not left, f"lab down left: {left}"
    assert not leftovers(fp), f"lab down left: {leftovers(fp)}"


def test_launch_pulls_the_newest_nightly_on_every_node_from_the_registry(
    registry_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = registry_lab
    monkeypatch.setenv("SPARK_TUI_REGISTRY_ENDPOINTS", lab.cfg.registry_endpoints)
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    inventory = tmp_path / "lab.yaml"
    lab.write_inventory(inventory)
    data = yaml.safe_load(BASE_RECIPE.read_text())
    data["container"] = SENTINEL
    recipe = tmp_path / "nightly-glm.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    where = ["--inventory", str(inventory)]
    head, worker = (n.name for n in lab.nodes)

    # The digest the registry gives the newest nightly: what node 1 pushed.
    client = docker_client(lab, 1)
    try:
        pushed = client.images.get(LAB_IMAGE)
        digest = next(d.split("@", 1)[1] for d in pushed.attrs["RepoDigests"])
    finally:
        client.close()

    plan = cli("plan", str(recipe), *where)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"image     {NEWEST}  {digest}  (the newest nightly for {SENTINEL})" in plan.stdout

    check = cli("check", str(recipe), *where)
    short = digest.removeprefix("sha256:")[:12]
    assert f"{head} does not have {NEWEST} (the launch pulls it)" in check.stdout, check.stdout
    assert re.search(
        rf"{worker} has another {re.escape(NEWEST)} \(no digest, the registry's is {short}\)",
        check.stdout,
    ), check.stdout

    launch = cli("launch", str(recipe), *where, "--wait", "--force", timeout=600)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    for index in (1, 2):
        client = docker_client(lab, index)
        try:
            got = client.images.get(NEWEST)
            assert f"{NIGHTLY_REPOSITORY}@{digest}" in got.attrs["RepoDigests"]
            running = [c.image.tags for c in client.containers.list()]
            assert running and all(NEWEST in tags for tags in running), running
        finally:
            client.close()

    status = cli("status", *where)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"  image   {NEWEST}  {digest}  (the newest nightly for {SENTINEL})" in status.stdout

    listed = json.loads(cli("history", "--json").stdout)
    launch_id = next(r["id"] for r in listed if r["kind"] == "launch")
    shown = cli("history", "show", launch_id)
    assert f"image {NEWEST} {digest} (the newest nightly for {SENTINEL})" in shown.stdout
    run = json.loads(cli("history", "show", launch_id, "--json").stdout)["run"]
    assert run["image_resolved"] == {
        "requested": SENTINEL,
        "image": NEWEST,
        "tag": "2026-12-02",
        "digest": digest,
    }
    assert set(run["image_digests"].values()) == {digest}

    stopped = cli("stop", *where)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def test_a_plain_tag_that_differs_between_nodes_starts_no_rank(
    registry_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pinned nightly is used as written: node 1 pulls the registry's, node 2 keeps its own
    # build under the same tag; the launch names both before any rank starts.
    lab = registry_lab
    monkeypatch.setenv("SPARK_TUI_REGISTRY_ENDPOINTS", lab.cfg.registry_endpoints)
    monkeypatch.setenv("SPARK_TUI_DATA_DIR", str(tmp_path / "data"))
    inventory = tmp_path / "lab.yaml"
    lab.write_inventory(inventory)
    data = yaml.safe_load(BASE_RECIPE.read_text())
    data["container"] = OLDER
    recipe = tmp_path / "pinned-glm.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    head, worker = (n.name for n in lab.nodes)

    launch = cli("launch", str(recipe), "--inventory", str(inventory), "--force", timeout=600)
    out = launch.stdout + launch.stderr
    assert launch.returncode != 0, out
    assert f"image {OLDER} differs between nodes: {worker} has sha256:" in out
    assert f"the head {head} has sha256:" in out and "no rank was started" in out
    for index in (1, 2):
        client = docker_client(lab, index)
        try:
            assert client.containers.list(all=True) == []
        finally:
            client.close()
    # Node 1's copy is the registry's older nightly: pulled, not found.
    client = docker_client(lab, 1)
    try:
        assert client.images.get(OLDER).attrs["RepoDigests"]
    finally:
        client.close()
