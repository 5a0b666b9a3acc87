"""Facts files and inventories: wrong types and bad ports are input errors, never tracebacks."""

from __future__ import annotations

import json

import pytest

from spark_tui.core.errors import FactsError
from spark_tui.core.facts import facts_to_json, parse_facts
from spark_tui.core.inventory import hosts_to_inventory, inventory_to_yaml, parse_inventory

GOOD = {
    "nodes": [
        {
            "name": "spark-a",
            "address": "10.0.0.1",
            "memory_total_bytes": 128452014080,
            "interfaces": [{"netdev": "enp1s0f1np1", "rdma_device": "rocep1s0f1", "state": "up"}],
            "models": [{"repo_id": "org/m", "config": {"num_hidden_layers": 2}}],
            "extra_key": "kept out, not an error",
        }
    ]
}


def test_round_trip_keeps_every_known_value() -> None:
    nodes = parse_facts(json.dumps(GOOD))
    again = parse_facts(facts_to_json(nodes))
    assert again == nodes
    assert nodes[0].interfaces[0].netdev == "enp1s0f1np1"
    assert nodes[0].models[0].config == {"num_hidden_layers": 2}


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ({"memory_total_bytes": "12"}, "memory_total_bytes"),
        ({"memory_total_bytes": True}, "memory_total_bytes"),
        ({"interfaces": "eth0"}, "interfaces"),
        ({"interfaces": [{"netdev": 5}]}, "netdev"),
        ({"models": [{"repo_id": "m", "config": "x"}]}, "config"),
        ({"models": [{"repo_id": "m", "weight_bytes": 1.5}]}, "weight_bytes"),
    ],
)
def test_wrong_types_name_the_value(patch: dict[str, object], named: str) -> None:
    node = {**GOOD["nodes"][0], **patch}
    with pytest.raises(FactsError) as err:
        parse_facts(json.dumps({"nodes": [node]}))
    assert named in err.value.message
    assert err.value.remedy


def test_hosts_with_ports_and_users() -> None:
    nodes = hosts_to_inventory("me@spark-a, spark-b:2222")
    assert [(n.name, n.host, n.user, n.port) for n in nodes] == [
        ("spark-a", "spark-a", "me", None),
        ("spark-b", "spark-b", None, 2222),
    ]


def test_same_host_twice_gets_distinct_names() -> None:
    nodes = hosts_to_inventory("127.0.0.1:2201,127.0.0.1:2202")
    assert len({n.name for n in nodes}) == 2


@pytest.mark.parametrize("hosts", ["h:abc", "h:0", "h:70000", " , "])
def test_bad_hosts_are_input_errors(hosts: str) -> None:
    with pytest.raises(FactsError):
        hosts_to_inventory(hosts)


def test_inventory_round_trip_and_bad_port() -> None:
    nodes = parse_inventory("nodes:\n  - {name: a, host: h1, port: 22}\n  - h2\n")
    assert parse_inventory(inventory_to_yaml(nodes)) == nodes
    with pytest.raises(FactsError, match="port"):
        parse_inventory("nodes: [{name: a, host: h, port: 70000}]")
    with pytest.raises(FactsError, match=r":1:"):
        parse_inventory("nodes: [unclosed")
