"""The simulated Docker API's archive upload (`put_archive`), as the launch uses it for mods."""

from __future__ import annotations

import io
import tarfile

import docker
import docker.errors
import pytest
from test_docker_api_sdk import IMAGE, Forwarded, fwd  # noqa: F401  (the fixture)

from spark_tui.ops.mods import pack


def _tar(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def test_put_archive_lands_in_the_container_and_its_paths_are_mapped(
    fwd: Forwarded,  # noqa: F811
    tmp_path,
) -> None:
    mod = tmp_path / "fix"
    mod.mkdir()
    (mod / "run.sh").write_text("#!/bin/sh\necho from-the-mod\n")
    data = pack(mod, "/workspace/mods/fix")

    def run(client: docker.DockerClient) -> tuple[bool, bytes]:
        c = client.containers.create(
            IMAGE,
            entrypoint=["/bin/sh", "-c"],
            command=["sh /workspace/mods/fix/run.sh; cat /workspace/mods/fix/run.sh"],
        )
        ok = client.api.put_archive(c.id, "/", data)
        c.start()
        c.wait(timeout=30)
        out = c.logs()
        c.remove(force=True)
        return ok, out

    ok, out = await fwd.sdk(run)
    assert ok and out.decode().splitlines() == ["from-the-mod", "#!/bin/sh", "echo from-the-mod"]


async def test_put_archive_refuses_a_member_outside_and_a_missing_folder(
    fwd: Forwarded,  # noqa: F811
) -> None:
    def run(client: docker.DockerClient) -> list[str]:
        c = client.containers.create(IMAGE, command=["true"])
        errors = []
        for path, data in (("/", _tar("../../escape", b"x")), ("/nowhere", _tar("a", b"x"))):
            with pytest.raises(docker.errors.APIError) as info:
                client.api.put_archive(c.id, path, data)
            errors.append(str(info.value.explanation))
        c.remove(force=True)
        return errors

    escape, missing = await fwd.sdk(run)
    assert "could not extract the archive" in escape
    assert "Could not find the file /nowhere" in missing
