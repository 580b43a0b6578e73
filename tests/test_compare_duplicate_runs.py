"""compare: a run whose records repeat an earlier run of the file exactly (an nccl-tests log imported twice into
one file, a run re-written under a new run id) is one run counted twice: two runs with no scatter between them
made the run-to-run noise zero and the gate judged on nothing but the threshold. It is counted once, and said."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare
from commbench.results.records import measurements, read_records
from tests.test_compare import A, B, scaled
from tests.test_import_nccl_tests import DATA as NCCL_TESTS


def test_a_run_repeated_under_another_run_id_counts_once():
    base = measurements(read_records([A]))
    twice = base + [dataclasses.replace(m, run_id="copy") for m in base]
    new = measurements(read_records([B]))
    result = compare(twice, new, max_regression=0.1)
    assert result.runs["base"] == 1 and result.run_to_run.scatter_from == "the pair"
    assert [p.verdict for p in result.points] == [p.verdict for p in compare(base, new, max_regression=0.1).points]
    assert compare(twice, twice, max_regression=0.1).runs == {"base": 1, "new": 1, "history": 0}


def test_a_log_imported_twice_is_one_run_and_the_compare_says_so(tmp_path):
    out = tmp_path / "twice.jsonl"
    for _ in range(2):
        # a log holding its banner's whole sweep (all_gather_perf-2.0.0.log holds 3 of its banner's 8 sizes: cut short)
        assert CliRunner().invoke(app, ["import", "nccl-tests", str(NCCL_TESTS / "multi-collective-2.14.log"),
                                        "-O", str(out)]).exit_code == 0
    result = CliRunner().invoke(app, ["compare", str(out), str(out), "--allow-same-run"])
    assert result.exit_code == 0, result.output
    assert "2 run(s) repeating an earlier run of the file record for record: counted once" in result.output   # its 2


def test_the_baseline_copied_into_the_history_is_not_a_second_run(tmp_path):
    history = tmp_path / "history"
    history.mkdir()
    (history / "base.jsonl").write_text(A.read_text())
    # another baseline run: B's times x1.02 under a run id of its own (B itself there is NEW's own run, left out:
    # test_compare_history_of_new.py)
    other = scaled(B, 1.02, history / "other.jsonl")
    Path(other).write_text(Path(other).read_text().replace("7491bab432c1", "0the3other0"))
    result = CliRunner().invoke(app, ["compare", str(A), str(B), "--history", str(history)])
    assert "history: 1 run(s) repeating an earlier run" in result.output, result.output
    assert "history 1" in result.output  # runs: base 1, new 1, history 1
