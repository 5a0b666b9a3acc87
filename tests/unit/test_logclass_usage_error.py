"""vLLM refusing its command line (argparse: exit 2, no level prefix) is a rank's error,
with its cause and a remedy."""

from __future__ import annotations

from spark_tui.core.launch_rules import rank_failure_remedy, usage_error_remedy
from spark_tui.core.logclass import classify, explain_failure

# What real vLLM 0.32.0 prints for an unknown flag (exit 2; ../shared/LAB-NOTES.md records it
# from the lab's CPU build, and tests/sim/test_engine_failures.py holds the stand-in to it).
UNKNOWN_FLAG = [
    "usage: vllm [-h] [-v]",
    "            {chat,complete,serve,launch,bench,collect-env,run-batch} ...",
    "vllm: error: unrecognized arguments: --no-such-flag 3",
]
BAD_CHOICE = (
    "vllm serve: error: argument --dtype: invalid choice: 'float33' "
    "(choose from auto, bfloat16, float, float16, float32, half)"
)


def test_the_usage_error_is_an_error_with_its_cause() -> None:
    assert classify(UNKNOWN_FLAG[-1]).kind == "error"
    assert classify(UNKNOWN_FLAG[-1]).detail == "unknown_flag"
    assert classify(BAD_CHOICE).kind == "error"
    assert classify(BAD_CHOICE).detail == "usage_error"
    # the usage lines around it are not errors
    assert classify(UNKNOWN_FLAG[0]).kind == "info"
    assert classify(UNKNOWN_FLAG[1]).kind == "info"


def test_a_rank_that_dies_of_it_shows_the_line() -> None:
    assert explain_failure(UNKNOWN_FLAG) == [UNKNOWN_FLAG[-1]]
    assert explain_failure(["usage: vllm serve [-h]", BAD_CHOICE]) == [BAD_CHOICE]


def test_the_remedy_names_the_refused_flag() -> None:
    remedy = rank_failure_remedy(UNKNOWN_FLAG, [])
    assert remedy is not None
    assert "`--no-such-flag 3`" in remedy and "spark-tui check" in remedy
    other = usage_error_remedy([BAD_CHOICE])
    assert other is not None and "refused its command line" in other
    assert usage_error_remedy(["INFO 12-01 10:00:00 [x.py:1] starting"]) is None
