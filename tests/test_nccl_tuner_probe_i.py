"""Probe I's findings on `commbench nccl-tuner` and the report's tuning table: the input is never overwritten,
the report and nccl-tuner agree on one file, the example plugin's fill-in rules never force a pair measured
slower than NCCL's default, and no rule spans a wide unmeasured size range."""

from __future__ import annotations

import random

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.records import JsonlWriter, Measurement, RunHeader


def write_results(path, seed: int, n: int, sd: float, specs: dict[str, dict[int, float]]) -> None:
    """One 8-rank run per combination ("default" or "algo/proto/channels"): all_reduce at each size, n samples of
    the true time x (1 + N(0, sd)) (the probe's mk.py)."""
    rng = random.Random(seed)
    with JsonlWriter(str(path)) as writer:
        for i, (name, points) in enumerate(specs.items()):
            algo, proto, channels = (None, None, None) if name == "default" else name.split("/")
            combo = TuningCombo(algo=algo, proto=proto, channels=int(channels) if channels else None)
            writer.write(RunHeader(run_id=f"run{i}", started_at="2026-01-01T00:00:00+00:00", argv=[],
                                   commbench_version="0", python_version="3", torch_version=None, nccl_version="2.28.9",
                                   cuda_version=None, cupy_version=None, backend="nccl", world_size=8,
                                   hostnames=["h1"] * 8, devices=["NVIDIA H100 80GB HBM3"] * 8, nccl_env=combo.env(),
                                   launcher="torchrun"))
            for size, true_us in points.items():
                s = [true_us * (1 + rng.gauss(0, sd)) for _ in range(n)]
                o = sorted(s)
                writer.write(Measurement(run_id=f"run{i}", collective="all_reduce", backend="nccl", size_bytes=size,
                                         count=size // 4, dtype="float32", op="sum", in_place=False, world_size=8,
                                         group_size=8, iters=n, warmup_iters=5,
                                         time_us_median=(o[(n - 1) // 2] + o[n // 2]) / 2, time_us_mean=sum(s) / n,
                                         time_us_min=o[0], time_us_max=o[-1], time_us_p99=o[-1], status="ok",
                                         num_wrong=0, params=combo.params(), iter_times_us=s))


def rule_lines(path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_out_naming_an_input_file_is_refused_even_with_force(tmp_path):
    results = tmp_path / "same.jsonl"
    write_results(results, 7, 50, 0.03, {"default": {1048576: 100.0}, "ring/simple/8": {1048576: 80.0}})
    before = results.read_bytes()
    for args in (["-O", str(results)], ["-O", str(tmp_path / "x.conf"), "--csv", str(results)]):
        out = CliRunner().invoke(app, ["nccl-tuner", str(results), *args, "--force"])
        assert out.exit_code == 2 and out.output.startswith("error: ") and len(out.output.splitlines()) == 1, out.output
        assert "is the input" in out.output and "refused even with --force" in out.output
        assert results.read_bytes() == before
    link = tmp_path / "link.jsonl"
    link.symlink_to(results)
    out = CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(link), "--force"])
    assert out.exit_code == 2 and results.read_bytes() == before


def test_report_tuning_table_and_nccl_tuner_agree_on_one_file(tmp_path):
    """The report read records without their samples and fell back to (p99 - median) / median (6.7% here) where
    nccl-tuner used the samples (2.7%): the config had a rule where the report said 'NCCL default kept'."""
    results = tmp_path / "f1.jsonl"
    write_results(results, 7, 50, 0.03, {"default": {1048576: 100.0}, "ring/simple/8": {1048576: 96.0}})
    conf = tmp_path / "f1.conf"
    assert CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf)]).exit_code == 0
    assert [r[:6] for r in rule_lines(conf)] == [["allreduce", "1048576", "1048576", "ring", "simple", "8"]]
    out = CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "rep")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "rep" / "README.md").read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| 1 MiB |")]
    assert row.rstrip(" |").endswith("ring/simple/8"), row
    assert "NCCL default kept" not in row


def test_example_plugin_fill_in_measured_slower_than_the_default_is_refused(tmp_path):
    """tree/simple/16 is 2.5x slower than NCCL's default at 1 MiB (1.5x faster at 16 MiB): the fill-in rule forced
    it over 0..8.5 MB and the output said 'NCCL default kept in 0 of 2' with a '0.40x gain: maybe noise' note."""
    results = tmp_path / "f3.jsonl"
    write_results(results, 1, 20, 0.01, {"default": {1048576: 100.0, 16777216: 900.0},
                                         "tree/simple/16": {1048576: 250.0, 16777216: 600.0}})
    conf = tmp_path / "f3.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf), "--for", "example-plugin"])
    assert out.exit_code == 2 and len(out.output.splitlines()) == 1 and out.output.startswith("error: "), out.output
    assert "at 1 MiB" in out.output and "2.50x slower" in out.output and "tree/simple/16" in out.output
    assert not conf.exists()


def test_example_plugin_fill_in_within_the_noise_is_said_and_gets_no_gain_note(tmp_path):
    results = tmp_path / "f3b.jsonl"
    write_results(results, 1, 20, 0.01, {"default": {1048576: 100.0, 16777216: 900.0},
                                         "tree/simple/16": {1048576: 100.5, 16777216: 600.0}})
    conf = tmp_path / "f3b.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf), "--for", "example-plugin"])
    assert out.exit_code == 0, out.output
    assert "fill-in: 1 of 2 (collective, size) cell(s) had no winner" in " ".join(out.output.split())
    assert "run to run" not in out.output and "run to run" not in conf.read_text()   # no repeat-spread note
    assert "FILL-IN at 1 MiB" in conf.read_text()


def test_repeat_spread_notes_skip_fill_ins():
    from commbench.results.nccl_tuner import Cell, repeat_spread_notes

    combo = TuningCombo(algo="tree", proto="simple", channels=16)
    cell = Cell(collective="allreduce", nodes=1, ranks=8, min_bytes=0, max_bytes=10, size_bytes=5, choice=combo,
                speedup=1.02, noise_rel=0.01, best=combo, filled=True, default_spread=0.3,
                within_run_spread=True)
    assert repeat_spread_notes([cell]) == []


def test_no_rule_spans_neighbouring_measured_sizes_more_than_8x_apart(tmp_path):
    """1 KiB and 1 GiB measured, ring/ll128/32 faster at both: one rule pair covered 1 KiB..1 GiB (never measured in
    between, where NCCL moves through LL, LL128, Simple and NVLS). Now each rule stops at its measured size."""
    results = tmp_path / "f4.jsonl"
    write_results(results, 1, 20, 0.01, {"default": {1024: 20.0, 1 << 30: 100000.0},
                                         "ring/ll128/32": {1024: 15.0, 1 << 30: 80000.0}})
    conf = tmp_path / "f4.conf"
    out = CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf)])
    assert out.exit_code == 0, out.output
    assert [(int(r[1]), int(r[2])) for r in rule_lines(conf)] == [(1024, 1024), (1 << 30, 1 << 30)]
    assert "1 KiB and 1 GiB are 1048576x apart" in conf.read_text() and "NCCL decides in between" in out.output
    # 8x apart (a sweep with -f 8): the midpoint rule still holds
    results.unlink()
    write_results(results, 1, 20, 0.01, {"default": {1024: 20.0, 8192: 30.0},
                                         "ring/ll128/32": {1024: 15.0, 8192: 20.0}})
    assert CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf), "--force"]).exit_code == 0
    assert [(int(r[1]), int(r[2])) for r in rule_lines(conf)] == [(1024, 8192)]


def test_the_example_plugins_changed_model_constants_are_said_in_docs_and_file(tmp_path):
    """NCCL's example plugin (2.28+) rewrites perChMaxTreeBws, perChMaxRingLL128Bws and hwLatencies in pluginInit."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "nccl-tuner.md").read_text()
    section = docs[docs.index("### What NCCL's example plugin does with the file"):docs.index("## 3. Predicted rules")]
    assert all(name in section for name in ("perChMaxTreeBws", "perChMaxRingLL128Bws", "hwLatencies"))
    results = tmp_path / "r.jsonl"
    write_results(results, 1, 20, 0.01, {"default": {1048576: 100.0}, "tree/simple/16": {1048576: 60.0}})
    conf = tmp_path / "e.conf"
    assert CliRunner().invoke(app, ["nccl-tuner", str(results), "-O", str(conf), "--for", "example-plugin"]).exit_code == 0
    text = conf.read_text()
    assert "perChMaxRingLL128Bws" in text and "changed model" in text
    assert all(len(line.encode()) < 200 for line in text.splitlines())
