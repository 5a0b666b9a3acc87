"""The stand-in's `vllm serve` flags held against real vLLM's `vllm serve --help=all`
(tests/fixtures/vllm-0.32.0-serve-help-all.txt, captured from the lab's real install).

Every flag the stand-in accepts must be one real vLLM accepts, spelled the same ways, taking a
value when real vLLM's does, with no choice real vLLM lacks. The stand-in follows vLLM 0.32
except for the two spellings of the GB10 images' vLLM (0.28) that a bundled recipe still
passes (listed below).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from spark_tui.core.serve_flags import FlagTable, parse_help
from spark_tui.sim.engine import VERSION, flags

REAL_HELP = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-serve-help-all.txt"
# A flag of vLLM 0.28 that 0.32 removed, kept because recipes/qwen3.8-flash-next.yaml (for
# its GB10 image's 0.28 nightly) passes it.
OLDER_ONLY = {"--gdn-decode-kernel"}
# Spellings besides 0.32's: the same recipe's --kv-cache-memory (0.28), and -O, which vLLM
# 0.32 still reads as --optimization-level without listing it.
OLDER_SPELLINGS = {"--kv-cache-memory", "-O"}
OLDER_CHOICES: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def real() -> FlagTable:
    return parse_help(REAL_HELP.read_text())


@pytest.fixture(scope="module")
def stand_in() -> FlagTable:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        flags.parse(["serve", "--help=all"])
    assert done.value.code == 0
    return parse_help(out.getvalue())


def test_the_stand_in_prints_help_for_help_all_as_vllm_does(stand_in: FlagTable) -> None:
    assert VERSION.split("+")[0] == "0.32.0" and len(stand_in) > 150
    assert stand_in.lookup("--tensor-parallel-size") is not None


def test_every_stand_in_flag_is_a_real_one(stand_in: FlagTable, real: FlagTable) -> None:
    problems = []
    for spec in {id(s): s for s in stand_in.flags.values()}.values():
        if spec.name == "-h":
            continue
        if OLDER_ONLY & set(spec.names):
            continue
        got = real.lookup(spec.name)
        if got is None:
            problems.append(f"{spec.name}: real vLLM has no such flag")
            continue
        extra = set(spec.names) - set(got.names) - OLDER_SPELLINGS
        if extra:
            problems.append(f"{spec.name}: spellings real vLLM lacks: {sorted(extra)}")
        missing = {n for n in got.names if n.startswith("--no-")} - set(spec.names)
        if missing:
            problems.append(f"{spec.name}: real vLLM also accepts {sorted(missing)}")
        if spec.takes_value != got.takes_value:
            problems.append(
                f"{spec.name}: takes a value {spec.takes_value}, real {got.takes_value}"
            )
        for choice in spec.choices or ():
            if got.choices is not None and choice not in got.choices:
                if (spec.name, choice) not in OLDER_CHOICES:
                    problems.append(f"{spec.name}: choice {choice!r} real vLLM refuses")
    assert not problems, "\n".join(problems)


def test_the_older_only_flags_are_really_missing_from_real_vllm(real: FlagTable) -> None:
    # The allow-list must not hide a flag real vLLM has (it would then be checked above).
    assert not [f for f in OLDER_ONLY if real.lookup(f) is not None]


def test_the_older_flags_kept_are_the_ones_a_bundled_recipe_passes() -> None:
    from spark_tui.core.recipe_loader import find_recipe

    command = find_recipe("qwen3.8-flash-next").command
    assert all(f in command for f in [*OLDER_ONLY, "--kv-cache-memory"])


def test_every_real_flag_is_a_stand_in_flag(stand_in: FlagTable, real: FlagTable) -> None:
    # The stand-in's table is derived from the same help: nothing of it may be lost.
    problems = []
    for spec in {id(s): s for s in real.flags.values()}.values():
        if spec.name == "-h":
            continue
        got = stand_in.lookup(spec.name)
        if got is None:
            problems.append(f"{spec.name}: the stand-in does not accept it")
        elif got.takes_value != spec.takes_value or set(spec.names) - set(got.names):
            problems.append(f"{spec.name}: {got.names} {got.takes_value} vs {spec.names}")
    assert not problems, "\n".join(problems)


def test_the_table_is_read_from_the_shipped_help_which_the_fixture_is() -> None:
    from spark_tui.sim.engine.help_table import HELP_FILE, real_flags

    assert REAL_HELP.resolve() == HELP_FILE.resolve()
    headers = [
        line for line in HELP_FILE.read_text().splitlines() if line.startswith(("  -", "  --"))
    ]
    assert len(real_flags()) == len(headers) - 1  # all but -h
