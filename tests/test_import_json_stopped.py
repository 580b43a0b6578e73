"""A -J file of a run that failed mid-way has no out_of_bounds / average_bus_bandwidth / end_time keys (nccl-tests
writes them after the last size; main finalizes the file before TESTCHECK fails): it imported as a complete run, no
warning, and compare --allow-missing passed it. It is warned and planned as a footer-less text log is, so compare
fails it as cut short."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import RunHeader
from tests.nccl_tests_inputs import json_file


def _header(result) -> RunHeader:
    (header,) = [r for r in result.records if isinstance(r, RunHeader)]
    return header


def test_a_json_file_without_its_closing_keys_is_a_stopped_run_with_its_plan(tmp_path):
    cut = json.loads(json_file(closed=False))
    cut["results"] = cut["results"][:2]
    (tmp_path / "cut.json").write_text(json.dumps(cut))
    (tmp_path / "whole.json").write_text(json_file())
    stopped, whole = import_file(str(tmp_path / "cut.json")), import_file(str(tmp_path / "whole.json"))
    assert len(stopped.stopped) == 1 and "out_of_bounds" in stopped.stopped[0][2]
    assert _header(stopped).planned_points == 6 and "banner's 3 size(s)" in _header(stopped).notes[-1]
    # a whole file plans what it holds (the banner's sweep, every run: nccl_tests_planned), nothing missing
    assert whole.stopped == [] and _header(whole).planned_points == 6 and _header(whole).notes[-1].endswith("6 held")
    runner = CliRunner()
    for name in ("cut", "whole"):
        out = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.json"), "-O",
                                  str(tmp_path / f"{name}.jsonl")])
        assert out.exit_code == 0, out.output
    gate = runner.invoke(app, ["compare", str(tmp_path / "whole.jsonl"), str(tmp_path / "cut.jsonl"), "--allow-missing"])
    assert gate.exit_code == 1 and "cut short" in gate.output and "holds 4 of the 6 point(s)" in gate.output, gate.output
    assert "`all_reduce_perf` (run" in gate.output, gate.output   # its binary, not "-b 1M"
