"""Gemma 4's encoders and checkpoint tensors as transformers builds them (meta device).

Run with the Python of the real-vLLM lab's venv (it has transformers and torch; spark-tui's
own venv has neither): `<cache>/vllm-<version>/venv/bin/python benchmarks/gemma4_tensors.py
CONFIG.json`. Prints JSON: parameters and tensors of Gemma 4's audio tower at several
audio_configs, of the vision tower, and the model's tensors per module and per layer, which
`spark_tui.core.encoder_weights` and the fit accuracy tests are held against.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from typing import Any

AUDIO_VARIANTS: list[dict[str, Any]] = [
    {},
    {
        "hidden_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "conv_kernel_size": 3,
        "subsampling_conv_channels": [64, 16],
        "output_proj_dims": 768,
    },
    {"use_clipped_linears": False},
]


def _size(state: dict[str, Any]) -> tuple[int, int]:
    return len(state), sum(int(v.numel()) for v in state.values())


def main(config_path: str) -> None:
    import torch
    from transformers import AutoModel, Gemma4Config
    from transformers.models.gemma4.configuration_gemma4 import Gemma4AudioConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ForConditionalGeneration

    config = json.loads(open(config_path, encoding="utf-8").read())
    config.pop("_source", None)
    # The 26B-A4B has no per-layer input embeddings (its config sets the width to 0).
    config["text_config"].setdefault("hidden_size_per_layer_input", 0)
    out: dict[str, Any] = {"audio": [], "transformers": __import__("transformers").__version__}
    for overrides in AUDIO_VARIANTS:
        audio_config = Gemma4AudioConfig(**overrides)
        with torch.device("meta"):
            tower = AutoModel.from_config(audio_config)
        tensors, params = _size(tower.state_dict())
        full = {k: v for k, v in audio_config.to_dict().items() if k in _AUDIO_KEYS}
        out["audio"].append({"audio_config": full, "tensors": tensors, "parameters": params})
    with torch.device("meta"):
        model = Gemma4ForConditionalGeneration(Gemma4Config(**config))
    modules: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    per_layer: Counter[str] = Counter()
    for name, tensor in model.state_dict().items():
        module = ".".join(name.split(".")[:2])
        modules[module] += 1
        sizes[module] += int(tensor.numel())
        if ".language_model.layers.0." in name:
            per_layer[re.sub(r"^.*\.layers\.0\.", "", name)] += 1
    out["modules"] = {m: {"tensors": modules[m], "parameters": sizes[m]} for m in sorted(modules)}
    out["language_model_layer_0"] = sorted(per_layer)
    print(json.dumps(out, indent=1, sort_keys=True))


_AUDIO_KEYS = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "conv_kernel_size",
    "subsampling_conv_channels",
    "output_proj_dims",
    "use_clipped_linears",
)

if __name__ == "__main__":
    main(sys.argv[1])
