"""fit and tune --results read a results file by compare's and report's rules (probe AC F2, F3): a run holding one
point twice with different measurements is refused (which copy to fit is unknown), a file a commbench run is still
writing is refused until it ends, and a profile fitted before a run's last points were written is said to be older
than its results."""

from __future__ import annotations


import numpy as np
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import record, write

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


def points(run_id: str = "r"):
    rng = np.random.default_rng(2)
    return [record(size, (20 + size / 2e4) * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id) for size in SIZES]


def one_error(result, code: int, *must: str) -> str:
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == code and len(errors) == 1 and "Traceback" not in result.output, result.output
    for text in must:
        assert text in errors[0], errors[0]
    return errors[0]


def test_a_point_twice_with_different_measurements_is_refused_by_fit_and_tune_as_by_compare(tmp_path):
    clean = points()
    copy = record(clean[1].size_bytes, [t * 10 for t in clean[1].iter_times_us], run_id=clean[1].run_id)
    path = write(tmp_path / "conflict.jsonl", clean + [copy])
    for args in (["fit", path, "-O", str(tmp_path / "f.json")], ["tune", "--results", path, "-O", str(tmp_path / "t")],
                 ["compare", write(tmp_path / "base.jsonl", points("b")), path]):
        one_error(CliRunner().invoke(app, args), 2, "run r holds all_reduce float32 256 KiB n=2 twice with different "
                                                    "measurements")
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "t" / "plan.json").exists()
    same = write(tmp_path / "dup.jsonl", clean + [clean[1]])   # an identical copy is harmless: read once
    assert CliRunner().invoke(app, ["fit", same]).exit_code == 0
    other = write(tmp_path / "other.jsonl", [copy])   # the same run in two files, measured apart
    one_error(CliRunner().invoke(app, ["fit", write(tmp_path / "clean.jsonl", clean), other]), 2,
              "holds all_reduce float32 256 KiB n=2 twice", "clean.jsonl", "other.jsonl")


def test_a_file_still_being_written_is_refused_by_fit_and_tune_as_by_compare(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = write(tmp_path / "live.jsonl", points())
    repo = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from commbench.files import OutputLock; lock = OutputLock(sys.argv[2], '-O');"
                               "print('locked', flush=True); time.sleep(60)", str(repo), path],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for args in (["fit", path, "-O", str(tmp_path / "f.json")], ["tune", "--results", path, "-O", str(tmp_path / "t")],
                     ["compare", write(tmp_path / "base.jsonl", points("b")), path]):
            one_error(CliRunner().invoke(app, args), 2, f"is still being written by PID {holder.pid}",
                      "(a commbench run in progress)", "once that run has ended")
        assert not (tmp_path / "f.json").exists() and not (tmp_path / "t" / "plan.json").exists()
    finally:
        holder.kill()
        holder.wait()
    assert CliRunner().invoke(app, ["fit", path, "-O", str(tmp_path / "f.json")]).exit_code == 0


def test_points_added_to_a_fitted_run_make_the_profile_stale(tmp_path):
    """The staleness check compared run ids only: a run whose last points were written after the fit (fitted while
    it was still being written, or appended to by hand) left a profile of part of it, and no warning."""
    from commbench.costmodel.profile import profile_age
    from commbench.results.records import JsonlWriter

    every = points()
    path = write(tmp_path / "r.jsonl", every[:4])
    fabric = tmp_path / "f.json"
    assert CliRunner().invoke(app, ["fit", path, "-O", str(fabric)]).exit_code == 0
    assert not profile_age(str(fabric)).stale
    with JsonlWriter(path) as writer:
        writer.write(every[4])
    stale = profile_age(str(fabric)).stale
    assert len(stale) == 1 and "1 point(s) of run r" in stale[0] and "after the fit" in stale[0], stale
    predicted = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "2", "--fabric", str(fabric), "-e", "1M"])
    assert predicted.exit_code == 0 and "1 point(s) of run r" in predicted.output, predicted.output
