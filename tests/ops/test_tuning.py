"""Does every rank's command carry a tuning change, as vLLM's argparse would read it?"""

from __future__ import annotations

from typing import Any

from spark_tui.ops.tuning import ranks_carry

HEAD = ["vllm", "serve", "m", "--port", "8000"]


def plan(*ranks: list[str]) -> dict[str, Any]:
    return {"ranks": [{"rank": i, "argv": HEAD + extra} for i, extra in enumerate(ranks)]}


def test_every_rank_carrying_the_value_passes() -> None:
    two = plan(["--max-num-seqs", "8"], ["--max-num-seqs=8"])
    assert ranks_carry(two, "max_num_seqs", 8) == []


def test_a_rank_without_the_change_is_named() -> None:
    assert ranks_carry(plan(["--max-num-seqs", "8"], []), "max_num_seqs", 8) == [1]
    assert ranks_carry(
        plan(["--max-num-seqs", "8"], ["--max-num-seqs", "4"]), "max_num_seqs", 8
    ) == [1]


def test_the_last_occurrence_counts_as_in_argparse() -> None:
    later = plan(
        ["--max-num-seqs", "8", "--max-num-seqs", "4"], ["--max-num-seqs", "4", "--max-num-seqs=8"]
    )
    assert ranks_carry(later, "max_num_seqs", 8) == [0]
    # the underscore spelling is the same flag to vLLM
    assert ranks_carry(plan(["--max-num-seqs", "8", "--max_num_seqs", "2"]), "max_num_seqs", 8) == [
        0
    ]


def test_a_switched_on_flag_missing_from_a_rank_is_not_carried() -> None:
    assert ranks_carry(plan(["--enforce-eager"], []), "enforce_eager", True) == [1]
    # nor when the rank ends with the `--no-` form
    assert ranks_carry(plan(["--enforce-eager", "--no-enforce-eager"]), "enforce_eager", True) == [
        0
    ]
    assert ranks_carry(plan(["--no-enforce-eager", "--enforce-eager"]), "enforce_eager", True) == []


def test_a_switched_off_flag_reads_vllms_default_when_absent() -> None:
    # enforce_eager is off by default: absent is off; prefix caching is on: absent is on
    assert ranks_carry(plan([], ["--enforce-eager"]), "enforce_eager", False) == [1]
    on_by_default = plan(["--no-enable-prefix-caching"], [])
    assert ranks_carry(on_by_default, "enable_prefix_caching", False) == [1]
    assert ranks_carry(on_by_default, "enable_prefix_caching", True) == [0]


def test_a_removed_setting_must_be_gone_from_every_rank() -> None:
    assert ranks_carry(plan([], ["--max_num_seqs=4"]), "max_num_seqs", None) == [1]


def test_a_setting_unknown_to_the_schema_is_read_by_its_flag() -> None:
    two = plan(["--some-new-flag", "x"], ["--some-new-flag", "y"])
    assert ranks_carry(two, "some_new_flag", "x") == [1]
    assert ranks_carry(plan(["--some-switch"], []), "some_switch", True) == [1]
