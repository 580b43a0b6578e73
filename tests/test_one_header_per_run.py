"""One run id, one header (results.run_headers): two files holding one run id under different headers (one copy
edited: another torch version, other hosts) passed every reader that merges files, the header read last silently
standing for the run (session 46, fix-F2). fit, report, nccl-tuner and compare now refuse such a pair in one
line naming the run id, both files and the first differing field (and fit and tune --results two
headers of one run in one file: files concatenated by hand); the same file given twice and an unedited `cp`
copy still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_fit_reads_like_compare import one_error, points
from tests.test_compare import write
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _record


def edited_copy(path: str, out: Path, **changes) -> str:
    """A copy of `path` whose header lines carry `changes` (a copy edited by hand)."""
    lines = []
    for line in Path(path).read_text().splitlines():
        data = json.loads(line)
        if data.get("record_type") == "header":
            data.update(changes)
        lines.append(json.dumps(data))
    out.write_text("\n".join(lines) + "\n")
    return str(out)


def test_fit_tune_report_and_compare_refuse_one_run_under_two_headers(tmp_path):
    clean = write(tmp_path / "a.jsonl", points())
    edited = edited_copy(clean, tmp_path / "b_edited.jsonl", torch_version="2.5.0")
    said = ("run r:", "a.jsonl and", "b_edited.jsonl hold different headers of it, first in torch_version "
            "(None vs '2.5.0')")
    for args in (["fit", clean, edited, "-O", str(tmp_path / "f.json")],
                 ["report", clean, edited, "-O", str(tmp_path / "rep")],
                 ["compare", clean, edited],
                 ["compare", clean, edited, "--allow-same-run"]):
        one_error(CliRunner().invoke(app, args, env={"COLUMNS": "400"}), 2, *said)
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "rep" / "README.md").exists()


def test_two_headers_of_one_run_in_one_file_are_refused_too(tmp_path):
    clean = write(tmp_path / "a.jsonl", points())
    edited = edited_copy(clean, tmp_path / "b.jsonl", hostnames=["h", "g"])
    both = tmp_path / "cat.jsonl"   # files concatenated by hand
    both.write_text(Path(clean).read_text() + Path(edited).read_text())
    for args in (["fit", str(both), "-O", str(tmp_path / "f.json")],   # tune --results takes one file
                 ["tune", "--results", str(both), "-O", str(tmp_path / "t")]):
        one_error(CliRunner().invoke(app, args, env={"COLUMNS": "400"}), 2, "run r:",
                  "cat.jsonl holds two different headers of it, first in hostnames (['h', 'h'] vs ['h', 'g'])")
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "t" / "plan.json").exists()


def test_nccl_tuner_refuses_one_run_under_two_headers(tmp_path):
    path = tmp_path / "a.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for record in [_record("a", size, combo, us) for size in (1024, 4096)
                       for combo, us in ((DEFAULT, 100.0), (RING_LL, 60.0))]:
            writer.write(record)
    edited = edited_copy(str(path), tmp_path / "b.jsonl", nccl_version="2.21.5")
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), edited, "-O", str(tmp_path / "c.conf")],
                                env={"COLUMNS": "400"})
    one_error(result, 2, "run a:", "nccl_version ('2.28.9' vs '2.21.5')", "a.jsonl and", "b.jsonl hold")
    assert not (tmp_path / "c.conf").exists()
    copy = shutil.copy(path, tmp_path / "copy.jsonl")   # an unedited copy: the same header
    for files in ([str(path), str(path)], [str(path), str(copy)]):
        result = CliRunner().invoke(app, ["nccl-tuner", *files, "-O", str(tmp_path / "ok.conf")])
        assert "different headers" not in result.output, result.output


def test_the_same_file_twice_and_an_unedited_copy_still_read(tmp_path):
    clean = write(tmp_path / "a.jsonl", points())
    copy = str(shutil.copy(clean, tmp_path / "copy.jsonl"))
    for second in (clean, copy):
        for args in (["fit", clean, second, "-O", str(tmp_path / "f.json")],
                     ["report", clean, second, "-O", str(tmp_path / "rep")],
                     ["compare", clean, second, "--allow-same-run"]):
            result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
            assert result.exit_code == 0 and "different headers" not in result.output, (args, result.output)


def test_header_difference_names_the_first_field_that_differs():
    from dataclasses import replace

    from commbench.results.run_headers import header_difference

    header = _header("a", ["h"] * 2)
    assert header_difference(header, replace(header)) is None
    assert header_difference(header, replace(header, world_size=4, hostnames=["h"] * 4)) == "world_size (2 vs 4)"
