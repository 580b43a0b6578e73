"""benchmarks/newer_releases.py release_steps: each run against the same configuration in the preceding release."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "newer_releases.py"


def _bench():
    spec = importlib.util.spec_from_file_location("newer_releases", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(release, tokens, precision="MXFP8", notes=""):
    row = {"model": "Qwen3_30B_a3B", "gpu": "DGX-GB200", "num_gpus": 8, "precision": precision,
           "release": release, "tokens_per_s_per_gpu": tokens, "notes": notes}
    return SimpleNamespace(row=row, label=f"Qwen3 {precision} {release}")


def test_release_steps_cancel_the_shared_error_and_skip_footnoted_rows():
    bench = _bench()
    runs = [_run("26.06", 150.0), _run("26.04", 100.0), _run("26.04.01", 90.0, notes="footnote: regression"),
            _run("26.06", 400.0, precision="BF16")]
    steps = bench.release_steps(runs, [-10.0, 10.0, 50.0, 0.0])
    assert len(steps) == 1                                   # the footnoted row and the lone BF16 run pair with nothing
    label, published, predicted = steps[0]
    assert "26.06 from 26.04" in label
    assert published == pytest.approx(1.5)
    assert predicted == pytest.approx(1.5 * 0.9 / 1.1)       # both releases' errors applied to the published step


def _on(gpu, preset, tokens, precision="MXFP8", release="26.06", notes=""):
    row = {"model": "Qwen3_30B_a3B", "gpu": gpu, "num_gpus": 8, "precision": precision, "release": release,
           "tokens_per_s_per_gpu": tokens, "notes": notes}
    return SimpleNamespace(row=row, label=f"Qwen3 {gpu} {precision} {release}", preset=preset)


def test_gpu_steps_pair_the_same_job_on_two_gpus_and_cancel_the_shared_error():
    bench = _bench()
    runs = [_on("DGX-GB200", "gb200-nvl72", 100.0), _on("DGX-GB300", "gb300-nvl72", 120.0),
            _on("DGX-GB300", "gb300-nvl72", 130.0, release="26.08"),          # no GB200 run of 26.08: no pair
            _on("DGX-B200", "b200-hgx", 80.0, notes="footnote: regression")]  # footnoted: no pair
    steps = bench.gpu_steps(runs, [5.0, -10.0, 0.0, 0.0])
    assert len(steps) == 1
    pair, precision, label, published, predicted = steps[0]
    assert (pair, precision) == ("GB300/GB200", "MXFP8") and "DGX-GB300" in label
    assert published == pytest.approx(1.2)
    assert predicted == pytest.approx(1.2 * 0.9 / 1.05)
