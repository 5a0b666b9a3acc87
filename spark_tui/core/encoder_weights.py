"""The weights of a multimodal model's encoders: what `--language-model-only` leaves
unloaded, and what vLLM builds without the checkpoint holding it.

With `--language-model-only` vLLM builds only the language model of a multimodal
checkpoint: the vision (and audio) tower and the projector that feeds it into the text
model are skipped at load, so a rank holds the checkpoint less those tensors. Their size
follows from config.json's `vision_config`: a stack of transformer layers (attention of
`num_attention_heads x head_dim`, an MLP of `intermediate_size`), the patch and position
embeddings, and the projection to the text model's width; and from `audio_config` for
Gemma 4's audio tower (a conformer).

The other way round, vLLM builds Gemma 4's audio tower whenever config.json has an
`audio_config`, from that config alone, and for a quantized checkpoint does not check
that the tower's weights were loaded: a fine-tune that added an `audio_config` to a model
without audio (to satisfy a config parser) carries an allocated tower of its size in every
rank's "Model loading took" although no checkpoint byte holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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
# Gemma 4's vision tower learns one position table per image axis.
POSITION_AXES = {"gemma4_vision": 2}
# The audio towers whose shape is known: vLLM builds them from audio_config in the model's
# dtype (transformers' AutoModel), whatever the checkpoint's quantization.
AUDIO_TOWERS = ("gemma4_audio",)
# Every linear of Gemma 4's audio tower is clipped (input and output min and max) unless
# the config turns that off: four scalars per linear, ten linears per layer.
_CLIPPED_LINEARS_PER_LAYER = 10
_CLIP_SCALARS = 4


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
    axes = POSITION_AXES.get(str(vision.get("model_type") or ""), 1)
    embeddings = patch * patch * IMAGE_CHANNELS * hidden + axes * (positions or 0) * hidden
    projector = hidden * (text_hidden or 0)
    return layers * per_layer + embeddings + projector


def gemma4_audio_params(audio: Mapping[str, Any], text_hidden: int | None) -> int | None:
    """Parameters of Gemma 4's audio tower and its projector into the text model, as
    transformers builds them from `audio_config`, or None for another audio encoder."""
    if str(audio.get("model_type") or "") not in AUDIO_TOWERS:
        return None
    hidden = _int(audio.get("hidden_size"))
    layers = _int(audio.get("num_hidden_layers"))
    heads = _int(audio.get("num_attention_heads"))
    kernel = _int(audio.get("conv_kernel_size"))
    channels = audio.get("subsampling_conv_channels")
    out = _int(audio.get("output_proj_dims")) or hidden
    if not (isinstance(channels, list) and len(channels) == 2):
        return None
    first, second = (_int(c) for c in channels)
    if None in (hidden, layers, heads, kernel, first, second):
        return None
    assert hidden and layers and heads and kernel and first and second and out
    clip = (
        _CLIPPED_LINEARS_PER_LAYER * _CLIP_SCALARS if audio.get("use_clipped_linears", True) else 0
    )
    per_layer = (
        2 * (2 * 4 * hidden * hidden + 2 * hidden)  # two macaron feed-forwards (4x wide), norms
        + 5 * hidden * hidden  # q, k, v, post and the relative-position key projection
        + hidden // heads  # per-dimension query scale
        + 3 * hidden * hidden
        + hidden * kernel
        + 2 * hidden  # light conv: start, end, depthwise
        + 3 * hidden  # pre-attention, post-attention and output norms
        + clip
    )
    # Two 3x3 convolutions (stride 2) with norms, then a projection of the flattened
    # channels x frequency bins (a quarter of the first layer's channels) to the width.
    subsample = 9 * first + first + 9 * first * second + second + (first // 4) * second * hidden
    output = out * hidden + out
    return layers * per_layer + subsample + output + out * (text_hidden or 0)


def holds_audio_tower(modules: Collection[str]) -> bool:
    """Whether a checkpoint whose tensors start with `modules` holds an audio tower."""
    return any("audio_tower" in m.split(".") for m in modules)


def encoder_bytes(
    config: Mapping[str, Any],
    text_hidden: int | None,
    elem: float,
    modules: Collection[str] | None = None,
) -> int | None:
    """Bytes of the encoders `--language-model-only` skips (elem bytes per weight), or None
    when the config has an encoder whose shape is not known here (or none at all).

    `modules` are the checkpoint's tensor name prefixes when known: an audio tower the
    config describes counts only where the checkpoint holds it (None: not known)."""
    vision = config.get("vision_config")
    audio = config.get("audio_config")
    if not isinstance(vision, Mapping):
        return None
    params = vision_encoder_params(vision, text_hidden)
    if params is None:
        return None
    if isinstance(audio, Mapping) and audio:
        if modules is None:
            return None  # whether the checkpoint holds the audio tower is not known
        if holds_audio_tower(modules):
            audio_params = gemma4_audio_params(audio, text_hidden)
            if audio_params is None:
                return None
            params += audio_params
    return int(params * elem)


def unbacked_encoder_bytes(
    config: Mapping[str, Any], text_hidden: int | None, elem: float, modules: Collection[str]
) -> int | None:
    """Bytes of the audio tower vLLM builds from `audio_config` for a checkpoint that holds
    none of its tensors (None: no such tower, or the checkpoint holds it)."""
    audio = config.get("audio_config")
    if not (isinstance(audio, Mapping) and audio) or holds_audio_tower(modules):
        return None
    params = gemma4_audio_params(audio, text_hidden)
    return None if params is None else int(params * elem)
