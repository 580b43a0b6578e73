"""compare: a NEW that holds no run of its own (every run of it is a run of BASE: the same file, a copy, one
nccl-tests log imported twice) is no new measurement; a CI step that wrote nothing or the wrong path passed the gate
("pass: 10 point(s)"). Refused in one line (exit 2) unless --allow-same-run; decided by run id and records, not path."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import A, B
from tests.test_import_nccl_tests import DATA as NCCL_TESTS


def _compare(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def _one_error(result) -> str:
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def test_the_same_file_or_a_copy_is_refused_unless_allowed(tmp_path):
    copy = tmp_path / "new.jsonl"
    shutil.copy(A, copy)
    for new in (A, copy):
        line = _one_error(_compare(A, new))
        assert "holds no run of its own" in line and "the same run id and measurements" in line, line
        assert "--allow-same-run" in line
    allowed = _compare(A, copy, "--allow-same-run")
    assert allowed.exit_code == 0 and "allowed (--allow-same-run)" in allowed.output, allowed.output


def test_a_log_imported_twice_is_the_same_run_under_another_id(tmp_path):
    files = []
    for name in ("base.jsonl", "new.jsonl"):
        files.append(tmp_path / name)
        # a log holding its banner's whole sweep (all_gather_perf-2.0.0.log holds 3 of its banner's 8 sizes: cut short)
        assert CliRunner().invoke(app, ["import", "nccl-tests", str(NCCL_TESTS / "multi-collective-2.14.log"),
                                        "-O", str(files[-1])]).exit_code == 0
    line = _one_error(_compare(*files))
    assert "the same records under another run id" in line, line


def test_a_new_run_appended_to_a_copy_of_the_base_is_judged_and_the_copy_named(tmp_path):
    new = tmp_path / "new.jsonl"
    new.write_text(A.read_text() + B.read_text())
    result = _compare(A, new)
    assert result.exit_code == 0, result.output
    assert "note: 1 of the new file's 2 run(s) are the base's" in " ".join(result.output.split()), result.output
    assert _compare(A, B).output.count("the base's") == 0
