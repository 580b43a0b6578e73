"""nccl-tests 2.9-2.11 logs print a point's max error (`error`, "%5.0le"), not #wrong, and count failed checks only in
the footer ("# Out of bounds values : N FAILED"). A log whose check FAILED imported every point ok with num_wrong
None, fit called it "measured without the data check" and compare passed it against a good log. An error beyond
nccl-tests' own bound (DeltaMaxValue x (nranks - 1)), or the footer's FAILED, now marks the points wrong."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement, read_records
from tests.nccl_tests_inputs import v211_log


def _points(path):
    return [m for m in read_records([str(path)]) if isinstance(m, Measurement)]


def _import(tmp_path, name, text):
    (tmp_path / f"{name}.log").write_text(text)
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.log"), "--collective", "all_reduce",
                                      "--nccl-tests-version", "2.11.0", "-O", str(tmp_path / f"{name}.jsonl")])
    assert result.exit_code == 0, result.output
    return tmp_path / f"{name}.jsonl", " ".join(result.output.split())


def test_an_error_beyond_nccl_tests_bound_is_wrong_data_and_compare_fails_it(tmp_path):
    good, _ = _import(tmp_path, "good", v211_log())
    bad, said = _import(tmp_path, "bad", v211_log(("4e+02",) * 3, footer="# Out of bounds values : 6 FAILED"))
    assert {m.num_wrong for m in _points(good)} == {None}   # a nonzero error within the bound: checked, count unknown
    assert [m.num_wrong for m in _points(bad)] == [1] * 6 and "6 point(s) with wrong data" in said, said
    assert any("beyond its bound 1e-05" in note for note in _points(bad)[0].notes)
    gate = CliRunner().invoke(app, ["compare", str(good), str(bad)])
    assert gate.exit_code == 1 and "wrong" in gate.output, gate.output
    fit = CliRunner().invoke(app, ["fit", str(good), "-O", str(tmp_path / "fab.json")])
    assert "without the data check" not in fit.output, fit.output   # 2e-07 is within the bound: checked


def test_a_failed_footer_marks_the_points_no_row_told_apart(tmp_path):
    # 1e-05 is the bound itself as printed (one significant digit): only the footer says the check failed
    text = v211_log(("1e-05", "0e+00", "1e-05"), footer="# Out of bounds values : 4 FAILED")
    path, said = _import(tmp_path, "amb", text)
    assert [m.num_wrong for m in _points(path)] == [1, 1, 0, 0, 1, 1]
    assert "footer says '# Out of bounds values : 4 FAILED'" in said, said
    listed = import_file(str(tmp_path / "amb.log"), "all_reduce")   # in memory: the same
    assert [m.num_wrong for m in listed.records if isinstance(m, Measurement)] == [1, 1, 0, 0, 1, 1]
    ok, _ = _import(tmp_path, "ok", text.replace("4 FAILED", "0 OK"))
    assert [m.num_wrong for m in _points(ok)] == [None, None, 0, 0, None, None]
