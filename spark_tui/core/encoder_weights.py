"""The weights of a multimodal model's encoders, which `--language-model-only` leaves unloaded.

With `--language-model-only` vLLM builds only the language model of a multimodal
checkpoint: the vision (and audio) tower and the projector that feeds it into the text
model are skipped at load, so a rank holds the checkpoint less those tensors. Their size
follows from config.json's `vision_config`: a stack of transformer layers (attention of
`num_attention_heads x head_dim`, an MLP of `intermediate_size`), the patch and position
embeddings, and the projection to the text model's width.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Encoders whose MLP shape is known, by config model_type: weight matrices per MLP.
# SigLIP / CLIP use fc1 + fc2; Gemma 4's vision tower a gated MLP (gate, up, down).
MLP_MATRICES = {
    "siglip_vision_model": 2,
    "siglip2_vision_model": 2,
    "clip_vision_model": 2,
    "gemma4_vision": 3,
}
IMAGE_CHANNELS = 3


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def vision_encoder_params(vision: Mapping[str, Any], text_hidden: int | None) -> int | None:
    """Parameters of a vision tower and its projector, or None for an encoder not known here."""
    matrices = MLP_MATRICES.get(str(vision.get("model_type") or ""))
    hidden = _int(vision.get("hidden_size"))
    inner = _int(vision.get("intermediate_size"))
    layers = _int(vision.get("num_hidden_layers"))
    heads = _int(vision.get("num_attention_heads"))
    patch = _int(vision.get("patch_size"))
    if None in (matrices, hidden, inner, layers, heads, patch):
        return None
    assert matrices and hidden and inner and layers and heads and patch
    width = heads * (_int(vision.get("head_dim")) or hidden // heads)
    per_layer = 4 * hidden * width + matrices * hidden * inner
    positions = _int(vision.get("position_embedding_size"))
    image = _int(vision.get("image_size"))
    if positions is None and image is not None:
        positions = (image // patch) ** 2  # one learned embedding per patch
    embeddings = patch * patch * IMAGE_CHANNELS * hidden + (positions or 0) * hidden
    projector = hidden * (text_hidden or 0)
    return layers * per_layer + embeddings + projector


def encoder_bytes(config: Mapping[str, Any], text_hidden: int | None, elem: float) -> int | None:
    """Bytes of the encoders `--language-model-only` skips (elem bytes per weight), or None
    when the config has an encoder whose shape is not known here (or none at all)."""
    vision = config.get("vision_config")
    audio = config.get("audio_config")
    if isinstance(audio, Mapping) and audio:
        return None  # an audio tower (a conformer) whose size this does not derive
    if not isinstance(vision, Mapping):
        return None
    params = vision_encoder_params(vision, text_hidden)
    return None if params is None else int(params * elem)
