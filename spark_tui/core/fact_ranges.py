"""Sane ranges for the numbers a recipe or a facts file hands the fit check.

The memory arithmetic multiplies layers, heads, head size and lengths; a value such as
`head_dim: 1.0e+308` or `weight_bytes: .inf` must be refused where it enters, naming the
file and the key, not end as an OverflowError deep in the KV-cache model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pydantic_core import SchemaValidator, ValidationError, core_schema

from spark_tui.core.errors import InputError, RecipeError
from spark_tui.core.facts import ModelFacts
from spark_tui.core.safe_yaml import short_repr

PIB = 2**50
# Any number a recipe or config carries (rope_theta 1e6 and up, byte sizes): past this it
# is a typo or a fuzzer, never a model.
MAX_ABS_NUMBER = 10**18

_COUNT = (1, 100_000)
_COUNT0 = (0, 100_000)
_DIM = (1, 1_048_576)
_DIM0 = (0, 1_048_576)
_LENGTH = (1, 2**32)
_BYTES = (0, PIB)

# The numeric ModelFacts fields with the (inclusive) ranges a real model stays within.
RANGES: dict[str, tuple[int, int]] = {
    "weight_bytes": _BYTES,
    "params": (0, 10**14),
    "num_hidden_layers": _COUNT,
    "num_attention_heads": _COUNT,
    "num_key_value_heads": _COUNT,
    "head_dim": _DIM,
    "hidden_size": _DIM,
    "max_position_embeddings": _LENGTH,
    "sliding_window": _LENGTH,
    "full_attention_layers": _COUNT0,
    "kv_lora_rank": _DIM,
    "qk_rope_head_dim": _DIM0,
    "global_head_dim": _DIM,
    "num_global_key_value_heads": _COUNT,
    "linear_layers": _COUNT0,
    "linear_state_bytes": _BYTES,
    "mtp_layers": _COUNT0,
    "ple_table_bytes": _BYTES,
    "encoder_bytes": _BYTES,
    "unbacked_encoder_bytes": _BYTES,
    "num_experts": _COUNT0,
}

# Built straight on pydantic-core (what `import pydantic` loads anyway): a BaseModel would
# pull pydantic's model machinery and its plugin scan of every installed package into each
# headless `plan`/`check`, several times the cost of the whole check. Strict: a float or a
# bool is not a count.
_VALIDATOR = SchemaValidator(
    core_schema.typed_dict_schema(
        {
            name: core_schema.typed_dict_field(
                core_schema.nullable_schema(core_schema.int_schema(ge=lo, le=hi, strict=True)),
                required=False,
            )
            for name, (lo, hi) in RANGES.items()
        },
        extra_behavior="ignore",
    )
)


def check_fact_ranges(facts: ModelFacts, where: str, error: type[InputError] = RecipeError) -> None:
    """Raise `error` naming the first fact outside its range (e.g. head_dim 1e308)."""
    values = {f.name: getattr(facts, f.name) for f in fields(facts) if f.name in RANGES}
    try:
        _VALIDATOR.validate_python(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        raise error(
            f"{where}: {key}={short_repr(values.get(key))} is out of range "
            f"({first['msg'].lower()})",
            f"write the model's real {key} (its config.json has it), or leave it out",
        ) from None


def check_finite_numbers(
    data: Any, where: str, error: type[InputError] = RecipeError, _path: str = ""
) -> None:
    """Raise `error` for the first number under `data` that is inf, nan or absurdly large.

    Walks mappings and lists (a loaded document is bounded by core.safe_yaml).
    """
    stack: list[tuple[str, Any]] = [(_path, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            finite = not isinstance(value, float) or math.isfinite(value)
            if not finite or abs(value) > MAX_ABS_NUMBER:
                raise error(
                    f"{where}: {path or 'value'} is {short_repr(value)}, not a usable number",
                    f"write a finite value of a real size for {path or 'it'} "
                    f"(at most {MAX_ABS_NUMBER:.0e} in magnitude)",
                )
        elif isinstance(value, Mapping):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
