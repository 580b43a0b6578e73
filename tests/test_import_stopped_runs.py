"""import nccl-tests: a log whose run has no footer after its rows ('# Out of bounds values', '# Avg bus
bandwidth') stopped during that run (an NCCL failure, a kill, a job's time limit). Its rows were imported as if the
run were whole, with exit 0 and no word: a run cut to its first sizes passed for the sweep. It is now a warning
line naming the run (and --strict exits 1); whole logs say nothing."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from tests.test_import_nccl_tests import DATA


def _cut(tmp_path, lines: int, tail: str = "") -> str:
    text = (DATA / "all_reduce_perf-2018.log").read_text().splitlines()[:lines]
    path = tmp_path / "all_reduce_perf-cut.log"
    path.write_text("\n".join(text) + "\n" + tail)
    return str(path)


def test_a_run_without_its_footer_is_named_as_stopped(tmp_path):
    log = _cut(tmp_path, 17, "dgx1-01: Test NCCL failure common.cu:393 'unhandled system error'\n")
    result = import_file(log)
    assert result.stopped == [(log, 16)] and len(result.records) == 1 + 4, result.stopped
    out = CliRunner().invoke(app, ["import", "nccl-tests", log, "-O", str(tmp_path / "r.jsonl")])
    assert out.exit_code == 0 and "warning: " + log + ":16: the run whose rows start here stopped" in out.output
    assert "no footer" in out.output, out.output
    strict = CliRunner().invoke(app, ["import", "nccl-tests", _cut(tmp_path, 17), "-O", str(tmp_path / "s.jsonl"),
                                      "--strict"])
    assert strict.exit_code == 1 and "stopped" in strict.output, strict.output


def test_whole_logs_are_not_stopped():
    for name in ("all_reduce_perf-2018.log", "multi-collective-2.14.log", "all_gather_perf-2.0.0.log",
                 "broadcast-per-iter.log", "reduce_scatter-root-error.log"):
        assert import_file(str(DATA / name)).stopped == [], name
