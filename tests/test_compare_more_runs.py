"""Adding baseline runs must never make the gate weaker (probe AN-1): with two baseline runs (BASE and one
--history run, or two runs in BASE) the collective test took its t quantile at the run shift's df, 1, and applied
it to a noise made mostly of the points' own scatter (df 8-30), even where the measured shift was 0: a x5 slowdown
of every point, and x1000 of one collective, passed (exit 0) where the same NEW failed against one baseline run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_compare import as_collective, record, write
from tests.test_compare_runs import run_cli

SIZES = (4096, 65536, 1 << 20)
COLLECTIVES = ("all_reduce", "all_gather", "broadcast")


def _run(run_id, rng, *, shift=0.0, scale=1.0, point_sd=0.15, only=None):
    """One run of 3 collectives x 3 sizes: a run shift every point shares and each point's own scatter
    (log sd `point_sd`, a gloo sweep beside CPU hogs); `scale` multiplies the times of `only` (all: None)."""
    out = []
    for collective in COLLECTIVES:
        for size in SIZES:
            factor = scale if only in (None, collective) else 1.0
            level = 100 * (1 + size / 65536) * np.exp(shift + rng.normal(0, point_sd)) * factor
            out.append(as_collective(record(size, level * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id),
                                     collective))
    return out


def _baselines(count, seed=11, shifts=(0.0, 0.12, -0.08, 0.05)):
    rng = np.random.default_rng(seed)
    return [_run(f"b{i}" + "x" * i, rng, shift=shifts[i]) for i in range(count)]


def _detectable(tmp_path, base_runs, new, how):
    base = write(tmp_path / "base.jsonl", [r for run in (base_runs if how == "appended" else base_runs[:1])
                                            for r in run])
    args = [base, new, "--json"]
    if how == "history" and len(base_runs) > 1:
        folder = tmp_path / "hist"
        folder.mkdir(exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for i, run in enumerate(base_runs[1:]):
            write(folder / f"h{i}.jsonl", run)
        args += ["--history", folder]
    result = run_cli(*args)
    assert result.stdout.startswith("{"), result.output
    return json.loads(result.stdout), result.exit_code


@pytest.mark.parametrize("how", ["appended", "history"])
def test_the_smallest_slowdown_seen_never_grows_with_another_baseline_run(tmp_path, how):
    new = write(tmp_path / "new.jsonl", _run("n", np.random.default_rng(5), shift=0.03))
    runs = _baselines(4)
    seen, quantiles = [], []
    for k in (1, 2, 3, 4):
        found, code = _detectable(tmp_path, runs[:k], new, how)
        assert code == 0, (k, found["detectable"])
        seen.append(found["detectable"]["collective_ratio_max"])
        quantiles.append(found["noise"]["quantile_collective"])
    # Both are estimates from the runs, so another run moves them a little either way (its shift, and the
    # Welch-Satterthwaite df of the shift's and the points' shares); what must not happen is the collapse to the
    # shift's own df (1 with two runs): before, x3.3 with one run, x6.5 with two; quantile 6.2, then 23.
    assert all(later <= min(quantiles[0], earlier * 1.05) for earlier, later in zip(quantiles, quantiles[1:])), quantiles
    # (with --history the BASE run stays a set of its own: 3 runs measure the shift from 2, a 20% apart pair)
    assert all(later <= min(seen[0], earlier * 1.2) for earlier, later in zip(seen, seen[1:])), seen


@pytest.mark.parametrize("how", ["appended", "history"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("scale,only", [(5.0, None), (1000.0, "all_gather")])
def test_a_large_slowdown_fails_with_any_number_of_baseline_runs(tmp_path, how, k, scale, only):
    # the run shift of the baselines clamped to 0 (the ci-small case) and a measured one (the small.toml case)
    for i, shifts in enumerate(((0.0, 0.0, 0.0), (0.0, 0.35, -0.2))):
        (tmp_path / str(i)).mkdir()
        new = write(tmp_path / str(i) / "new.jsonl", _run("n", np.random.default_rng(5), scale=scale, only=only))
        found, code = _detectable(tmp_path / str(i), _baselines(k, shifts=shifts), new, how)
        assert code == 1, (k, shifts, found["detectable"])
