"""`spark-tui lab up|down|status`: simulated Sparks as network namespaces with real sshd and
dockerd (Linux, root), for trying and testing the real SSH and Docker paths."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spark_tui.core.errors import EXIT_FAILED, EXIT_OK, InputError
from spark_tui.sim.lab import Lab, LabConfig, require_lab_host
from spark_tui.sim.lab.config import (
    DEFAULT_CACHE_DIR,
    DEFAULT_PREFIX,
    DEFAULT_STATE_DIR,
    DEFAULT_SUBNET,
)


def _say(msg: str) -> None:
    print(msg, flush=True)


def run(args: argparse.Namespace) -> int:
    require_lab_host()
    state_dir = Path(args.state_dir) if args.state_dir else DEFAULT_STATE_DIR
    if args.action == "build":
        return _build(args)
    if args.action == "up":
        return _up(args, state_dir)
    if args.action == "down":
        return _down(state_dir)
    return _status(state_dir, getattr(args, "json", False))


def _up(args: argparse.Namespace, state_dir: Path) -> int:
    if not args.inventory:
        raise InputError(
            "lab up needs --inventory FILE", "pass --inventory lab.yaml (it is written for you)"
        )
    cfg = LabConfig(
        nodes=args.nodes,
        memory_gb=args.memory_gb,
        page_cache_gb=getattr(args, "page_cache_gb", 0.0) or 0.0,
        pace=getattr(args, "pace", None),
        prefix=getattr(args, "prefix", None) or DEFAULT_PREFIX,
        subnet=getattr(args, "subnet", None) or DEFAULT_SUBNET,
        state_dir=state_dir,
        engine=getattr(args, "engine", None) or "sim",
        registry=bool(getattr(args, "registry", False)),
        ring=bool(getattr(args, "ring", False)),
        cache_dir=Path(args.cache_dir) if getattr(args, "cache_dir", None) else DEFAULT_CACHE_DIR,
    )
    engine = "real vLLM (CPU build)" if cfg.engine == "vllm" else "the simulated engine"
    _say(
        f"lab up: {cfg.nodes} simulated Sparks (GB10, {cfg.memory_gb} GB) running {engine} "
        f"in {state_dir}"
    )
    lab = Lab(cfg, say=_say)
    info = lab.up()
    inventory = Path(args.inventory)
    lab.write_inventory(inventory)
    for node in info.nodes:
        _say(
            f"  {node['name']:<12} {node['address']:<12} {node['ifname']:<15} "
            f"ssh root@{node['address']}  docker {node['docker_socket']}"
        )
    _say(f"lab up in {info.seconds:.1f} s; inventory written to {inventory}")
    recipe = lab.write_recipe(inventory.parent)
    if recipe is not None:
        _say(f"  recipe for the lab's model written to {recipe}")
        _say(f"  and for its MoE model to {lab.write_recipe(inventory.parent, moe=True)}")
    if info.registry:
        _say(
            f"  registry: {info.registry['url']} stands in for ghcr.io and Docker Hub; "
            f"resolve sentinel images there with: export SPARK_TUI_REGISTRY_ENDPOINTS="
            f"{info.registry['endpoints']}"
        )
    _say(f"  next: spark-tui probe --inventory {inventory}")
    if recipe is not None:
        _say(f"  then: spark-tui launch {recipe} --inventory {inventory} --wait")
    _say(f"  done: spark-tui lab down --state-dir {state_dir}")
    return EXIT_OK


def _build(args: argparse.Namespace) -> int:
    """Build (or find in the cache) the lab image of `--engine` without bringing a lab up."""
    if (getattr(args, "engine", None) or "sim") != "vllm":
        raise InputError(
            "lab build makes the real-vLLM image; the stand-in's is made by `lab up` in a second",
            "pass --engine vllm",
        )
    from spark_tui.sim.lab import vllm_image

    argv = ["--cache-dir", args.cache_dir] if getattr(args, "cache_dir", None) else []
    return vllm_image.main(argv + (["--json"] if getattr(args, "json", False) else []))


def _down(state_dir: Path) -> int:
    # Only what a lab's own state names is removed: without it, guessing (the default
    # prefix) could take down another lab's namespaces.
    lab = Lab.load(state_dir, say=_say)
    if lab is None:
        _say(f"lab down: no lab state in {state_dir} (state.json): nothing removed")
        _say("  a lab is taken down with the --state-dir its `lab up` used")
        return EXIT_OK
    left = lab.down()
    return EXIT_OK if not left else EXIT_FAILED


def _status(state_dir: Path, as_json: bool) -> int:
    lab = Lab.load(state_dir)
    if lab is None:
        print(f"no lab is up (no state in {state_dir})", file=sys.stderr)
        return EXIT_FAILED
    rows = lab.status()
    if as_json:
        print(json.dumps([r.__dict__ | {"healthy": r.healthy} for r in rows], indent=2))
    else:
        for r in rows:
            flags = " ".join(
                f"{k} {'up' if v else 'DOWN'}"
                for k, v in (("ns", r.keeper), ("sshd", r.sshd), ("dockerd", r.dockerd))
            )
            print(f"{r.name:<12} {r.address:<12} {r.ifname:<15} {flags}  containers {r.containers}")
    return EXIT_OK if rows and all(r.healthy for r in rows) else EXIT_FAILED
