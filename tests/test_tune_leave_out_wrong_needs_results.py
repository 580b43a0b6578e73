"""`tune --leave-out-wrong` without --results was silently ignored (probe BS F4): the sweep tune runs stops at the
first point with wrong data whatever the option says, so a user counting on it got exit 1 and no plan. It is refused
in one line, like --sweep and --nproc with --results, before anything runs or is written."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app


def test_leave_out_wrong_without_results_is_refused(tmp_path):
    out = tmp_path / "tune_x"
    result = CliRunner().invoke(app, ["tune", "--leave-out-wrong", "-O", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "--leave-out-wrong applies only with --results" in lines[0], result.output
    assert not out.exists()
