"""A results file's last line without its newline: a whole record is kept (the newline added), a torn one is cut and
said in one line naming the file; the writers (bench -O, sweep --resume, import -O) and the readers (report,
compare, fit, sweep --dry-run --resume) agree on which records the file holds."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.files import repair_torn_tail
from commbench.results.records import Measurement, iter_records
from tests.test_output_files import QUICK as QUICK_SWEEP

runner = CliRunner()
QUICK = QUICK_SWEEP.replace("sizes = [8, {last}]", "sizes = [8, 16, 32]")
assert "[8, 16, 32]" in QUICK


def measured(path: Path) -> list[Measurement]:
    return [r for r in iter_records(path) if isinstance(r, Measurement)]


def swept(tmp_path: Path) -> tuple[Path, Path]:
    sweep = tmp_path / "q.toml"
    sweep.write_text(QUICK)
    out = tmp_path / "q.jsonl"
    first = runner.invoke(app, ["sweep", str(sweep), "-O", str(out)])
    assert first.exit_code == 0, first.output
    return sweep, out


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    lines = ['{"record_type":"header","run_id":"a"}', '{"record_type":"measurement","run_id":"a","size_bytes":8}']
    path.write_text("\n".join(lines))   # a script's '\n'.join, an editor that adds no final newline
    assert repair_torn_tail(path) == 0
    assert path.read_text() == "\n".join(lines) + "\n"
    assert capsys.readouterr().err == ""


def test_a_torn_last_line_is_cut_and_said_naming_the_file(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text('{"record_type":"header","run_id":"a"}\n{"record_type":"measurement","run_id":"a","si')
    assert repair_torn_tail(path) == 45
    assert path.read_text() == '{"record_type":"header","run_id":"a"}\n'
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and str(path) in said[0] and "line 2" in said[0] and "45 bytes" in said[0], said


def test_a_torn_line_longer_than_the_read_chunk_cuts_only_itself(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"record_type":"header","run_id":"a"}\n' + b'{"record_type":"measurement","x":"' + b"7" * (3 << 20))
    repair_torn_tail(path)
    assert path.read_text() == '{"record_type":"header","run_id":"a"}\n'   # was: the whole file emptied


def test_bench_appending_keeps_a_complete_last_record_without_newline(tmp_path):
    _, out = swept(tmp_path)
    out.write_bytes(out.read_bytes()[:-1])
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "8", "-n", "2", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert [m.size_bytes for m in measured(out)] == [8, 16, 32, 8]
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_resume_and_its_dry_run_agree_on_a_last_record_without_newline(tmp_path):
    sweep, out = swept(tmp_path)
    lines = out.read_text().splitlines()
    last = json.loads(lines[-1])
    last.update(status="failed", error="rank 1 was killed by SIGKILL", time_us_median=None)
    out.write_text("\n".join(lines[:-1] + [json.dumps(last)]))   # the failed point's line, no final newline
    dry = runner.invoke(app, ["sweep", str(sweep), "-O", str(out), "--resume", "--dry-run"])
    assert dry.exit_code == 0 and "3 of these point(s) are already in" in dry.output, dry.output
    result = runner.invoke(app, ["sweep", str(sweep), "-O", str(out), "--resume"])
    # README: a resumed sweep whose file holds a failed point of it exits 1 naming it, measuring nothing again
    assert result.exit_code == 1 and "failed" in result.output and "rank 1 was killed" in result.output, result.output
    assert [m.status for m in measured(out)] == ["ok", "ok", "failed"]


def test_a_file_whose_only_line_is_a_torn_header_is_repaired_by_sweep_as_by_bench(tmp_path):
    """Probe AC F4: `sweep` said "already holds records: pass --resume", `sweep --resume` said "not a commbench
    results file", each sending the user to the other; `bench -O` repairs such a file (cuts it, writes a header)."""
    sweep = tmp_path / "q.toml"
    sweep.write_text(QUICK)
    header = '{"record_type":"header","run_id":"cut","started_at":"2026-01-01T00:00:00+00:00","argv":["comm'
    for resume in ([], ["--resume"]):
        out = tmp_path / f"torn{len(resume)}.jsonl"
        out.write_text(header)
        dry = runner.invoke(app, ["sweep", str(sweep), "-O", str(out), "--dry-run", *resume])
        assert dry.exit_code == 0, dry.output
        assert out.read_text() == header   # a dry run touches nothing
        result = runner.invoke(app, ["sweep", str(sweep), "-O", str(out), *resume])
        assert result.exit_code == 0, result.output
        assert [json.loads(line)["record_type"] for line in out.read_text().splitlines()] == ["header"] + ["measurement"] * 3
