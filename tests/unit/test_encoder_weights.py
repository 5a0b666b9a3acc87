"""The multimodal encoders' weight size, from config.json's vision_config."""

from __future__ import annotations

import json
from pathlib import Path

from spark_tui.core.encoder_weights import encoder_bytes, vision_encoder_params
from spark_tui.core.model_facts import facts_from_hf_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SIGLIP = {
    "model_type": "siglip_vision_model",
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "patch_size": 14,
    "image_size": 896,
}


def test_siglip_tower_counts_layers_embeddings_and_projector() -> None:
    per_layer = 4 * 1152 * 1152 + 2 * 1152 * 4304  # q, k, v, o and fc1, fc2
    embeddings = 14 * 14 * 3 * 1152 + (896 // 14) ** 2 * 1152  # patches, one position each
    assert vision_encoder_params(SIGLIP, 3840) == 27 * per_layer + embeddings + 1152 * 3840
    assert vision_encoder_params(SIGLIP, None) == 27 * per_layer + embeddings


def test_gemma4_tower_has_a_gated_mlp_and_its_own_head_width() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    vision = config["vision_config"]
    per_layer = 4 * 1152 * (16 * 72) + 3 * 1152 * 4304  # gate, up and down
    embeddings = 16 * 16 * 3 * 1152 + 10240 * 1152
    expected = 27 * per_layer + embeddings + 1152 * 2816
    assert vision_encoder_params(vision, 2816) == expected
    facts = facts_from_hf_config("google/gemma-4-26B-A4B-it", config, None)
    assert facts.encoder_bytes == expected * 2  # bf16
    assert facts.sources["encoder_bytes"] == "config.json (vision_config)"


def test_unknown_encoders_give_no_size() -> None:
    assert vision_encoder_params({**SIGLIP, "model_type": "pixtral"}, 4096) is None
    assert encoder_bytes({"vision_config": {**SIGLIP, "num_hidden_layers": None}}, 1, 2) is None
    # An audio tower's size is not derived: the sum would be short of what is skipped.
    assert (
        encoder_bytes({"vision_config": SIGLIP, "audio_config": {"hidden_size": 1}}, 1, 2) is None
    )
    assert encoder_bytes({"text_config": {}}, 1, 2) is None
    assert facts_from_hf_config("m", {"model_type": "llama"}, None).encoder_bytes is None
