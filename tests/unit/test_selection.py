"""Picking the nodes a launch runs on (`--on`, the cockpit's nodes panel): the names, their
order, the refusals, and what the fit and the plan then say about the nodes left out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spark_tui.core.errors import InputError
from spark_tui.core.inventory import InventoryNode
from spark_tui.core.recipe_loader import find_recipe
from spark_tui.core.selection import choice_text, parse_on, pick, pick_nodes, toggle
from spark_tui.service.evaluate import evaluate
from spark_tui.service.session import Session
from tests.unit.test_plan import cluster

GIVEN = ["spark-a", "spark-b", "spark-c", "spark-d"]


@dataclass(frozen=True)
class Node:
    name: str


def test_on_is_split_on_commas_and_keeps_the_order() -> None:
    assert parse_on("spark-c, spark-a") == ["spark-c", "spark-a"]


@pytest.mark.parametrize("text", ["", ",", " , "])
def test_on_naming_nothing_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="names no node") as exc:
        parse_on(text)
    assert "--on spark-a,spark-b" in exc.value.remedy


def test_on_with_an_empty_name_is_refused() -> None:
    with pytest.raises(InputError, match="empty name"):
        parse_on("spark-a,,spark-b")


def test_a_pick_is_in_its_own_order_head_first() -> None:
    assert pick(GIVEN, ["spark-d", "spark-b"]) == ["spark-d", "spark-b"]


def test_no_pick_is_every_node_given() -> None:
    assert pick(GIVEN, None) == GIVEN


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InputError) as exc:
        pick(GIVEN, ["spark-a", "spark-x", "spark-y"])
    assert "spark-x, spark-y, which are not nodes" in exc.value.message
    assert exc.value.remedy.endswith("spark-a, spark-b, spark-c, spark-d")
    assert exc.value.exit_code == 2


def test_a_repeated_name_is_refused() -> None:
    with pytest.raises(InputError, match="spark-b more than once"):
        pick(GIVEN, ["spark-b", "spark-a", "spark-b"])


def test_an_empty_pick_is_refused() -> None:
    with pytest.raises(InputError, match="no node picked"):
        pick(GIVEN, [])


def test_pick_nodes_gives_the_nodes_and_the_names_left_out_in_the_order_given() -> None:
    nodes = [Node(n) for n in GIVEN]
    picked, left = pick_nodes(nodes, ["spark-c", "spark-a"])
    assert picked == [Node("spark-c"), Node("spark-a")]
    assert left == ["spark-b", "spark-d"]
    assert pick_nodes(nodes, None) == (nodes, None)


def test_the_choice_says_how_the_nodes_were_taken_and_how_to_take_others() -> None:
    what, change = choice_text(["spark-a", "spark-b"], ["spark-c"], picked=False, candidates=3)
    assert what == "runs on spark-a, spark-b (the first 2 nodes given); left out: spark-c"
    assert "--on spark-c,spark-a" in change
    what, _ = choice_text(["spark-c", "spark-a"], ["spark-b"], picked=True, candidates=2)
    assert what == "runs on spark-c, spark-a (as picked); left out: spark-b"
    what, _ = choice_text(["spark-c"], ["spark-a", "spark-b"], picked=True, candidates=2)
    assert "(the first 1 node picked)" in what


def _glm():
    return find_recipe("glm-5.3-flash")


def test_a_pick_runs_the_plan_and_the_fit_on_the_picked_nodes_head_first() -> None:
    nodes, left = pick_nodes(cluster(4), ["spark-3", "spark-1"])
    result = evaluate(_glm(), {}, nodes, unpicked=left)
    assert result.problem is None and result.plan is not None and result.report is not None
    assert [(r.rank, r.node, r.role) for r in result.plan.ranks] == [
        (0, "spark-3", "head"),
        (1, "spark-1", "worker"),
    ]
    assert result.plan.nodes_left_out == ["spark-0", "spark-2"]
    assert result.report.nodes_used == ["spark-3", "spark-1"]
    assert result.report.nodes_left_out == ["spark-0", "spark-2"]
    (finding,) = [f for f in result.report.findings if f.code == "nodes_left_out"]
    assert "runs on spark-3, spark-1 (as picked); left out: spark-0, spark-2" in finding.message
    assert any("left out: spark-0, spark-2" in note for note in result.plan.notes)


def test_without_a_pick_the_first_nodes_are_taken_and_that_is_said_with_the_way_out() -> None:
    result = evaluate(_glm(), {}, cluster(3))
    assert result.plan is not None and result.report is not None
    assert [r.node for r in result.plan.ranks] == ["spark-0", "spark-1"]
    (finding,) = [f for f in result.report.findings if f.code == "nodes_left_out"]
    assert "(the first 2 nodes given); left out: spark-2" in finding.message
    assert "--on spark-2,spark-0" in finding.remedy
    (note,) = [n for n in result.plan.notes if "left out" in n]
    assert "--on spark-2,spark-0" in note


def test_too_few_picked_says_to_pick_more_of_the_ones_given() -> None:
    nodes, left = pick_nodes(cluster(4), ["spark-2"])
    result = evaluate(_glm(), {}, nodes, unpicked=left)
    assert result.report is not None and not result.report.ok
    (mismatch,) = [f for f in result.report.findings if f.code == "nodes_mismatch"]
    assert "only 1 node picked" in mismatch.message
    assert "pick 2 nodes of spark-2,spark-0,spark-1,spark-3 with --on" in mismatch.remedy
    # No plan on one node for a two-rank layout: the refusal says how to pick more.
    assert result.problem is not None
    assert "1 picked" in result.problem.message and "--on" in result.problem.remedy


def test_toggle_adds_last_or_takes_out_keeping_the_order() -> None:
    assert toggle([], "spark-c") == ["spark-c"]
    assert toggle(["spark-c"], "spark-a") == ["spark-c", "spark-a"]
    assert toggle(["spark-c", "spark-a", "spark-b"], "spark-c") == ["spark-a", "spark-b"]


def _session(unpicked: list[str] | None = None) -> Session:
    facts = cluster(3)
    inventory = [InventoryNode(name=n.name, host=n.address) for n in facts]
    session = Session(inventory, unpicked=unpicked)
    session.facts = facts
    return session


def test_the_session_evaluates_on_the_nodes_picked_and_names_the_others() -> None:
    session = _session()
    session.errors = {"spark-1": ("unreachable", None)}
    assert session.launch_nodes() == (session.reachable, None)  # no pick: every reachable
    # A picked node that is not reachable is left out, like one not picked.
    session.on = ["spark-2", "spark-1", "spark-0"]
    picked, left = session.launch_nodes()
    assert [n.name for n in picked] == ["spark-2", "spark-0"] and left == ["spark-1"]
    result = session.evaluate(_glm(), {})
    assert result.plan is not None
    assert [r.node for r in result.plan.ranks] == ["spark-2", "spark-0"]
    assert result.plan.nodes_left_out == ["spark-1"]


def test_a_session_made_of_the_picked_nodes_names_the_ones_left_outside() -> None:
    # The CLI's `--on spark-2,spark-0` makes a session of those two; the third is named.
    facts = cluster(3)
    session = _session(unpicked=["spark-9"])
    session.facts = [facts[2], facts[0]]
    result = session.evaluate(_glm(), {})
    assert result.plan is not None and result.report is not None
    assert [r.node for r in result.plan.ranks] == ["spark-2", "spark-0"]
    assert result.report.nodes_left_out == ["spark-9"]
