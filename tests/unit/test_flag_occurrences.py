"""A flag given twice: the last one counts, as in vLLM's argparse."""

from __future__ import annotations

from spark_tui.core import settings_schema
from spark_tui.core.recipe import Recipe
from spark_tui.core.render import flag_value, switch_value, template_value


def test_flag_value_is_the_last_given() -> None:
    argv = ["vllm", "serve", "m", "--port", "8000", "--port=8001"]
    assert flag_value(argv, "--port") == "8001"
    assert flag_value([*argv, "--port", "8002"], "--port") == "8002"
    assert flag_value(argv, "--host") is None
    # an alias spelling is the same flag
    both = ["--max-num-seqs", "4", "--max_num_seqs", "8"]
    assert flag_value(both, "--max-num-seqs", "--max_num_seqs") == "8"


def test_switch_value_is_the_last_of_the_flag_and_its_no_form() -> None:
    eager = settings_schema.get("enforce_eager")
    assert eager is not None
    assert switch_value(["--enforce-eager", "--no-enforce-eager"], eager) is False
    assert switch_value(["--no-enforce-eager", "--enforce-eager"], eager) is True
    assert switch_value(["--port", "1"], eager) is None


def test_template_value_is_the_last_given() -> None:
    r = Recipe(name="t", model="m", command="vllm serve {model} --max-num-seqs 4 --max-num-seqs 8")
    assert template_value(r, "max_num_seqs") == "8"
