"""A routing trace is identified by its bytes, not by the path typed after `trace:` (probe P3, finding 3: `bench
moe_all_to_all --routing trace:tr3.npy` recorded params.routing "trace:tr3.npy", trace_rows and trace_recycled and
nothing of the file's contents, so `compare` took two different traces saved under one name for one point, and one
trace run from two folders under two names for two). A record now holds trace_sha256 and compare matches on it;
records without it (commbench before it) still match on the path."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import match_key
from commbench.results.records import Measurement, read_records

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _bench(folder: Path, name: str, trace: np.ndarray) -> Path:
    """One 2-rank gloo run of `trace` saved as folder/name, typed as the relative path `trace:name`."""
    folder.mkdir()
    np.save(folder / name, trace)
    out = folder / "r.jsonl"
    run = subprocess.run([sys.executable, "-m", "commbench", "bench", "moe_all_to_all", "--nproc", "2", "--experts",
                          "8", "--top-k", "2", "--hidden", "64", "--tokens", "8", "-n", "2", "-w", "1", "--timeout",
                          "60", "--routing", f"trace:{name}", "-O", str(out)],
                         capture_output=True, text=True, timeout=100, cwd=folder,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def _point(path: Path) -> Measurement:
    (m,) = [r for r in read_records([path]) if isinstance(r, Measurement)]
    return m


@pytest.mark.timeout(300)
def test_compare_matches_trace_points_on_the_files_bytes_not_their_path(tmp_path):
    rng = np.random.default_rng(0)
    trace = np.stack([rng.choice(8, 2, replace=False) for _ in range(16)])
    swapped = np.array([1, 0, 2, 3, 4, 5, 6, 7])[trace]   # experts 0 <-> 1: both on rank 0, so the same traffic
    assert not np.array_equal(trace, swapped)
    first = _bench(tmp_path / "a", "tr.npy", trace)
    other_trace_same_name = _bench(tmp_path / "b", "tr.npy", swapped)
    same_trace_other_name = _bench(tmp_path / "c", "router.npy", trace)

    for out, name in ((first, "tr.npy"), (other_trace_same_name, "tr.npy"), (same_trace_other_name, "router.npy")):
        digest = hashlib.sha256((out.parent / name).read_bytes()).hexdigest()[:16]
        assert _point(out).params["trace_sha256"] == digest
    a, b = _point(first), _point(other_trace_same_name)
    assert a.params["routing"] == b.params["routing"] == "trace:tr.npy" and a.size_bytes == b.size_bytes

    refused = runner.invoke(app, ["compare", str(first), str(other_trace_same_name)])
    assert refused.exit_code == 2 and "no point is in both files" in refused.output, refused.output
    compared = runner.invoke(app, ["compare", str(first), str(same_trace_other_name), "--json"])
    assert compared.exit_code in (0, 1), compared.output   # pass or a slowdown: the point is found in both
    assert len(json.loads(compared.stdout)["points"]) == 1, compared.output


def test_records_without_the_digest_match_on_the_path_as_before():
    m = Measurement(run_id="r", collective="moe_all_to_all", backend="gloo", size_bytes=2304, count=1152,
                    dtype="bfloat16", op=None, in_place=False, world_size=2, group_size=2, iters=2, warmup_iters=1,
                    status="ok", time_us_median=400.0,
                    params={"routing": "trace:tr.npy", "trace_rows": 16, "trace_recycled": False})

    def routed(routing: str, **digest) -> Measurement:
        return dataclasses.replace(m, params={**m.params, "routing": routing, **digest})

    assert match_key(routed("trace:tr.npy")) == match_key(m)
    assert match_key(routed("trace:/data/tr.npy")) != match_key(m)   # an older record: its path is all it has
    assert match_key(routed("trace:tr.npy", trace_sha256="0123456789abcdef")) != match_key(m)
    assert (match_key(routed("trace:tr.npy", trace_sha256="0123456789abcdef"))
            == match_key(routed("trace:/data/x.npy", trace_sha256="0123456789abcdef")))
    assert (match_key(routed("trace:tr.npy", trace_sha256="0123456789abcdef"))
            != match_key(routed("trace:tr.npy", trace_sha256="fedcba9876543210")))
