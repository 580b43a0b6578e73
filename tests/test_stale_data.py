"""Stale and narrowed data audit: results files reused after a change, cut short or resumed, read by the gate and
the fits as what they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.results_files import COMPARE, invoke as _invoke, records as _records, write as _write


def _fit_notes(*paths: str) -> list[str]:
    """The notes `fit` prints about its input (cut short, unchecked data, ...), read from the fit itself
    (costmodel.profile.fit_result_files, what `fit` calls): gloo timings on a loaded machine may leave every curve's
    bandwidth undetermined, which `fit` then refuses (exit 2) before printing them."""
    from commbench.costmodel.profile import fit_result_files
    return list(fit_result_files(list(paths), base=None, backend=None, name=None, min_heldout_bytes=64 * 1024,
                                 leave_out_wrong=False, dtype=None, op=None)[2])


def test_a_sweep_resumed_after_its_first_points_is_no_empty_run(tmp_path):
    # sweep, killed after 2 points, then `sweep --resume` (a new header, the other points under its run id): the gate
    # said '1 run(s) of the new file hold a header and no measurement (first: run resumed): stopped before their
    # first point', exit 1, on an unchanged, complete sweep (the continuation's points are joined to the first run)
    base = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    new = [dict(r, sweep_identity="s1") if r["record_type"] == "header" else r
           for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    header, points = new[0], new[1:]
    resumed = [header, *points[:2], dict(header, run_id="resumed", resumes_run_id=header["run_id"]),
               *[dict(p, run_id="resumed") for p in points[2:]]]
    base_path = _write(tmp_path / "base.jsonl", base)
    result = _invoke("compare", base_path, _write(tmp_path / "resumed.jsonl", resumed))
    assert result.exit_code == 0, result.output
    assert "header and no measurement" not in result.output
    # a resume whose launch wrote its header and nothing counts as the run it continues (README; probe AC F6): the
    # gate still fails, on the points of BASE that run lacks, not on a run 'with every point of BASE missing'
    stopped = [header, *points[:2], dict(header, run_id="resumed", resumes_run_id=header["run_id"])]
    result = _invoke("compare", base_path, _write(tmp_path / "stopped.jsonl", stopped), "--json")
    document = json.loads(result.stdout)
    assert result.exit_code == 1 and document["empty_runs"] == [] and len(document["missing"]) == len(points) - 2


@pytest.mark.timeout(180)
def test_verify_plan_predicts_from_the_fabric_tune_planned_on(tmp_path):
    # tune on NCCL results of an H100 node records inputs.system 'h100-hgx' (the preset) and plans on the preset with
    # the measured curves in it (its fabric.json); verify-plan predicted from the bare preset: 'predicted' 14.5 us for
    # a 64 KiB reduce-scatter on 2 ranks where the profile the plan used gives 72.0 us (a measured 500 us latency)
    import numpy as np

    from commbench.costmodel import collective_time_s, load_fabric
    from tests.test_costmodel_cli import _write_sweep

    results, folder = tmp_path / "rs.jsonl", tmp_path / "tune"
    _write_sweep(results, "reduce_scatter", 8, 500e-6, 100e9, backend="nccl", device="NVIDIA H100 80GB HBM3")
    tuned = _invoke("tune", "--results", str(results), "--system", "h100-hgx", "--gpus", "16", "--model", "llama3-8b",
                    "-O", str(folder))
    assert tuned.exit_code == 0, tuned.output
    doc = json.loads((folder / "plan.json").read_text())
    assert doc["inputs"]["system"] == "h100-hgx" and doc["inputs"]["fabric"]["source"] != "preset"
    verify = ["verify-plan", str(folder), "--nproc", "2", "--max-bytes", "64K", "--iters", "1", "--json"]
    result = _invoke(*verify)
    assert result.exit_code == 0, result.output
    point = next(p for p in json.loads(result.stdout)["points"] if "reduce-scatter" in p["collective"])
    used = load_fabric(str(folder / "fabric.json")).scaled(num_gpus=16)
    expected = collective_time_s(used, "reduce_scatter", np.array([65536.0]), np.array([2]))[0] * 1e6
    assert point["size_bytes"] == 65536 and abs(point["predicted_time_us"] - expected) < 1e-6 * expected
    # without that profile beside the plan, no prediction (and why), not the preset's
    (folder / "fabric.json").unlink()
    doc = json.loads(_invoke(*verify).stdout)
    assert all(p["predicted_time_us"] is None for p in doc["points"])
    assert any("no prediction" in f and "fabric.json" in f for f in doc["unmet_assumptions"])


def _sweep_file(tmp_path: Path) -> Path:
    """6 points on 2 gloo ranks: all_reduce 1 KiB..64 KiB x4, all_gather 4 KiB and 64 KiB."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\nbackend = "gloo"\nnproc = 2\n[defaults]\ndtypes = ["float32"]\niters = 3\n'
                     'warmup_iters = 1\ntimeout_s = 30\n[[run]]\ncollective = "all_reduce"\n'
                     'sizes = { min = "1K", max = "64K", factor = 4 }\n[[run]]\ncollective = "all_gather"\n'
                     'sizes = ["4K", "64K"]\n')
    return sweep


@pytest.mark.timeout(180)
def test_a_sweep_cut_short_is_said_by_report_fit_and_nccl_tuner(tmp_path):
    # a sweep killed after 3 of its 6 points: `report` tabled 1 KiB..16 KiB and `fit` fitted them (exit 0) without a
    # word that the sweep planned 64 KiB and an all_gather too; the header now says how many points the sweep plans
    sweep = _sweep_file(tmp_path)
    whole = tmp_path / "whole.jsonl"
    result = _invoke("sweep", str(sweep), "-O", str(whole))
    assert result.exit_code == 0, result.output
    records = _records(whole)
    assert records[0]["planned_points"] == 6
    cut = _write(tmp_path / "cut.jsonl", records[:4])
    said = "holds 3 of the 6 point(s) it plans: it was cut short, 3 not in the file"
    result = _invoke("report", cut, "-O", str(tmp_path / "rep"))
    assert result.exit_code == 0 and said in result.output, result.output
    assert "## Runs cut short" in (tmp_path / "rep" / "README.md").read_text()
    assert any(said in n for n in _fit_notes(cut))
    from commbench.workflows.nccl_tuner import from_results
    # nccl-tuner takes NCCL points only: the same cut sweep as NCCL measured it (gloo here, no GPU)
    as_nccl = _write(tmp_path / "cut-nccl.jsonl", [dict(r, backend="nccl") for r in records[:4]])
    assert any(said in n for n in from_results([as_nccl], statistic="median", min_gain=0.0).notes)
    # resumed, the sweep is whole again: nothing said
    assert _invoke("sweep", str(sweep), "-O", cut, "--resume").exit_code == 0
    assert "cut short" not in _invoke("report", cut, "-O", str(tmp_path / "rep2")).output
    assert not any("cut short" in n for n in _fit_notes(cut))
    assert "cut short" not in _invoke("report", str(whole), "-O", str(tmp_path / "rep3")).output


def test_fit_says_it_fitted_points_measured_without_the_data_check(tmp_path):
    # `bench -c 0` records (num_wrong null) were fitted without a word, exit 0, where compare fails them against a
    # checked base and nccl-tuner leaves them out: a collective that skipped its work looks fast
    records = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    unchecked = [dict(r, num_wrong=None) if r["record_type"] == "measurement" else r for r in records]
    result = _invoke("fit", _write(tmp_path / "c0.jsonl", unchecked), "--json")
    assert result.exit_code == 0, result.output
    points = sum(r["record_type"] == "measurement" for r in records)
    assert f"{points} point(s) fitted were measured without the data check (-c 0: #wrong unknown)" in \
        " ".join(json.loads(result.stdout)["notes"])
    result = _invoke("fit", str(COMPARE / "gloo_all_reduce_a.jsonl"), "--json")
    assert not any("without the data check" in n for n in json.loads(result.stdout)["notes"])


@pytest.mark.timeout(180)
def test_a_sweep_resumed_on_another_setup_says_so(tmp_path):
    # a sweep killed on host a, resumed on host b: 'done: 4 point(s) measured', exit 0, and no word that one file now
    # holds points of two hosts (compare judges it as one run, report draws two curves): a note
    sweep, out = _sweep_file(tmp_path), tmp_path / "out.jsonl"
    assert _invoke("sweep", str(sweep), "-O", str(out)).exit_code == 0
    whole = _records(out)
    assert whole[0]["torch_threads"] == [1, 1]  # the local launch's default (OMP_NUM_THREADS=1 unless set), per rank
    records = whole[:3]
    records[0] = dict(records[0], hostnames=["elsewhere", "elsewhere"], nccl_env={"NCCL_DEBUG": "INFO"})
    _write(out, records)
    said = _resume(sweep, out)
    assert f"note: resuming run {records[0]['run_id']} of {out} on another setup: hosts (" in said
    assert "NCCL_* settings (NCCL_DEBUG=INFO -> none)" in said
    # the same setup: nothing said
    _write(out, whole[:3])
    assert "another setup" not in _resume(sweep, out)


@pytest.mark.timeout(180)
def test_a_sweep_resumed_from_another_commbench_version_says_both(tmp_path):
    # probe P3 (session 46): a file whose run another commbench wrote (header commbench 0.0.5) resumed silently, its
    # points then of two versions under one run; compare notes versions, the resume now does too, naming both
    from commbench import __version__

    sweep, out = _sweep_file(tmp_path), tmp_path / "out.jsonl"
    assert _invoke("sweep", str(sweep), "-O", str(out)).exit_code == 0
    whole = _records(out)
    _write(out, [dict(whole[0], commbench_version="0.0.5"), *whole[1:3]])
    said = _resume(sweep, out)
    assert (f"note: resuming {out}, written by another commbench version (run {whole[0]['run_id']}: commbench 0.0.5; "
            f"this launch: commbench {__version__})") in said, said
    # another record schema is refused: one run would hold two schemas
    _write(out, [dict(whole[0], schema_version=0), *whole[1:3]])
    said = _resume(sweep, out, code=2)
    assert "was written in record schema 0 and this commbench writes schema 1" in said, said
    # the same version: nothing said
    _write(out, whole[:3])
    assert "another commbench version" not in _resume(sweep, out)


@pytest.mark.timeout(240)
def test_a_sweep_resumed_with_other_threads_or_nccl_settings_is_refused(tmp_path):
    # probe BL: a gloo sweep cut short with 1 torch thread per rank, resumed with OMP_NUM_THREADS=2: exit 0, no word,
    # the threads only in the headers' free-text notes; the file then held 511-3106 us points beside 51779-66504 us
    # ones, `fit` fitted one curve and `compare` passed a 26x slowdown. The threads are now a field of the header
    # (torch_threads) and, like the NCCL_* settings that change the fabric, a resume with another value is refused in
    # one line naming the field, the file's value and the launch's, writing nothing
    sweep, out = _sweep_file(tmp_path), tmp_path / "out.jsonl"
    assert _invoke("sweep", str(sweep), "-O", str(out)).exit_code == 0
    whole = _records(out)
    _write(out, whole[:3])
    before = out.read_text()
    said = _resume(sweep, out, env={"OMP_NUM_THREADS": "2"}, code=2)
    assert (f"--resume into {str(out)!r} is refused: its run {whole[0]['run_id']} was measured with another setup "
            "(torch threads on gloo: 1 torch thread(s) per rank -> 2 torch thread(s) per rank") in said, said
    assert "Traceback" not in said and out.read_text() == before
    _write(out, [dict(whole[0], nccl_env={"NCCL_P2P_DISABLE": "1"}), *whole[1:3]])
    said = _resume(sweep, out, code=2)
    assert "is refused" in said and "NCCL_* settings: NCCL_P2P_DISABLE=1 -> no NCCL_* settings" in said, said
    # a file written before the field: unknown is no change, the resume goes on
    _write(out, [{k: v for k, v in whole[0].items() if k != "torch_threads"}, *whole[1:3]])
    assert "refused" not in _resume(sweep, out)


def test_compare_and_fit_see_a_file_mixing_thread_counts(tmp_path):
    # a file that already mixes them (written before the refusal, or appended by hand): `compare` against a 1-thread
    # base refuses the 2-thread run as another setup, and `fit` refuses the mix, each naming the runs
    records = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    run = records[0]["run_id"]
    one = _write(tmp_path / "one.jsonl", [dict(r, torch_threads=[1, 1]) if r["record_type"] == "header" else r
                                          for r in records])
    other = [dict(r, torch_threads=[2, 2]) if r["record_type"] == "header" else r
             for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    mixed = _write(tmp_path / "mixed.jsonl", _records(Path(one)) + other)
    result = _invoke("compare", one, _write(tmp_path / "two.jsonl", other))
    assert result.exit_code == 2 and "torch threads on gloo" in result.output, result.output
    result = _invoke("fit", mixed)
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())   # each run beside the file it came from
    assert f"the results mix torch threads on gloo (1 torch thread(s) per rank: {mixed} run {run}" in said, said


def _resume(sweep: Path, out: Path, *, env: dict | None = None, code: int = 0) -> str:
    """`sweep --resume` in a process of its own (rank 0 prints from a forked process, past CliRunner's capture)."""
    import os
    import subprocess
    import sys

    run_env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]), COLUMNS="400")
    for key in ("NCCL_P2P_DISABLE", "OMP_NUM_THREADS", "NCCL_DEBUG"):
        run_env.pop(key, None)
    done = subprocess.run([sys.executable, "-m", "commbench", "sweep", str(sweep), "-O", str(out), "--resume"],
                          capture_output=True, text=True, env={**run_env, **(env or {})}, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    return " ".join((done.stdout + done.stderr).split())


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fault", ["failed", "wrong"])
def test_tune_does_not_plan_on_a_sweep_with_failed_or_wrong_points(tmp_path, monkeypatch, fault):
    # tune's sweep lost its 64 KiB all_reduce (a timeout) or found wrong data there: tune said '1/3 sweep: 5 point(s)'
    # and fitted, planned and exited 0 on the rest, where `sweep` on the same file exits 1
    import commbench.sweep.runner as runner

    measure = runner.measure_point

    def faulty(iso, comm, collective, spec, loop, **kw):  # the forked ranks inherit it
        record = measure(iso, comm, collective, spec, loop, **kw)
        if collective.name == "all_reduce" and spec.size_bytes == 65536:
            if fault == "failed":
                raise RuntimeError("injected: timed out")
            record = __import__("dataclasses").replace(record, num_wrong=3)
        return record

    monkeypatch.setattr(runner, "measure_point", faulty)
    folder = tmp_path / "tune"
    result = _invoke("tune", "--sweep", str(_sweep_file(tmp_path)), "--nproc", "2", "-O", str(folder))
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    why = "1 of 6 point(s) failed" if fault == "failed" else "3 wrong element(s) in the data checks"
    assert f"the sweep did not measure every point correctly ({why}); records in {folder}/tune-sweep.jsonl" in said
    assert f"commbench tune --results {folder}/tune-sweep.jsonl -O {folder}" in said
    assert not (folder / "plan.json").exists() and not (folder / "fabric.json").exists()


def test_tune_from_results_says_what_the_fit_left_out(tmp_path):
    # tune --results on a file with a failed point planned (exit 0) without a word on the terminal or in plan.json;
    # only fabric-measured.json's notes said '1 point(s) skipped: failed or without a time'
    records = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    records[3] = dict(records[3], status="failed", error="timed out", time_us_median=None, time_us_mean=None,
                      time_us_min=None, time_us_max=None, algbw_gbps=None, busbw_gbps=None, iter_times_us=[],
                      loop_time_us={})
    path = _write(tmp_path / "r.jsonl", records)
    result = _invoke("tune", "--results", path, "-O", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    said = f"results {path}: 1 point(s) skipped: failed or without a time"
    assert said in " ".join(result.output.split())
    assert said in json.loads((tmp_path / "t" / "plan.json").read_text())["assumptions"]


@pytest.mark.timeout(180)
def test_verify_plan_gives_no_prediction_from_a_profile_refitted_since_the_plan(tmp_path):
    # a plan made on fabric.json, then another run appended to the results and `fit -O fabric.json --force` again
    # (same name 'fitted', same source): verify-plan predicted from the refit as if the plan had been made on it
    from tests.test_costmodel_cli import _write_sweep
    from tests.test_verify import plan_on_a_gloo_fitted_profile

    fabric, folder = plan_on_a_gloo_fitted_profile(tmp_path)
    verify = ["verify-plan", str(folder / "plan.json"), "--max-bytes", "64K", "--iters", "1", "--json"]
    doc = json.loads(_invoke(*verify).stdout)
    assert all(p["predicted_time_us"] for p in doc["points"])
    collectives = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv")
    again = tmp_path / "again.jsonl"
    _write_sweep(again, "all_reduce", 2, 900e-6, 1e9)
    ar = tmp_path / "all_reduce.jsonl"
    ar.write_text(ar.read_text() + "".join(json.dumps(dict(r, run_id="later")) + "\n" for r in _records(again)))
    refit = _invoke("fit", *(str(tmp_path / f"{c}.jsonl") for c in collectives), "-O", str(fabric), "--force")
    assert refit.exit_code == 0, refit.output
    doc = json.loads(_invoke(*verify).stdout)
    assert all(p["predicted_time_us"] is None for p in doc["points"])
    assert doc["fabric_check"]["status"] == "changed"
    assert any(f.startswith("FABRIC CHANGED") and "notes" in f for f in doc["unmet_assumptions"])


def test_report_says_where_its_predicted_lines_are_extrapolated(tmp_path):
    # report --fabric drew the dashed 'predicted' line over every measured size, 64 KiB included, from a profile fitted
    # on 1..16 KiB, and said only 'dashed lines are predicted from fab.json'; predict marks such sizes 'extrapolated'.
    # The profile is fitted on 16 KiB..4 MiB: 64 B..16 KiB alone is latency within its iterations' noise (medians
    # 320.5, 320.2, 332.6 us, fastest 233-268 us), whose bandwidth `fit` refuses (fit_records.bandwidth_undetermined)
    records = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    sizes = sorted(r["size_bytes"] for r in records if r["record_type"] == "measurement")
    large = _write(tmp_path / "large.jsonl", [r for r in records if r.get("size_bytes", sizes[2]) >= sizes[2]])
    fab = tmp_path / "fab.json"
    fitted = _invoke("fit", large, "-O", str(fab))
    assert fitted.exit_code == 0, fitted.output
    result = _invoke("report", str(COMPARE / "gloo_all_reduce_a.jsonl"), "--fabric", str(fab), "-O", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    said = f"2 of {len(sizes)} size(s) beyond what {fab} measured for all_reduce (scale_up)"
    assert said in " ".join(result.output.split())
    readme = (tmp_path / "r" / "README.md").read_text()
    assert "## Extrapolated (dashed lines beyond what the profile measured)" in readme and said in readme
    # a profile fitted on every size: nothing extrapolated
    assert _invoke("fit", str(COMPARE / "gloo_all_reduce_a.jsonl"), "-O", str(fab), "--force").exit_code == 0
    result = _invoke("report", str(COMPARE / "gloo_all_reduce_a.jsonl"), "--fabric", str(fab), "-O", str(tmp_path / "r2"))
    assert "xtrapolated" not in result.output and "Extrapolated" not in (tmp_path / "r2" / "README.md").read_text()


def test_report_names_the_group_size_where_only_the_group_is_extrapolated(tmp_path):
    """report --fabric of a 2-rank all_reduce on a profile fitted on 4 ranks said "15 of 15 size(s) beyond what ...
    measured (group size(s) 4, 1 KiB..16 MiB)": every size was inside the measured range, only the group size was not
    (probe EN: A.jsonl on tuneA/fabric-measured.json). It names the dimension extrapolated."""
    from tests.test_costmodel_cli import _write_sweep

    four, two, fab = tmp_path / "four.jsonl", tmp_path / "two.jsonl", tmp_path / "fab.json"
    _write_sweep(four, "all_reduce", 4, 200e-6, 2e9)
    _write_sweep(two, "all_reduce", 2, 200e-6, 2e9)
    _write(two, [r if r["record_type"] != "measurement" else   # report draws busbw: as the harness records it
                 dict(r, algbw_gbps=(algbw := r["size_bytes"] / r["time_us_median"] / 1e3), busbw_gbps=algbw)
                 for r in _records(two)])
    assert _invoke("fit", str(four), "-O", str(fab)).exit_code == 0
    result = _invoke("report", str(two), "--fabric", str(fab), "-O", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (f"group size 2 beyond what {fab} measured for all_reduce (scale_up) (group size(s) 4, 1 KiB..16 MiB; its "
            "15 size(s) lie inside that range)") in said, said
    assert "size(s) beyond what" not in said


@pytest.mark.timeout(180)
def test_a_bench_that_stopped_at_a_failed_point_says_what_it_never_measured(tmp_path, monkeypatch):
    # bench stops at its first failed point (16 KiB here): the file held 1 KiB, 4 KiB and the failed 16 KiB, and
    # `report` listed the failure but not that 64 KiB was never measured; fit fitted 1..4 KiB without a word
    import commbench.measure.bench as bench

    measure = bench.measure_point

    def faulty(backend, comm, collective, spec, loop, **kw):  # the forked ranks inherit it
        if spec.size_bytes == 16384:
            raise RuntimeError("injected: connection reset")
        return measure(backend, comm, collective, spec, loop, **kw)

    monkeypatch.setattr(bench, "measure_point", faulty)
    out = tmp_path / "b.jsonl"
    result = _invoke("bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-O", str(out))
    assert result.exit_code == 1, result.output
    assert _records(out)[0]["planned_points"] == 4
    said = "holds 3 of the 4 point(s) it plans: it was cut short, 1 not in the file (run it again"
    assert said in " ".join(_invoke("report", str(out), "-O", str(tmp_path / "r")).output.split())
    assert any(said in n for n in _fit_notes(str(out)))


def test_predict_and_plan_say_a_profile_is_older_than_the_results_it_was_fitted_from(tmp_path, monkeypatch):
    # fit results.jsonl -O fab.json, then another run appended to results.jsonl (bench -O appends, sweep --resume):
    # predict and plan read fab.json's curves as the measurement of that file, without a word about the new run
    monkeypatch.chdir(tmp_path)
    first = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    _write(tmp_path / "results.jsonl", first)
    assert _invoke("fit", "results.jsonl", "-O", "fab.json").exit_code == 0
    predict = ["predict", "--fabric", "fab.json", "-c", "all_reduce", "-g", "2", "-b", "1K", "-e", "4K"]
    result = _invoke(*predict)
    assert result.exit_code == 0 and "not fitted on" not in result.output, result.output
    later = _records(COMPARE / "gloo_all_reduce_b.jsonl")
    _write(tmp_path / "results.jsonl", first + later)
    said = (f"warning: results.jsonl now holds 1 run(s) the profile fab.json was not fitted on (run {later[0]['run_id']}):"
            " results added since the fit; refit")
    assert said in " ".join(_invoke(*predict).output.split())
    planned = _invoke("plan", "--model", "llama3-8b", "--system", "fab.json", "--gpu", "h100", "--gpus", "2")
    assert said in " ".join(planned.output.split())   # (this profile then lacks reduce_scatter: refused after it)


def test_a_run_fit_never_uses_is_no_sign_of_a_newer_file(tmp_path, monkeypatch):
    # a tuning sweep's forced-channel runs are never fitted (fit_records.collect_points): counting every ok run of the
    # file, the stale-profile check warned 'results added since the fit' on a file unchanged since its fit
    monkeypatch.chdir(tmp_path)
    first = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    forced = [dict(r, run_id="forced0000001", params={**(r.get("params") or {}), "nccl_channels": 4})
              for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    _write(tmp_path / "results.jsonl", first + forced)
    assert _invoke("fit", "results.jsonl", "-O", "fab.json").exit_code == 0
    result = _invoke("predict", "--fabric", "fab.json", "-c", "all_reduce", "-g", "2", "-b", "1K", "-e", "4K")
    assert result.exit_code == 0 and "not fitted on" not in result.output, result.output


def _cut_short(tmp_path) -> str:
    """gloo_all_reduce_b.jsonl as a run that planned 3 points more than it wrote (a crash after its last one)."""
    records = _records(COMPARE / "gloo_all_reduce_b.jsonl")
    points = [r for r in records if r.get("record") != "header" and "size_bytes" in r]
    for r in records:
        if "size_bytes" not in r:   # the header
            r["planned_points"] = len(points) + 3
    return _write(tmp_path / "cut.jsonl", records)


def test_compare_fails_a_run_cut_short_even_with_allow_missing(tmp_path):
    # --allow-missing passed a NEW that crashed part-way ('--allow-missing passes cut-short runs'): the header's
    # planned_points tells a crash from a narrower plan, and a crash is a failed run
    base = str(COMPARE / "gloo_all_reduce_a.jsonl")
    cut = _cut_short(tmp_path)
    result = _invoke("compare", base, cut, "--allow-missing")
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "cut short:" in said and "--allow-cut-short judges the points it holds" in said
    allowed = _invoke("compare", base, cut, "--allow-missing", "--allow-cut-short", "--json")
    doc = json.loads(allowed.stdout)
    assert allowed.exit_code == 0 and doc["passed"] and doc["allow_cut_short"] and len(doc["cut_short"]) == 1
    whole = _invoke("compare", base, str(COMPARE / "gloo_all_reduce_b.jsonl"), "--json")
    assert json.loads(whole.stdout)["cut_short"] == []
