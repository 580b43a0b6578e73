"""`fit` of results whose every curve is reported only (a composite workload's total) wrote a profile that predicts
nothing and exited 0; now it is refused in one line, as results with no usable points are, and nothing is written. A
curve whose time does not grow with size (bandwidth undetermined) is kept latency-only instead: its points measure
the latency (tests/test_fit_latency_only.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement


def _flat(path, time_us: float = 20.0, collective: str = "all_reduce") -> None:
    with JsonlWriter(path) as writer:
        for i, size in enumerate((1024, 4096, 16384, 65536)):
            writer.write(Measurement(run_id="r", collective=collective, backend="nccl", size_bytes=size,
                                     count=size // 4, dtype="float32", op="sum", in_place=True, world_size=8,
                                     group_size=8, group_layout="world", iters=20, warmup_iters=5,
                                     time_us_median=time_us * (1 if collective == "all_reduce" else 4 ** i)))


def test_a_fit_with_no_usable_curve_is_refused_and_writes_nothing(tmp_path):
    results, out = tmp_path / "moe.jsonl", tmp_path / "fabric.json"
    _flat(results, collective="moe_all_to_all")   # no stage times: its total, reported only
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, ["fit", str(results), "-O", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert "no usable curve" in result.output and "composite workload" in result.output
        assert "Traceback" not in result.output and not out.exists()
    _flat(tmp_path / "flat.jsonl")   # time does not grow with size: kept latency-only, not refused
    kept = CliRunner().invoke(app, ["fit", str(tmp_path / "flat.jsonl"), "-O", str(out)])
    assert kept.exit_code == 0 and "bandwidth undetermined" in kept.output and "kept latency-only" in kept.output
    (tmp_path / "empty.jsonl").write_text("")
    none = CliRunner().invoke(app, ["fit", str(tmp_path / "empty.jsonl")])
    assert "no usable points" in none.output and none.exit_code == result.exit_code   # refused alike
