"""BASE's runs measured back to back (one `bench -N` launch, or headers started within minutes) share one spell of a
shared host's load, so the run-to-run noise they show may understate the noise between runs taken apart: the probe's
A/A pairs under heavy load (probe DK aa/, 3 runs in ~10 s a file) failed although nothing changed. compare's pass/fail
line says so and suggests --history or runs taken apart; the verdict is unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.test_compare import as_collective, header_for, record, run, write

SIZES = (1024, 4096, 16384, 65536)


def _runs(prefix, starts, seed, factor=1.0):
    rng = np.random.default_rng(seed)
    out = []
    for i, started_at in enumerate(starts):
        points = [record(size, (50 + size / 1000) * factor * np.exp(rng.normal(0, 0.05, 20)), run_id=f"{prefix}{i}")
                  for size in SIZES]
        out += [dataclasses.replace(header_for(points[0]), started_at=started_at), *points]
    return out


def test_base_runs_measured_back_to_back_are_noted_on_the_verdict_line(tmp_path):
    close = ["2026-12-06T10:00:00+00:00", "2026-12-06T10:00:05+00:00", "2026-12-06T10:00:09+00:00"]
    apart = ["2026-12-06T08:00:00+00:00", "2026-12-06T09:00:00+00:00", "2026-12-06T10:00:00+00:00"]
    later = ["2026-12-06T11:00:00+00:00"]
    new = write(tmp_path / "new.jsonl", _runs("n", later, 9))
    passed = run(write(tmp_path / "close.jsonl", _runs("c", close, 1)), new)
    said = " ".join(passed.output.split())
    assert passed.exit_code == 0 and "; note: BASE's 3 runs were measured back to back (started within 9 s)" in said
    assert "give --history DIR or BASE runs taken apart" in said, said
    quiet = run(write(tmp_path / "apart.jsonl", _runs("a", apart, 1)), new)
    assert quiet.exit_code == 0 and "back to back" not in quiet.output, quiet.output
    slow = run(tmp_path / "close.jsonl", write(tmp_path / "slow.jsonl", _runs("s", later, 9, factor=3.0)))
    said = " ".join(slow.output.split())
    assert slow.exit_code == 1 and "error:" in said and "measured back to back (started within 9 s)" in said, said


def test_base_runs_of_different_collectives_get_no_back_to_back_note(tmp_path):
    """BASE's runs measured back to back but repeating no point (one run per collective, probe PC t1/: 5 runs of 5
    collectives) measure no run shift: the noise line says "not measured (no repeated baseline run)", and the note
    that the run-to-run noise they show may be too small contradicted it. It is said only where BASE's runs repeat a
    point."""
    close = ["2026-12-06T10:00:00+00:00", "2026-12-06T10:00:05+00:00", "2026-12-06T10:00:09+00:00"]
    collectives = ("all_reduce", "all_gather", "broadcast")
    base, new = [], []
    for i, (started_at, collective) in enumerate(zip(close, collectives)):
        points = [as_collective(m, collective) for m in _runs(f"b{i}-", [started_at], i)[1:]]
        base += [dataclasses.replace(header_for(points[0]), started_at=started_at), *points]
        new += [as_collective(m, collective) for m in _runs("n", ["x"], 9 + i)[1:]]
    new = [dataclasses.replace(header_for(new[0]), started_at="2026-12-06T11:00:00+00:00"), *new]
    result = run(write(tmp_path / "base.jsonl", base), write(tmp_path / "new.jsonl", new))
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "run shift is not measured (no repeated baseline run" in said, said
    assert "back to back" not in said, said
