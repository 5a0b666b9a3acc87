"""The JSON form of the records a run keeps (benchmark results and settings, smoke checks):
pydantic validates them on the way in and writes them on the way out, one implementation
for every record instead of a hand-written pair each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import ConfigDict, TypeAdapter

# Unknown keys (from older or newer versions) are ignored; an infinite figure stays one.
RECORD_CONFIG = ConfigDict(extra="ignore", ser_json_inf_nan="constants")


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    # Building an adapter compiles a validator: once per record type.
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


class JsonRecord:
    """For pydantic dataclasses: `to_dict` gives JSON-able data (tuples as lists),
    `from_dict` validates it back."""

    def to_dict(self) -> dict[str, Any]:
        return dict(_adapter(type(self)).dump_python(self, mode="json"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        value: Self = _adapter(cls).validate_python(dict(data))
        return value
