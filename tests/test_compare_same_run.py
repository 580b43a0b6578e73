"""compare: a NEW that holds no run of its own (every run of it is a run of BASE: the same file, a copy, one
nccl-tests log imported twice) is no new measurement; a CI step that wrote nothing or the wrong path passed the gate
("pass: 10 point(s)"). Refused in one line (exit 2) unless --allow-same-run; decided by run id and records, not path."""

from __future__ import annotations

import re
import shutil

import numpy as np

from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import A, B, record, write
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
    said = " ".join(result.output.split())
    assert "note: 1 of the new file's 2 run(s) are the base's" in said and "left out of the new file" in said, said
    assert "runs: base 1, new 1," in said, said   # the copy of BASE is not judged as a run of NEW
    assert _compare(A, B).output.count("the base's") == 0


def _runs(tag: str, factor: float, seed: int, num_runs: int = 3) -> list:
    """`num_runs` runs of 9 all_reduce sizes, 40 iterations each: a run shift and a point scatter of 0.3 log sd (a
    shared host), every time x `factor`."""
    rng = np.random.default_rng(seed)
    out = []
    for index in range(num_runs):
        shift = rng.normal(0, 0.3)
        for size in [8 * 4 ** i for i in range(9)]:
            samples = (50 + size / 1000) * factor * np.exp(shift + rng.normal(0, 0.3) + np.abs(rng.normal(0, 0.3, 40)))
            out.append(record(size, samples, run_id=f"{tag}{index}"))
    return out


def test_the_base_copied_into_new_does_not_dilute_a_regression(tmp_path):
    """`cp baseline.jsonl out.jsonl; bench -N 3 -O out.jsonl`: NEW holds BASE's 3 runs and 3 runs x3 slower. Judged
    as NEW's runs, BASE's copies pulled its mean down to x1.6 and the gate passed (probe PD: "pass: 9 point(s) in 6
    run(s)") where the 3 slow runs alone fail; they are left out of NEW, said in one line."""
    base, slow = _runs("b", 1, 0), _runs("n", 3, 10)
    base_file, slow_file = write(tmp_path / "base.jsonl", base), write(tmp_path / "slow.jsonl", slow)
    appended = write(tmp_path / "appended.jsonl", base + slow)
    alone = _compare(base_file, slow_file)
    assert alone.exit_code == 1, alone.output
    result = _compare(base_file, appended)
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert "note: 3 of the new file's 6 run(s) are the base's" in said and "its other 3 run(s) judged" in said, said
    geomean = re.search(r"slower as a whole: geomean x[0-9.]+", " ".join(alone.output.split())).group()
    assert "runs: base 3, new 3," in said and geomean in said, (geomean, said)   # the 3 slow runs, as alone
