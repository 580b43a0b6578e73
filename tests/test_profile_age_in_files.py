"""A fitted profile older than its results was said on the terminal only: `nccl-tuner --fabric` wrote a config that
named neither the profile file nor its staleness, and `plan --system FILE -O DIR` a plan.json without it, though
both are files a user keeps and loads later (NCCL reads the config; probe CQ F3). `report` already wrote it into
its README.md. Now the config's header comments name the profile and carry each warning, and plan.json carries
them among its assumptions."""

from __future__ import annotations

import json

import numpy as np
from commbench.results.records import JsonlWriter, Measurement, RunHeader
from tests.results_files import invoke as _invoke


def _nccl_run(writer, run_id: str, started_at: str) -> None:
    rng = np.random.default_rng(len(run_id))
    writer.write(RunHeader(run_id=run_id, started_at=started_at, argv=[], commbench_version="0", python_version="3",
                           torch_version=None, nccl_version="2.27.3", cuda_version=None, cupy_version=None,
                           backend="nccl", world_size=8, hostnames=["h"] * 8,
                           devices=["NVIDIA H100 80GB HBM3"] * 8, nccl_env={}, launcher="local"))
    for p in range(10, 25):
        size = 1 << p
        time_s = (30e-6 + 2 * 7 / 8 * size / 300e9) * float(np.exp(rng.normal(0, 0.02)))
        writer.write(Measurement(run_id=run_id, collective="all_reduce", backend="nccl", size_bytes=size,
                                 count=size // 4, dtype="float32", op="sum", in_place=False, world_size=8,
                                 group_size=8, iters=10, warmup_iters=2, time_us_median=time_s * 1e6))


def test_the_tuner_config_and_plan_json_carry_the_stale_profile_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with JsonlWriter("nt.jsonl") as writer:
        _nccl_run(writer, "first", "2026-12-01T10:00:00+00:00")
    assert _invoke("fit", "nt.jsonl", "--system", "h100-hgx", "-O", "fnt.json").exit_code == 0
    fresh = _invoke("nccl-tuner", "--fabric", "fnt.json", "--gpus", "8", "-O", "fresh.conf")
    assert fresh.exit_code == 0, fresh.output
    header = [line for line in (tmp_path / "fresh.conf").read_text().splitlines() if line.startswith("#")]
    assert any("fabric profile fnt.json" in line for line in header), header   # the file names its profile
    assert not any("WARNING" in line for line in header), header
    with JsonlWriter("nt.jsonl") as writer:   # bench -O appends
        _nccl_run(writer, "appended", "2026-12-01T11:00:00+00:00")
    tuner = _invoke("nccl-tuner", "--fabric", "fnt.json", "--gpus", "8", "-O", "stale.conf")
    assert tuner.exit_code == 0 and "not fitted on" in tuner.output, tuner.output
    comments = " ".join(line[2:] for line in (tmp_path / "stale.conf").read_text().splitlines()
                        if line.startswith("#"))
    assert "WARNING: nt.jsonl now holds 1 run(s) the profile fnt.json was not fitted on (run appended)" in comments, \
        comments
    assert all(len(line.encode()) <= 200 for line in (tmp_path / "stale.conf").read_text().splitlines())
    for layout in ([], ["--layout", "tp=8,pp=1,vp=1,ep=1,mbs=1"]):   # a search, and one pinned layout
        out = f"plan{len(layout)}"
        planned = _invoke("plan", "--model", "llama3-8b", "--system", "fnt.json", "--gpus", "8", *layout, "-O", out)
        assert planned.exit_code == 0, planned.output
        doc = json.loads((tmp_path / out / "plan.json").read_text())
        said = [a for a in doc["assumptions"] if "not fitted on (run appended)" in a]
        assert len(said) == 1 and said[0].startswith("WARNING: fabric profile fnt.json:"), doc["assumptions"]
