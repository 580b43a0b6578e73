"""The README chain bench (small sizes) -> fit -> predict / plan on gloo (outside report): `bench all_reduce -b 1K
-e 64K --nproc 2` measured times that do not grow with size, and `fit` refused the results (exit 2, "bandwidth
undetermined"), so the chain stopped although the points measure the collective's latency. `fit` now keeps such a
curve latency-only (latency_only.py): the profile holds its measured latency and sizes, never a bandwidth; `predict`
gives that latency inside what was measured and says so, and every consumer refuses beyond it in one line.

Each test fails on main, where `fit` refuses these results (exit 2) and writes no profile."""

from __future__ import annotations

from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES

import json
from pathlib import Path

from tests.results_files import invoke

# the outside report's own run: `commbench bench all_reduce -b 1K -e 64K --nproc 2 -O small.jsonl` on gloo (2 CPU
# ranks, a loaded host): medians 176..313 us, no growth from 1 KiB to 64 KiB beyond the iterations' noise
GLOO_SMALL = Path(__file__).parent / "data" / "latency_only" / "gloo_all_reduce_1k_64k.jsonl"
PLAN_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv")


def _fit(tmp_path, results=GLOO_SMALL) -> tuple[object, Path]:
    profile = tmp_path / "prof.json"
    return invoke("fit", str(results), "-O", str(profile)), profile


def _flat(path: Path, collectives=PLAN_COLLECTIVES, time_us: float = 20.0) -> Path:
    """A gloo run of `collectives` on 2 ranks at 1 KiB..64 KiB whose times are flat."""
    from commbench.results.records import JsonlWriter, Measurement, RunHeader

    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id="flat", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version="2", nccl_version=None, cuda_version=None, cupy_version=None,
                               backend="gloo", world_size=2, hostnames=["h", "h"], devices=["cpu", "cpu"],
                               nccl_env={}, launcher="local"))
        for collective in collectives:
            for size in (1024, 4096, 16384, 65536):
                writer.write(Measurement(run_id="flat", collective=collective, backend="gloo", size_bytes=size,
                                         # nccl-tests' count: one rank's chunk for the chunked collectives
                                         count=size // (8 if collective in CHUNKED_COLLECTIVES else 4),
                                         dtype="float32", op="sum", in_place=True, world_size=2,
                                         group_size=2, group_layout="world", iters=20, warmup_iters=5,
                                         time_us_median=time_us))
    return path


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_fit_keeps_a_curve_whose_time_does_not_grow_latency_only_with_a_note(tmp_path):
    fitted, profile = _fit(tmp_path)
    assert fitted.exit_code == 0, fitted.output
    notes = [line for line in fitted.output.splitlines() if line.startswith("note: kept latency-only")]
    assert len(notes) == 1 and "all_reduce n=2 (1 domain)" in notes[0] and "1 KiB..64 KiB" in notes[0]
    assert "bench -e 16M" in notes[0]
    data = json.loads(profile.read_text())
    (held,) = data["latency_only"]
    medians = sorted(json.loads(line)["time_us_median"] for line in GLOO_SMALL.read_text().splitlines()
                     if '"measurement"' in line)
    assert held["latency_us"] == medians[len(medians) // 2]   # the median time: measured, not fitted
    assert (held["collective"], held["group_size"], held["num_domains"]) == ("all_reduce", 2, 1)
    assert (held["min_size_bytes"], held["max_size_bytes"]) == (1024, 65536)
    assert "bandwidth undetermined" in held["why"]
    # no bandwidth anywhere: no alpha-beta curve, no tier with a link rate
    assert data["curves"] == [] and data["tiers"] == {}


def test_predict_inside_the_measured_range_is_the_measured_latency_and_says_so(tmp_path):
    fitted, profile = _fit(tmp_path)
    assert fitted.exit_code == 0, fitted.output
    latency_us = json.loads(profile.read_text())["latency_only"][0]["latency_us"]
    shown = invoke("predict", "-c", "all_reduce", "-g", "2", "--fabric", str(profile), "-b", "512", "-e", "64K")
    assert shown.exit_code == 0, shown.output
    assert "MEASURED latency" in shown.output and "latency-only:" in shown.output
    assert shown.output.count("measured latency ") >= 7 and "extrapolated (latency only)" in shown.output
    as_json = invoke("predict", "-c", "all_reduce", "-g", "2", "--fabric", str(profile), "-b", "512", "-e", "64K",
                     "--json")
    doc = json.loads(as_json.output)
    assert [round(r["time_us"], 6) for r in doc["rows"]] == [round(latency_us, 6)] * 8
    assert all(r["latency_only"] for r in doc["rows"])
    assert [r["extrapolated"] for r in doc["rows"]] == [True] + [False] * 7   # 512 B: below the smallest measured
    import jsonschema
    from tests.test_json_output import schema
    jsonschema.validate(doc, schema("predict"))


def test_predict_outside_the_measured_range_is_refused_in_one_line(tmp_path):
    fitted, profile = _fit(tmp_path)
    assert fitted.exit_code == 0, fitted.output
    for extra in ([], ["-b", "1K", "-e", "128K"], ["-g", "4", "--gpus", "4", "-b", "1K", "-e", "4K"]):
        args = ["predict", "-c", "all_reduce", "--fabric", str(profile), *extra]
        refused = invoke(*(args if "-g" in extra else [*args, "-g", "2"]))
        assert refused.exit_code == 2, refused.output
        (line,) = _error_lines(refused.output)
        assert len(refused.output.strip().splitlines()) == 1 and "Traceback" not in refused.output
        assert "all_reduce n=2 (1 domain) curve" in line and "latency-only" in line and "1 KiB..64 KiB" in line
        assert "commbench bench all_reduce -e 16M" in line


def test_plan_on_a_latency_only_profile_refuses_and_makes_up_no_bandwidth(tmp_path):
    # every collective the plan prices measured at small sizes alone: the plan needs them at MiB sizes
    fitted, profile = _fit(tmp_path, _flat(tmp_path / "flat.jsonl"))
    assert fitted.exit_code == 0, fitted.output
    assert len(json.loads(profile.read_text())["latency_only"]) == len(PLAN_COLLECTIVES)
    plan = ["plan", "--model", "llama3-8b", "--system", str(profile), "--gpu", "h100", "--gpus", "2"]
    for extra in (["--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1"], []):   # pinned and searched
        refused = invoke(*plan, *extra)
        assert refused.exit_code == 2, refused.output
        (line,) = _error_lines(refused.output)
        assert "latency-only" in line and "1 KiB..64 KiB" in line and "-e 16M" in line
    # the gloo run of the report (all_reduce only): the plan names the latency-only curve beside what is missing
    (tmp_path / "small").mkdir()
    fitted, small = _fit(tmp_path / "small", GLOO_SMALL)
    assert fitted.exit_code == 0, fitted.output
    refused = invoke("plan", "--model", "llama3-8b", "--system", str(small), "--gpu", "h100", "--gpus", "2",
                     "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1")
    assert refused.exit_code == 2, refused.output
    (line,) = _error_lines(refused.output)
    assert "latency only" in line and "all_reduce n=2 (1 domain) at 1 KiB..64 KiB" in line


def test_nccl_tuner_and_report_read_a_latency_only_profile_as_such(tmp_path):
    fitted, profile = _fit(tmp_path)
    assert fitted.exit_code == 0, fitted.output
    tuner = invoke("nccl-tuner", "--fabric", str(profile), "--gpus", "2", "-O", str(tmp_path / "tuner.conf"))
    assert tuner.exit_code == 2, tuner.output
    (line,) = _error_lines(tuner.output)
    assert "latency-only" in line and "1 KiB..64 KiB" in line and not (tmp_path / "tuner.conf").exists()
    report = invoke("report", str(GLOO_SMALL), "--fabric", str(profile), "-O", str(tmp_path / "report"))
    assert report.exit_code == 0, report.output
    assert "latency-only predicted line for all_reduce on 2 ranks" in report.output


def test_no_usable_points_are_still_refused_and_old_profiles_load_as_before(tmp_path):
    failed = tmp_path / "failed.jsonl"
    failed.write_text("".join(line.replace('"status":"ok"', '"status":"failed"') + "\n"
                              for line in GLOO_SMALL.read_text().splitlines()))
    refused, profile = _fit(tmp_path, failed)
    assert refused.exit_code == 2 and "no usable points" in refused.output and not profile.exists()
    from commbench.costmodel import Fabric, load_preset

    old = load_preset("h100-hgx").to_dict()
    assert "latency_only" not in old   # a profile without latency-only curves is written as before
    assert Fabric.from_dict(old).to_dict() == old and Fabric.from_dict(old).latency_only == ()
