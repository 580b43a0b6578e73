"""`predict reduce_scatter` on a profile fitted from a reduce_scatter sweep and a grad_reduce_scatter (flat) run: the
profile kept the curve of more points, the grad_reduce_scatter 'stage total', so the user's own reduce_scatter sweep
did not predict reduce_scatter, and the fitted range was the union of both (session 45). The collective's own curve
now predicts; where only a stage's curve exists, the output says which curve it is."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_fit import SIZES, _header, _record

KIB256 = 256 * 1024


def _files(tmp_path) -> tuple[str, str]:
    plain, staged = tmp_path / "rs.jsonl", tmp_path / "grs.jsonl"
    with JsonlWriter(plain) as writer:   # 6 points: 30 µs + size / 10 GB/s
        writer.write(_header("plain", world_size=4))
        for size in SIZES[8:20:2]:
            writer.write(_record("reduce_scatter", size, 30.0 + size / 1e4, 4, world=4, run_id="plain"))
    with JsonlWriter(staged) as writer:  # 20 points of another workload: 10 µs + size / 30 GB/s
        writer.write(_header("grs", world_size=4))
        for size in (s - s % 16 for s in SIZES[8:28]):   # whole float32 shards on 4 ranks, as a writer sizes them
            writer.write(_record("grad_reduce_scatter", size, 10.0 + size / 3e4, 4, world=4, run_id="grs",
                                 params={"algorithm": "flat"}))
    return str(plain), str(staged)


def _predict(tmp_path, *results: str, json_out: bool = True):
    fabric = str(tmp_path / f"fabric{len(results)}.json")
    fitted = CliRunner().invoke(app, ["fit", *results, "-O", fabric])
    assert fitted.exit_code == 0, fitted.output
    args = ["predict", "-c", "reduce_scatter", "--fabric", fabric, "-g", "4", "-b", "256K", "-e", "256K"]
    out = CliRunner().invoke(app, args + (["--json"] if json_out else []), env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout) if json_out else out.output


def test_the_collectives_own_curve_predicts_it_beside_a_stage_of_more_points(tmp_path):
    plain, staged = _files(tmp_path)
    doc = _predict(tmp_path, plain, staged)
    assert abs(doc["rows"][0]["time_us"] - (30.0 + KIB256 / 1e4)) < 0.5, doc["rows"]
    assert doc["fitted_range"]["max_size_bytes"] == SIZES[18], doc["fitted_range"]   # the sweep's own sizes
    assert "stage" not in doc["fitted_range"]["curve"]


def test_a_stage_curve_alone_is_named_as_such(tmp_path):
    _, staged = _files(tmp_path)
    doc = _predict(tmp_path, staged)
    assert abs(doc["rows"][0]["time_us"] - (10.0 + KIB256 / 3e4)) < 0.5, doc["rows"]
    assert "from grad_reduce_scatter stage total" in doc["fitted_range"]["curve"], doc["fitted_range"]
    said = " ".join(_predict(tmp_path, staged, json_out=False).split())
    assert "curve: reduce_scatter (scale_up) from grad_reduce_scatter stage total" in said, said
