"""report and duplicates (probe H, F9): a line repeated in one file was tabled and drawn twice (compare reads it once);
a repeated line with other numbers was tabled beside the first with no word (compare refuses it); one log imported
three times into one file showed as three runs agreeing exactly, with no note at import or in the report (compare
counts them once)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.nccl_tests_inputs import text_log
from tests.test_compare import A

runner = CliRunner()


def _rows_of(output: str, size_text: str) -> int:
    return sum(1 for line in output.splitlines() if line.lstrip("│ ").startswith(size_text))


def test_a_line_twice_in_one_file_is_tabled_once_and_a_conflicting_copy_refused(tmp_path):
    lines = A.read_text().splitlines()
    point = next(i for i, line in enumerate(lines) if json.loads(line)["record_type"] == "measurement")
    single = runner.invoke(app, ["report", str(A), "-O", str(tmp_path / "r0")], terminal_width=200)
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(lines + [lines[point]]) + "\n")
    twice = runner.invoke(app, ["report", str(dup), "-O", str(tmp_path / "r1")], terminal_width=200)
    assert twice.exit_code == 0, twice.output
    assert "in it twice, identical" in twice.output, twice.output
    size = json.loads(lines[point])["size_bytes"]
    # the same table as the file without the copy
    assert twice.output.count("│") == single.output.count("│"), (size, twice.output)
    changed = json.loads(lines[point])
    changed.update({k: v * 2 for k, v in changed.items() if k.startswith("time_us_") and v is not None},
                   iter_times_us=[t * 2 for t in changed["iter_times_us"]],   # agrees with its own samples
                   algbw_gbps=changed["algbw_gbps"] / 2, busbw_gbps=changed["busbw_gbps"] / 2)   # and its size
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines + [json.dumps(changed)]) + "\n")
    refused = runner.invoke(app, ["report", str(bad), "-O", str(tmp_path / "r2")])
    assert refused.exit_code == 2 and "twice with different measurements" in refused.output, refused.output
    assert "Traceback" not in refused.output


def test_a_log_imported_again_is_said_at_import_and_drawn_once(tmp_path):
    (tmp_path / "ar.log").write_text(text_log())
    out = tmp_path / "x.jsonl"
    first = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "ar.log"), "-O", str(out)])
    assert first.exit_code == 0 and "repeats run" not in first.output, first.output
    again = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "ar.log"), "-O", str(out)])
    assert again.exit_code == 0 and "repeats run" in again.output and "imported again" in again.output, again.output
    report = runner.invoke(app, ["report", str(out), "-O", str(tmp_path / "rep")], terminal_width=200)
    assert report.exit_code == 0 and "record for record" in report.output, report.output
    once = tmp_path / "once.jsonl"
    assert runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "ar.log"), "-O", str(once)]).exit_code == 0
    alone = runner.invoke(app, ["report", str(once), "-O", str(tmp_path / "rep1")], terminal_width=200)
    assert report.output.count("│") == alone.output.count("│")   # one run's tables, not two
