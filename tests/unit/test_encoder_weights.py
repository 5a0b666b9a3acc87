"""The multimodal encoders' weight size, from config.json's vision_config and audio_config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.core.encoder_weights import (
    encoder_bytes,
    gemma4_audio_params,
    holds_audio_tower,
    unbacked_encoder_bytes,
    vision_encoder_params,
)
from spark_tui.core.fit import builds_audio_tower, weights_per_rank_bytes
from spark_tui.core.model_facts import HubFacts, facts_from_hf_config, facts_from_hub
from spark_tui.core.serve_args import parse_serve_args

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
    embeddings = 16 * 16 * 3 * 1152 + 2 * 10240 * 1152  # a position table per image axis
    expected = 27 * per_layer + embeddings + 1152 * 2816
    assert vision_encoder_params(vision, 2816) == expected
    facts = facts_from_hf_config("google/gemma-4-26B-A4B-it", config, None)
    assert facts.encoder_bytes == expected * 2  # bf16
    assert facts.sources["encoder_bytes"] == "config.json (vision_config)"


def test_unknown_encoders_give_no_size() -> None:
    assert vision_encoder_params({**SIGLIP, "model_type": "pixtral"}, 4096) is None
    assert encoder_bytes({"vision_config": {**SIGLIP, "num_hidden_layers": None}}, 1, 2) is None
    # Whether the checkpoint holds an audio tower is not known: no sum is given.
    assert (
        encoder_bytes({"vision_config": SIGLIP, "audio_config": {"hidden_size": 1}}, 1, 2) is None
    )
    # Held, but of a shape not known here: no sum either.
    held = ("model.audio_tower", "model.vision_tower")
    config = {"vision_config": SIGLIP, "audio_config": {"model_type": "whisper"}}
    assert encoder_bytes(config, 1, 2, held) is None
    assert encoder_bytes({"text_config": {}}, 1, 2) is None
    assert facts_from_hf_config("m", {"model_type": "llama"}, None).encoder_bytes is None


TENSORS = json.loads((FIXTURES / "gemma4_tensors_transformers.json").read_text())
AUDIO = {**TENSORS["audio"][0]["audio_config"]}


@pytest.mark.parametrize("built", TENSORS["audio"], ids=["defaults", "smaller", "unclipped"])
def test_gemma4_audio_tower_counts_what_transformers_builds(built: dict[str, object]) -> None:
    # transformers' own count (meta device) for each audio_config; the projector into the
    # text model is one matrix of output_proj_dims x the text width.
    audio = built["audio_config"]
    assert isinstance(audio, dict)
    assert gemma4_audio_params(audio, None) == built["parameters"]
    out = audio["output_proj_dims"]
    assert gemma4_audio_params(audio, 2816) == built["parameters"] + out * 2816
    assert gemma4_audio_params({**audio, "model_type": "whisper"}, 2816) is None
    assert gemma4_audio_params({**audio, "subsampling_conv_channels": [128]}, 2816) is None


def test_gemma4_vision_tower_is_within_its_norms_of_what_transformers_builds() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    built = TENSORS["modules"]
    whole = built["model.vision_tower"]["parameters"] + built["model.embed_vision"]["parameters"]
    derived = vision_encoder_params(config["vision_config"], 2816)
    assert derived is not None
    # Left out: the norms' weights (a few per layer), 0.02 % of the tower.
    assert 0 < whole - derived < 0.001 * whole


def test_an_audio_tower_counts_where_the_checkpoint_holds_it() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    vision = vision_encoder_params(config["vision_config"], 2816)
    audio = gemma4_audio_params(AUDIO, 2816)
    assert vision and audio
    with_audio = {**config, "audio_config": AUDIO}
    held = ("model.audio_tower", "model.embed_audio", "model.language_model")
    lacking = ("model.embed_audio", "model.language_model", "model.vision_tower")
    assert holds_audio_tower(held) and not holds_audio_tower(lacking)
    # --language-model-only skips what the checkpoint holds of both towers.
    assert encoder_bytes(with_audio, 2816, 2, held) == (vision + audio) * 2
    assert encoder_bytes(with_audio, 2816, 2, lacking) == vision * 2
    assert encoder_bytes(with_audio, 2816, 2, None) is None
    # What vLLM builds without a checkpoint tensor: the audio tower the checkpoint lacks.
    assert unbacked_encoder_bytes(with_audio, 2816, 2, lacking) == audio * 2
    assert unbacked_encoder_bytes(with_audio, 2816, 2, held) is None
    assert unbacked_encoder_bytes(config, 2816, 2, lacking) is None
    assert unbacked_encoder_bytes({**config, "audio_config": None}, 2816, 2, lacking) is None


def _hub(config: dict[str, object], modules: tuple[str, ...] | None) -> HubFacts:
    return HubFacts(
        repo_id="o/fine-tune",
        revision="a" * 40,
        config=config,
        weight_bytes=15 << 30,
        modules=modules,
    )


def test_hub_facts_add_the_audio_tower_a_checkpoint_lacks() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    config["audio_config"] = AUDIO
    audio = gemma4_audio_params(AUDIO, 2816)
    assert audio
    lacking = ("model.embed_vision", "model.language_model", "model.vision_tower")
    facts = facts_from_hub("o/fine-tune", _hub(config, lacking))
    assert facts.unbacked_encoder_bytes == audio * 2
    assert "no audio tower" in facts.sources["unbacked_encoder_bytes"]
    assert "o/fine-tune@aaaaaaaaaaaa" in facts.sources["unbacked_encoder_bytes"]
    assert facts.encoder_bytes == vision_encoder_params(config["vision_config"], 2816) * 2
    # Headers not read (an older cache entry): nothing is assumed either way.
    unknown = facts_from_hub("o/fine-tune", _hub(config, None))
    assert unknown.unbacked_encoder_bytes is None and unknown.encoder_bytes is None
    # The modules survive the control machine's cache.
    hub = _hub(config, lacking)
    assert HubFacts.from_dict(hub.to_dict()).modules == lacking
    assert HubFacts.from_dict({**hub.to_dict(), "modules": None}).modules is None


def test_each_rank_holds_the_whole_unbacked_tower_unless_vllm_skips_it() -> None:
    config = json.loads((FIXTURES / "constructed_gemma4_26b_a4b_config.json").read_text())
    config["audio_config"] = AUDIO
    lacking = ("model.embed_vision", "model.language_model", "model.vision_tower")
    facts = facts_from_hub("o/fine-tune", _hub(config, lacking))
    tower = facts.unbacked_encoder_bytes
    assert tower
    plain = facts_from_hub("o/fine-tune", _hub({k: v for k, v in config.items()}, None))

    def rank(extra: list[str], f: object = facts) -> int:
        args = parse_serve_args(["vllm", "serve", "m", *extra])
        got = weights_per_rank_bytes(f, args, {})  # type: ignore[arg-type]
        assert got is not None
        return got

    assert rank([]) - rank([], plain) == tower
    # Tensor parallel shards the checkpoint, not the tower transformers builds.
    assert rank(["-tp", "2"]) - rank(["-tp", "2"], plain) == tower
    # vLLM builds no tower with --language-model-only or no audio item allowed.
    assert not builds_audio_tower(parse_serve_args(["vllm", "serve", "m", "--language-model-only"]))
    for limits in ('{"audio": 0}', '{"image": 1, "audio": {"count": 0}}'):
        args = ["--limit-mm-per-prompt", limits]
        assert rank(args) == rank(args, plain)
    assert rank(["--limit-mm-per-prompt", '{"audio": 1}']) - rank([], plain) == tower
