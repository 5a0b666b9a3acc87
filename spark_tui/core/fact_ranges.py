"""Sane ranges for the numbers a recipe or a facts file hands the fit check.

The memory arithmetic multiplies layers, heads, head size and lengths; a value such as
`head_dim: 1.0e+308` or `weight_bytes: .inf` must be refused where it enters, naming the
file and the key, not end as an OverflowError deep in the KV-cache model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spark_tui.core.errors import InputError, RecipeError
from spark_tui.core.facts import ModelFacts
from spark_tui.core.safe_yaml import short_repr

PIB = 2**50
# Any number a recipe or config carries (rope_theta 1e6 and up, byte sizes): past this it
# is a typo or a fuzzer, never a model.
MAX_ABS_NUMBER = 10**18

_Count = Annotated[int, Field(ge=1, le=100_000)]
_Count0 = Annotated[int, Field(ge=0, le=100_000)]
_Dim = Annotated[int, Field(ge=1, le=1_048_576)]
_Dim0 = Annotated[int, Field(ge=0, le=1_048_576)]
_Length = Annotated[int, Field(ge=1, le=2**32)]
_Bytes = Annotated[int, Field(ge=0, le=PIB)]


class ModelFactRanges(BaseModel):
    """The numeric ModelFacts fields with the ranges a real model stays within."""

    model_config = ConfigDict(extra="ignore", strict=True)

    weight_bytes: _Bytes | None = None
    params: Annotated[int, Field(ge=0, le=10**14)] | None = None
    num_hidden_layers: _Count | None = None
    num_attention_heads: _Count | None = None
    num_key_value_heads: _Count | None = None
    head_dim: _Dim | None = None
    hidden_size: _Dim | None = None
    max_position_embeddings: _Length | None = None
    sliding_window: _Length | None = None
    full_attention_layers: _Count0 | None = None
    kv_lora_rank: _Dim | None = None
    qk_rope_head_dim: _Dim0 | None = None
    global_head_dim: _Dim | None = None
    num_global_key_value_heads: _Count | None = None
    linear_layers: _Count0 | None = None
    linear_state_bytes: _Bytes | None = None
    mtp_layers: _Count0 | None = None
    ple_table_bytes: _Bytes | None = None


_RANGED = frozenset(ModelFactRanges.model_fields)


def check_fact_ranges(facts: ModelFacts, where: str, error: type[InputError] = RecipeError) -> None:
    """Raise `error` naming the first fact outside its range (e.g. head_dim 1e308)."""
    values = {f.name: getattr(facts, f.name) for f in fields(facts) if f.name in _RANGED}
    try:
        ModelFactRanges.model_validate(values)
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
