"""The facts-file format read through pydantic: today's files load unchanged, older short
forms still load, and no value is coerced into a type it does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tui.core.errors import FactsError
from spark_tui.core.facts import CachedModel, ImageInfo, facts_to_json, parse_facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("simulated_facts_*.json")), ids=str)
def test_todays_files_load_and_round_trip(path: Path) -> None:
    nodes = parse_facts(path.read_text(), str(path))
    assert nodes and all(n.memory_total_bytes for n in nodes)
    assert parse_facts(facts_to_json(nodes)) == nodes
    raw = json.loads(path.read_text())["nodes"][0]
    assert len(nodes[0].models) == len(raw.get("models") or [])


def test_short_forms_and_unknown_keys_load() -> None:
    node = {
        "name": "a",
        "address": "10.0.0.1",
        "images": ["vllm:1"],
        "models": ["org/m"],
        "a_key_from_a_newer_probe": {"x": 1},
    }
    (got,) = parse_facts(json.dumps({"nodes": [node]}))
    assert got.images == [ImageInfo(ref="vllm:1")] and got.models == [CachedModel(repo_id="org/m")]


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ({"disk_free_bytes": 1.0}, "disk_free_bytes"),
        ({"containers": [{"name": "c", "labels": {"k": 1}}]}, "labels"),
        ({"models": [{"repo_id": "m", "files": {"a": "12"}}]}, "files"),
    ],
)
def test_nested_values_are_checked_without_coercion(patch: dict[str, object], named: str) -> None:
    with pytest.raises(FactsError) as err:
        parse_facts(json.dumps({"nodes": [{"name": "a", "address": "h", **patch}]}))
    assert named in err.value.message and "regenerate" in err.value.remedy
