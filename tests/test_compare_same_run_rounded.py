"""One nccl-tests run imported from its -J JSON (times to 0.1 ns) and from its text log (times printed "%7.2f" below
100 us, "%7.1f" below 10000 us, "%7.0f" above: src/common.cu) was not seen as one run: the gate passed with no new
measurement. results.compare.runs_of_base now takes records equal within that printed rounding for the same run;
a run that differs by more than half a printed digit at one point is another run."""

from __future__ import annotations

import dataclasses

from commbench.results.compare import runs_of_base
from commbench.results.records import Measurement
from tests.test_compare import header_for, write
from tests.test_compare_runs import run_cli

TIMES_US = {1024: 20.0512, 8192: 20.4096, 65536: 123.4567, 524288: 12345.678}


def _printed(value: float) -> float:
    return round(value, 0 if value >= 10000 else 1 if value >= 100 else 2)


def _imported(run_id: str, times: dict[int, float]) -> list[Measurement]:
    """Records as nccl-tests import writes them: loop_time_us only, no per-iteration samples."""
    return [Measurement(run_id=run_id, collective="all_reduce", backend="nccl", size_bytes=size, count=size // 4,
                        dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, iters=20,
                        warmup_iters=5, loop_time_us={"avg": t}, algbw_gbps=size / t / 1e3,
                        busbw_gbps=size / t / 1e3, num_wrong=0) for size, t in times.items()]


def test_a_json_import_and_its_text_log_are_one_run():
    json_run = _imported("json", TIMES_US)
    text_run = _imported("text", {s: _printed(t) for s, t in TIMES_US.items()})
    same = runs_of_base(json_run, text_run)
    assert "printed rounding" in same["text"], same
    assert "printed rounding" in runs_of_base(text_run, json_run)["json"]


def test_a_run_that_differs_by_more_than_the_rounding_at_one_point_is_another_run():
    json_run = _imported("json", TIMES_US)
    for size, step in ((1024, 0.011), (65536, 0.06), (524288, 0.6)):
        other = _imported("other", {s: _printed(t) + (step if s == size else 0.0) for s, t in TIMES_US.items()})
        assert runs_of_base(json_run, other) == {}, size
    fewer = _imported("fewer", {s: _printed(t) for s, t in list(TIMES_US.items())[:3]})
    assert runs_of_base(json_run, fewer) == {}
    other_dtype = [dataclasses.replace(m, dtype="bfloat16") for m in _imported("d", TIMES_US)]
    assert runs_of_base(json_run, other_dtype) == {}


def test_the_cli_refuses_the_text_import_of_the_base_run_unless_allowed(tmp_path):
    base = write(tmp_path / "base.jsonl", _imported("json", TIMES_US))
    new = write(tmp_path / "new.jsonl", _imported("text", {s: _printed(t) for s, t in TIMES_US.items()}))
    refused = run_cli(base, new)
    assert refused.exit_code == 2 and "holds no run of its own" in refused.output, refused.output
    assert run_cli(base, new, "--allow-same-run").exit_code == 0
