"""The workload settings: length distributions, workload files, goodput targets, confidence
intervals, and which stored benchmarks measured the same workload."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from spark_tui.core.confidence import mean_ci95, t95
from spark_tui.core.errors import InputError
from spark_tui.core.wording import depth_label
from spark_tui.core.workload import (
    GoodputTarget,
    Lengths,
    Workload,
    comparable_config,
    goodput_of,
    parse_depths,
    parse_goodput_target,
    parse_lengths,
    parse_workload_lines,
    workload_differences,
    workload_of,
)


def test_lengths_are_written_as_typed_and_stored_the_same() -> None:
    fixed, uniform = parse_lengths("256", "x"), parse_lengths("128-512", "x")
    normal = parse_lengths("normal:300,50,100-400", "x")
    assert (fixed.kind, fixed.low, fixed.high) == ("fixed", 256, 256)
    assert (uniform.kind, uniform.low, uniform.high) == ("uniform", 128, 512)
    assert (normal.mean, normal.stdev, normal.low, normal.high) == (300, 50, 100, 400)
    # The default bounds of a normal are three deviations either side, never below 1.
    assert (parse_lengths("normal:10,5", "x").low, parse_lengths("normal:10,5", "x").high) == (
        1,
        25,
    )
    w = Workload(prompt_tokens="128-512", output_tokens="normal:300,50,100-400")
    data = w.model_dump(mode="json")
    assert data["prompt_tokens"] == "128-512"
    assert data["output_tokens"] == "normal:300,50,100-400"
    assert Workload(prompt_tokens=256).model_dump(mode="json")["prompt_tokens"] == 256
    assert Workload.model_validate(data) == w


@pytest.mark.parametrize(
    "spec", ["0", "512-128", "abc", "normal:5", "normal:100,10,200-300", "normal:x,1", "-4"]
)
def test_a_bad_length_is_refused_with_the_syntax(spec: str) -> None:
    with pytest.raises(InputError) as err:
        parse_lengths(spec, "--prompt-tokens")
    assert "--prompt-tokens" in err.value.message and "normal:MEAN,SD" in err.value.remedy


def test_samples_stay_in_bounds_and_follow_the_distribution() -> None:
    rng = random.Random(1)
    uniform = [parse_lengths("100-200", "x").sample(rng) for _ in range(2000)]
    assert min(uniform) == 100 and max(uniform) == 200
    normal_spec = parse_lengths("normal:500,100,400-700", "x")
    normal = [normal_spec.sample(rng) for _ in range(4000)]
    assert min(normal) == 400 and max(normal) <= 700
    # Cut at 400 below: the mean moves up from 500, and about 16 % sit on the lower bound.
    assert 505 < sum(normal) / len(normal) < 540
    assert 0.12 < normal.count(400) / len(normal) < 0.20


def test_the_same_seed_gives_the_same_requests_and_another_seed_others() -> None:
    w = Workload(prompt_tokens="64-4096", output_tokens="16-512", seed=7)
    assert w.shapes(0, 50) == w.shapes(0, 50)
    assert w.shapes(10, 5) == w.shapes(0, 15)[10:]
    other = w.model_copy(update={"seed": 8}).shapes(0, 50)
    assert [s.prompt_tokens for s in other] != [s.prompt_tokens for s in w.shapes(0, 50)]


def test_a_workload_file_of_counts_and_of_real_prompts(tmp_path: Path) -> None:
    lines = [
        {"prompt_tokens": 100, "output_tokens": 20},
        {"prompt": "Summarise the report below.", "output_tokens": 50},
        {"prompt_tokens": 300},
    ]
    path = tmp_path / "load.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    w = Workload(output_tokens=77).with_file(path)
    assert w.file_entries == 3 and w.file_digest
    shapes = w.shapes(0, 4)
    assert [(s.prompt_tokens, s.text, s.output_tokens) for s in shapes] == [
        (100, None, 20),
        (None, "Summarise the report below.", 50),
        (300, None, 77),  # no output length in the line: the setting's
        (100, None, 20),  # from the top again
    ]
    # The summary says where the output lengths come from (the lines, else the setting).
    assert "output 77 tokens where a line gives none" in w.summary()
    every = tmp_path / "every.jsonl"
    every.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n")
    assert "output as each line gives" in Workload().with_file(every).summary()
    assert "output 128 tokens" not in Workload().with_file(every).summary()
    # Stored without the lines; read again (and checked) when the run is repeated.
    stored = Workload.model_validate(w.model_dump(mode="json"))
    assert stored.summary() == w.summary()
    assert stored.entries == () and stored.reloaded().entries == w.entries
    path.write_text(json.dumps({"prompt_tokens": 5}) + "\n")
    with pytest.raises(InputError, match="changed since"):
        stored.reloaded()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "line 2 is not JSON"),
        ('{"output_tokens": 5}', "line 2 needs exactly one of"),
        ('{"prompt_tokens": 5, "prompt": "x"}', "line 2 needs exactly one of"),
        ('{"prompt_tokens": 0}', "line 2: prompt_tokens must be"),
        ('{"prompt_tokens": 4, "output_tokens": "8"}', "line 2: output_tokens must be"),
        ('{"prompt": "  "}', "line 2: prompt must be"),
        ("[1, 2]", "line 2 is not a JSON object"),
    ],
)
def test_a_bad_workload_line_is_named(text: str, says: str) -> None:
    with pytest.raises(InputError) as err:
        parse_workload_lines('{"prompt_tokens": 3}\n' + text, "w.jsonl")
    assert says in err.value.message and "JSON lines" in err.value.remedy


def test_an_empty_or_missing_workload_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no entries"):
        parse_workload_lines("\n \n")
    with pytest.raises(InputError, match="cannot read the workload file"):
        Workload().with_file(tmp_path / "absent.jsonl")


def test_goodput_targets_parse_print_and_judge() -> None:
    ttft, itl = parse_goodput_target("ttft<=2s"), parse_goodput_target("itl <= 80ms")
    assert (ttft.figure, ttft.limit_s) == ("ttft", 2.0)
    assert (itl.figure, itl.limit_s) == ("itl", 0.08)
    assert str(itl) == "itl<=80ms" and GoodputTarget.model_validate("itl<=80ms") == itl
    assert parse_goodput_target("latency<=30s").limit_s == 30.0
    for bad in ("ttft_p95<=2s@c8", "ttft>=2s", "speed<=3s", "ttft<=0s", "latency<=30"):
        with pytest.raises(InputError) as err:
            parse_goodput_target(bad)
        assert "ttft<=2s" in err.value.remedy
    requests = [
        (1.0, 0.05, 5.0),  # meets both
        (3.0, 0.05, 5.0),  # TTFT too slow
        (1.0, 0.09, 5.0),  # ITL too slow
        (0.5, None, 0.5),  # one token: no gaps, meets the ITL target
    ]
    assert goodput_of([ttft, itl], requests, 2.0) == pytest.approx(1.0)
    assert goodput_of([], requests, 2.0) is None


def test_confidence_interval_of_repeats() -> None:
    assert mean_ci95([10.0]) is None and mean_ci95([None, 3.0]) is None
    mean, half = mean_ci95([9.0, 10.0, 11.0]) or (0, 0)
    # stdev 1, n 3: t(2) = 4.303, half = 4.303 / sqrt(3)
    assert mean == 10.0 and half == pytest.approx(4.303 / 3**0.5)
    assert t95(1) == 12.706 and t95(1000) == 1.960


def test_depths_are_token_counts_with_k() -> None:
    assert parse_depths("0,4k,16k") == (0, 4096, 16384)
    assert depth_label(4096) == "4k" and depth_label(0) == "0" and depth_label(1000) == "1000"
    for bad in ("0,0", "x", "-1", ""):
        with pytest.raises(InputError):
            parse_depths(bad)


def test_runs_compare_only_when_they_measured_the_same_workload() -> None:
    legacy = {"concurrency": [1], "prompt_tokens": 256, "output_tokens": 128}
    now = {"concurrency": [1], "workload": Workload().model_dump(mode="json")}
    # A run recorded before workloads existed measured the default fixed lengths.
    assert workload_differences(legacy, now) == []
    assert comparable_config(legacy) == comparable_config(now)
    assert workload_of({"prompt_tokens": 8}).prompt_tokens == Lengths.fixed(8)
    shared = {"workload": Workload(shared_prefix=0.5).model_dump(mode="json")}
    assert workload_differences(now, shared) == ["shared_prefix (0.0 vs 0.5)"]
    # Goodput targets judge the figures: other targets, the same measurement.
    judged = {"concurrency": [1], "workload": Workload(goodput=("ttft<=1s",)).model_dump()}
    assert workload_differences(now, judged) == []
    assert comparable_config(now) == comparable_config(judged)
