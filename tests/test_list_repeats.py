"""A list option that repeats a value (`--tokens 64,64`, `--algorithm flat,flat`, `group_sizes = [2, 2]`) measures
each point once and says so in the run's notes. `bench --tokens 64,64` recorded the 64-token point twice in one run,
which report and compare then refused as "holds ... twice with different measurements" (probe U, session 33); a
repeated --algorithm name reached the workload as 'flat,flat' and failed every point."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from collectives import get_collective
from commbench.cli.app import app
from commbench.measure.bench import BenchConfig, planned_points, repeat_notes
from commbench.measure.subgroups import SubgroupSpec
from commbench.moe.params import sweep_params
from commbench.repeats import repeat_note, repeated, unique_in_order

runner = CliRunner()
MOE = ["--hidden", "64", "--experts", "4", "--top-k", "2", "-n", "2", "-w", "0"]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_repeats_are_named_once_in_order():
    assert unique_in_order([64, 32, 64, 16, 32]) == [64, 32, 16]
    assert repeated([64, 32, 64, 16, 32, 64]) == [64, 32]
    assert repeat_note("--tokens", [1, 2]) is None
    assert repeat_note("--tokens", [8, 8]).startswith("--tokens lists 8 more than once")


def test_moe_tokens_listed_twice_plan_one_point_each():
    points = sweep_params({"tokens_per_rank": [64, 32, 64], "num_experts": 4, "top_k": 2, "hidden": 64}, 2)
    assert [p.tokens_per_rank for p in points] == [64, 32]


def test_an_algorithm_listed_twice_is_one_point_of_that_algorithm():
    config = BenchConfig(collective="grad_reduce_scatter", sizes_bytes=(1024,),
                         params={"algorithm": "flat,flat", "rs_impl": "auto"},
                         subgroups=SubgroupSpec(sizes=(2, 2), layouts=("contiguous", "contiguous")))
    points = planned_points(config, get_collective("grad_reduce_scatter"), 2)
    assert [(p.spec.params["algorithm"], len(p.groups[0]), p.group.layout) for p in points] == [("flat", 2, "contiguous")]
    notes = repeat_notes(config)
    assert [n.split(" lists ")[0] for n in notes] == ["--algorithm", "--group-sizes", "--group-layout"]


def test_bench_tokens_listed_twice_records_each_point_once_and_report_reads_it(tmp_path):
    out = tmp_path / "moe.jsonl"
    result = runner.invoke(app, ["bench", "moe_all_to_all", "--nproc", "2", "--backend", "gloo", "--tokens", "64,32,64",
                                 *MOE, "-O", str(out)])
    assert result.exit_code == 0, result.output
    header, *records = _lines(out)
    assert [r["params"]["tokens_per_rank"] for r in records] == [64, 32]
    assert header["planned_points"] == 2
    assert any(n.startswith("--tokens lists 64 more than once") for n in header["notes"]), header["notes"]
    shown = runner.invoke(app, ["report", str(out), "-O", str(tmp_path / "report")])
    assert shown.exit_code == 0, shown.output


def test_bench_algorithm_listed_twice_measures_it_once(tmp_path):
    out = tmp_path / "grs.jsonl"
    result = runner.invoke(app, ["bench", "grad_reduce_scatter", "--nproc", "2", "--backend", "gloo", "-b", "1K",
                                 "-e", "1K", "-n", "2", "-w", "0", "--algorithm", "flat,flat", "-O", str(out)])
    assert result.exit_code == 0, result.output
    header, *records = _lines(out)
    assert [(r["params"]["algorithm"], r["status"], r["num_wrong"]) for r in records] == [("flat", "ok", 0)]
    assert any(n.startswith("--algorithm lists flat more than once") for n in header["notes"]), header["notes"]


def test_sweep_names_repeated_values_by_their_keys(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[[run]]\ncollective = "moe_all_to_all"\ntokens_per_rank = [64, 64]\nhidden = 64\n'
                     'num_experts = 4\ntop_k = 2\n'
                     '[[run]]\ncollective = "grad_reduce_scatter"\nsizes = ["1K"]\nalgorithm = "flat,flat"\n')
    result = runner.invoke(app, ["sweep", str(sweep), "--dry-run", "--json", "--nproc", "2", "--backend", "gloo"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["points"]) == 2
    assert [n.split(": ", 1)[1].split(" more")[0] for n in doc["size_notes"]] == [
        "tokens_per_rank lists 64", "algorithm lists flat"]
