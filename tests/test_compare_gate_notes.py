"""compare's notes on what it could not see: a NEW measured before the baseline (probe H-F5: a stale file judged as
this change's run, silently), both sides measured without the data check (H-F10: the pass line claimed "none failed
or wrong"), and the history's setup named as the new file's (H-F11a)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from commbench.results.staleness import runs_older_than_baseline
from tests.test_compare import header_for, record, write
from tests.test_compare_runs import run_cli

SIZES = (1024, 4096, 16384, 65536)


def _run(run_id, seed, *, started="2026-12-05T12:00:00+00:00", unchecked=False, **header):
    rng = np.random.default_rng(seed)
    records = [record(size, 50 * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id) for size in SIZES]
    if unchecked:
        records = [dataclasses.replace(m, num_wrong=None) for m in records]
    return [dataclasses.replace(header_for(records[0]), started_at=started, **header), *records]


def test_a_new_file_measured_before_the_baseline_is_refused_unless_allowed(tmp_path):
    """Probe O-5: a stale NEW (measured before BASE: a CI step that did not overwrite it, arguments swapped) passed
    with exit 0 after a warning. Refused in one line naming both start times; --allow-stale judges it, said."""
    base = write(tmp_path / "base.jsonl", _run("b", 1, started="2026-12-05T12:00:00+00:00"))
    old = write(tmp_path / "old.jsonl", _run("n", 2, started="2025-01-01T10:00:00+00:00"))
    fresh = write(tmp_path / "fresh.jsonl", _run("f", 3, started="2026-12-05T13:00:00+00:00"))
    stale = run_cli(base, old)
    said = " ".join(stale.output.split())
    assert stale.exit_code == 2 and said.startswith("error:") and "measured before the baseline" in said, said
    assert "2025-01-01 10:00:00" in said and "2026-12-05 12:00:00" in said and "--allow-stale" in said, said
    assert "Traceback" not in stale.output and len(stale.output.strip().splitlines()) <= 3
    allowed = run_cli(base, old, "--allow-stale")
    assert allowed.exit_code == 0 and "allowed (--allow-stale)" in " ".join(allowed.output.split()), allowed.output
    assert json.loads(run_cli(base, old, "--json", "--allow-stale").stdout)["new_older_than_baseline"][0].startswith(
        "run n started")
    assert "measured before the baseline" not in run_cli(base, fresh).output
    # NEW a copy of BASE with a later run appended: the copied run is the base's own, not a stale one
    grown = write(tmp_path / "grown.jsonl", [*_run("b", 1, started="2026-12-05T12:00:00+00:00"),
                                             *_run("g", 5, started="2026-12-05T13:00:00+00:00")])
    assert run_cli(base, grown).exit_code == 0
    history = tmp_path / "h"
    history.mkdir()
    write(history / "h1.jsonl", _run("h", 4, started="2026-12-05T14:00:00+00:00"))
    later = run_cli(base, fresh, "--history", history)
    said = " ".join(later.output.split())
    assert later.exit_code == 2 and "measured before the baseline" in said and "history's newest run" in said, said


def test_start_times_with_and_without_a_zone_are_compared_only_beyond_the_widest_offset():
    base = [_run("b", 1, started="2026-12-05T12:00:00+00:00")[0]]
    near = [_run("n", 2, started="2026-12-05 03:00:00")[0]]    # an nccl-tests import: no zone, 9 h apart
    far = [_run("f", 3, started="2026-12-03 12:00:00")[0]]
    unknown = [_run("u", 4, started="")[0]]
    assert runs_older_than_baseline(near, {"base": base}) == []
    assert len(runs_older_than_baseline(far, {"base": base})) == 1
    assert runs_older_than_baseline(unknown, {"base": base}) == []


def test_both_sides_unchecked_say_so_in_the_pass_line_and_json(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", 1, unchecked=True))
    new = write(tmp_path / "new.jsonl", _run("n", 2, unchecked=True, started="2026-12-05T13:00:00+00:00"))
    result = run_cli(base, new)
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "data unchecked on both sides" in said and "failed or wrong" not in said, said
    assert len(json.loads(run_cli(base, new, "--json").stdout)["unchecked_both_sides"]) == len(SIZES)
    checked = write(tmp_path / "checked.jsonl", _run("c", 3, started="2026-12-05T13:00:00+00:00"))
    assert "unchecked on both" not in run_cli(write(tmp_path / "b2.jsonl", _run("b2", 4)), checked).output


def test_the_history_on_another_nccl_version_is_named_history(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", 1, nccl_version="2.28.3"))
    new = write(tmp_path / "new.jsonl", _run("n", 2, nccl_version="2.28.3", started="2026-12-05T13:00:00+00:00"))
    history = tmp_path / "hh"
    history.mkdir()
    write(history / "h1.jsonl", _run("h", 3, nccl_version="2.27.3", started="2026-12-05T11:00:00+00:00"))
    result = run_cli(base, new, "--history", history)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "history: NCCL 2.27.3" in said and "new: NCCL 2.27.3" not in said, said
