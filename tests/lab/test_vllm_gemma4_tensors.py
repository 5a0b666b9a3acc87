"""Gemma 4's encoders as the transformers of the real-vLLM lab's venv builds them.

The fit's sizes of Gemma 4's audio and vision towers, and the checkpoint counts the fit
accuracy tests rebuild, come from `gemma4_tensors_transformers.json`: this prints it again
with the transformers that vLLM 0.32's CPU build installs and compares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from labkit import lab_guard

from spark_tui.core.encoder_weights import gemma4_audio_params, vision_encoder_params
from spark_tui.sim.lab import vllm_image

pytestmark = [pytest.mark.lab, pytest.mark.vllm]
lab_guard()

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def test_gemma4_towers_and_tensors_are_what_transformers_builds() -> None:
    build = vllm_image.ensure(say=lambda m: print(m, file=sys.stderr, flush=True))
    config = FIXTURES / "constructed_gemma4_26b_a4b_config.json"
    script = ROOT / "benchmarks" / "gemma4_tensors.py"
    run = subprocess.run(
        [str(Path(build.venv) / "bin" / "python"), str(script), str(config)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    now = json.loads(run.stdout)
    kept = json.loads((FIXTURES / "gemma4_tensors_transformers.json").read_text())
    print(f"transformers {now['transformers']} (the fixture's: {kept['transformers']})")
    for key in ("audio", "modules", "language_model_layer_0"):
        assert now[key] == kept[key], key
    for tower in now["audio"]:
        assert gemma4_audio_params(tower["audio_config"], None) == tower["parameters"]
    vision = json.loads(config.read_text())["vision_config"]
    built = now["modules"]["model.vision_tower"]["parameters"]
    built += now["modules"]["model.embed_vision"]["parameters"]
    derived = vision_encoder_params(vision, 2816)
    assert derived is not None and 0 < built - derived < 0.001 * built  # the norms
