"""`commbench report` dropped the notes its records carry: a gloo reduce_scatter tabled and drawn as a
reduce-scatter's busbw where its record says 'gloo (torch 2.13) implements reduce_scatter as a full all-reduce; its
time is not a true reduce-scatter's', an out-of-place all_reduce whose time includes a device copy. Now every
curve's distinct notes print under its table, on the terminal and in README.md."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement, RunHeader

NOTE = "gloo (torch 2.13) implements reduce_scatter as a full all-reduce; its time is not a true reduce-scatter's"


def test_record_notes_are_said_under_their_curve(tmp_path):
    results = tmp_path / "rs.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(RunHeader(run_id="r", started_at="2026-12-04T00:00:00+00:00", argv=[], commbench_version="0",
                               python_version="3", torch_version="2.13", nccl_version=None, cuda_version=None,
                               cupy_version=None, backend="gloo", world_size=4, hostnames=["vm"] * 4,
                               devices=["cpu"] * 4, nccl_env={}, launcher="local"))
        for collective, notes in (("reduce_scatter", [NOTE]), ("all_gather", [])):
            for p in (10, 12):
                writer.write(Measurement(run_id="r", collective=collective, backend="gloo", size_bytes=1 << p,
                                         count=(1 << p) // 16, dtype="float32", op="sum" if notes else None,
                                         in_place=False, world_size=4, group_size=4, iters=5, warmup_iters=1,
                                         time_us_median=500.0, algbw_gbps=(1 << p) / 500.0 / 1e3,
                                         busbw_gbps=(1 << p) / 500.0 / 1e3 * 0.75, num_wrong=0,
                                         notes=notes))
    result = CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "rep")], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert result.output.count(NOTE) == 1, result.output
    readme = (tmp_path / "rep" / "README.md").read_text()
    rs = readme[readme.index("## reduce_scatter"):]
    assert readme.count(NOTE) == 1 and NOTE in rs
    assert NOTE not in readme[readme.index("## all_gather"):readme.index("## reduce_scatter")]
