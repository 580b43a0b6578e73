"""Fitting: synthetic records from known fabrics (exact recovery), and a real gloo sweep."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from commbench.costmodel import collective_time_s, load_preset
from commbench.costmodel.fit import fit_piecewise, leave_one_out_errors
from commbench.costmodel.fit_records import fit_all
from commbench.costmodel.profile import fabric_from_fits, fit_result_files
from commbench.errors import CommbenchError
from commbench.results.records import JsonlWriter, Measurement, RunHeader

SIZES = [int(2 ** p) // 4 * 4 for p in np.arange(10, 27, 0.5)]  # 1 KiB .. 64 MiB, half octaves, whole float32s


def _header(run_id: str, **kw) -> RunHeader:
    return RunHeader(run_id=run_id, started_at="2026-01-01T00:00:00", argv=["synthetic"], commbench_version="0",
                     python_version="3.11", torch_version=None, nccl_version=None, cuda_version=None,
                     cupy_version=None, backend="nccl", world_size=kw.pop("world_size", 16), hostnames=["h"],
                     devices=["gpu"], nccl_env={}, launcher="synthetic", **kw)


def _record(collective: str, size: int, time_us: float, group: int, *, run_id: str = "r1", world: int = 16,
            layout: str = "world", **kw) -> Measurement:
    from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES   # nccl-tests' count, as every reader checks it

    count = size // (4 * group) if collective in CHUNKED_COLLECTIVES else size // 4
    return Measurement(run_id=run_id, collective=collective, backend="nccl", size_bytes=size, count=count,
                       dtype="float32", op="sum", in_place=False, world_size=world, group_size=group,
                       group_layout=layout, iters=20, warmup_iters=5, time_us_median=time_us, **kw)


def _noisy(times_s: np.ndarray, rng: np.random.Generator, rel: float = 0.03) -> np.ndarray:
    return times_s * np.exp(rng.normal(0.0, rel, size=np.shape(times_s)))


def test_alpha_beta_recovered_from_noisy_points_with_outliers():
    rng = np.random.default_rng(7)
    x = np.array(SIZES, dtype=float)
    truth_latency, truth_bw = 25e-6, 80e9
    t = _noisy(truth_latency + x / truth_bw, rng)
    t[[5, 20]] *= 4.0  # two stalls
    fit = fit_piecewise(x, t)
    assert fit.latency_s == pytest.approx(truth_latency, rel=0.1)
    assert fit.busbw_bytes_per_s[-1] == pytest.approx(truth_bw, rel=0.1)
    errors = leave_one_out_errors(x, t)
    assert np.median(errors[x >= 65536]) <= 0.05


def test_cache_cliff_is_a_knot_and_one_line_would_fit_worse():
    x = np.array(SIZES, dtype=float)
    knot = 2.0 ** 20
    t = 300e-6 + np.minimum(x, knot) / 3e9 + np.maximum(x - knot, 0) / 1e9
    fit = fit_piecewise(x, t)
    assert len(fit.knots_bytes) == 1 and fit.knots_bytes[0] == pytest.approx(knot, rel=0.5)
    assert fit.busbw_bytes_per_s[-1] == pytest.approx(1e9, rel=0.05)
    assert np.median(leave_one_out_errors(x, t, num_knots=1)) < np.median(leave_one_out_errors(x, t, num_knots=0))


def test_fit_records_recovers_a_preset_curve_and_predicts_it():
    truth = load_preset("h100-hgx")
    rng = np.random.default_rng(1)
    sizes = np.array(SIZES[8:])  # 16 KiB up: one algorithm per region
    times = _noisy(collective_time_s(truth, "all_gather", sizes, 8, algorithm="ring"), rng, 0.02)
    records = [_record("all_gather", int(s), t * 1e6, 8, world=8) for s, t in zip(sizes, times)]
    fits, notes = fit_all(records, {})
    (fit,) = fits
    assert fit.heldout_median_rel_error <= 0.05
    assert fit.fit.busbw_bytes_per_s[-1] / 1e9 == pytest.approx(370, rel=0.05)
    fabric = fabric_from_fits(fits, base=None, name="synthetic", source="fitted:test")
    predicted = collective_time_s(fabric, "all_gather", sizes, 8)
    assert np.median(np.abs(predicted / times - 1)) < 0.05
    assert any("one group size" in w for w in fabric.warnings)


def test_two_tier_fit_recovers_the_scale_out_rate():
    """Hook for the emulated two-tier fabric: groups that span domains become scale-out curves."""
    truth = load_preset("h100-hgx", num_nodes=2)
    rng = np.random.default_rng(3)
    sizes = np.array(SIZES[6:])
    records = []
    for collective, n, domains in (("all_reduce", 8, 1), ("all_reduce", 2, 2), ("all_to_all", 8, 1),
                                   ("all_to_all", 16, 2), ("sendrecv", 2, 2)):
        # all_reduce on the ring with one rank per node: one NIC's rate (NCCL's NVLS-tree reduces in the
        # node first; a ring of 8 ranks per node runs on their 8 NICs together, about the NVLink ring)
        algorithm = "ring" if collective == "all_reduce" else None
        times = _noisy(collective_time_s(truth, collective, sizes, n, domains, algorithm=algorithm), rng, 0.02)
        layout = "strided" if n == domains else "contiguous"  # one rank per node
        records += [_record(collective, int(s), t * 1e6, n, run_id=f"{collective}{n}", layout=layout)
                    for s, t in zip(sizes, times)]
    headers = {r.run_id: _header(r.run_id, topology={"ranks_per_node": 8}) for r in records}
    fits, _ = fit_all(records, headers)
    fabric = fabric_from_fits(fits, base=None, name="two-tier", source="fitted:test", num_gpus=16)
    out = {c.collective: c.busbw_gbps for c in fabric.curves if c.tier == "scale_out"}
    nic_truth = 47.0  # 0.94 x 50 GB/s per GPU
    for collective in ("all_reduce", "all_to_all", "sendrecv"):
        assert out[collective] == pytest.approx(nic_truth, rel=0.15), collective
    big = 64 << 20
    predicted = float(collective_time_s(fabric, "all_reduce", big, 2, 2))
    assert predicted == pytest.approx(float(collective_time_s(truth, "all_reduce", big, 2, 2, algorithm="ring")), rel=0.1)
    # composed: 4 ranks per node run the ring on their 4 NICs together, as the preset's NCCL ring does
    four = float(collective_time_s(fabric, "all_reduce", big, 8, 2))
    assert big * 2 * 7 / 8 / four / 1e9 == pytest.approx(4 * nic_truth, rel=0.2)
    assert four == pytest.approx(float(collective_time_s(truth, "all_reduce", big, 8, 2, algorithm="ring")), rel=0.2)


def _moe_records(writer, rng, metrics_of) -> None:
    """DeepSeek-V3-shaped MoE all-to-all points on 8 ranks whose busiest rank moves 1.3x the payload at 150 GB/s
    bus bandwidth; `metrics_of(payload)` gives each record's metrics."""
    for tokens in (256, 512, 1024, 2048, 4096, 8192, 16384):
        payload = tokens * 8 * 7168
        t = _noisy(np.array(30e-6 + payload * 1.3 * 7 / 8 / 150e9), rng, 0.02)
        writer.write(_record("moe_all_to_all", payload, float(t) * 1e6, 8, run_id="m",
                             params={"tokens_per_rank": tokens, "hidden": 7168, "top_k": 8, "num_experts": 64},
                             metrics=metrics_of(payload)))


def test_moe_and_staged_records_are_fitted_generically(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "moe.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("m"))
        _moe_records(writer, rng, lambda payload: {"bytes_sent_max": payload * 1.3})
        for size in SIZES[10::2]:
            intra, inter = 20e-6 + size / 300e9, 40e-6 + size / 8 / 40e9
            writer.write(_record("grad_reduce_scatter", size, (intra + inter) * 1e6, 16, run_id="m",
                                 stages_us_median={"intra": intra * 1e6, "inter": inter * 1e6}))
    fabric, fits, notes = fit_result_files([str(path)])
    moe = next(f for f in fits if f.key.collective == "moe_all_to_all")
    assert moe.fit.busbw_bytes_per_s[-1] / 1e9 == pytest.approx(150, rel=0.05)
    # without stage times a MoE record's time is its whole round trip (count exchange + dispatch + combine): it is
    # reported, never a curve that predicts one dispatch (it was, at about half the real bandwidth)
    assert moe.key.stage == "total" and not moe.key.for_prediction
    assert any("without stage times" in n for n in notes)
    stages = {f.key.stage: f for f in fits if f.key.collective == "grad_reduce_scatter" and f.key.stage}
    assert set(stages) == {"intra", "inter", "total"}  # unknown stage names: reported, not predicted
    assert stages["intra"].heldout_median_rel_error < 0.01
    assert not any(f.key.for_prediction for f in stages.values())
    assert "moe_all_to_all" not in fabric.collectives and "grad_reduce_scatter" not in fabric.collectives
    assert fabric.source.startswith("fitted:")


def test_workload_stages_become_tier_curves_that_predict_the_workload():
    """grad_reduce_scatter's rack/cross-rack stages and MoE dispatch/combine, shaped as the workloads
    in collectives/ record them, generated from a known two-tier fabric."""
    from commbench.costmodel import hierarchical_reduce_scatter_time_s, moe_all_to_all_time_s

    truth = load_preset("h800-hgx", num_nodes=4)
    rng = np.random.default_rng(11)
    sizes = np.array(SIZES[10:])
    rack = _noisy(collective_time_s(truth, "reduce_scatter", sizes, 8, 1), rng, 0.02)
    cross = _noisy(collective_time_s(truth, "reduce_scatter", sizes / 8, 4, 4), rng, 0.02)
    dispatch = _noisy(moe_all_to_all_time_s(truth, sizes, 8, phase="dispatch"), rng, 0.02)
    combine = _noisy(moe_all_to_all_time_s(truth, 2 * sizes, 8, phase="combine"), rng, 0.02)
    records = []
    for i, size in enumerate(sizes):
        records.append(_record("grad_reduce_scatter", int(size), (rack[i] + cross[i]) * 1e6, 32, world=32,
                               params={"algorithm": "hierarchical", "ranks_per_rack": 8},
                               metrics={"ranks_per_rack_in_group": 8, "num_racks_in_group": 4},
                               stages_us_median={"rack_rs": rack[i] * 1e6, "cross_rack_rs": cross[i] * 1e6}))
        records.append(_record("moe_all_to_all", int(size), (5e-6 + dispatch[i] + combine[i]) * 1e6, 8, world=32,
                               layout="contiguous", metrics={"combine_bytes_max": int(2 * size)},
                               stages_us_median={"count_exchange": 5.0, "dispatch": dispatch[i] * 1e6,
                                                 "combine": combine[i] * 1e6}))
    fits, _ = fit_all(records, {})
    fabric = fabric_from_fits(fits, base=None, name="staged", source="fitted:test", num_gpus=32)
    assert fabric.domain_size == 8
    out_rs = max((c for c in fabric.curves if c.tier == "scale_out" and c.collective == "reduce_scatter"),
                 key=lambda c: c.min_bus_bytes)  # the large-size segment
    assert out_rs.busbw_gbps == pytest.approx(47, rel=0.15)
    predicted = hierarchical_reduce_scatter_time_s(fabric, sizes, 32, 8)
    assert np.median(np.abs(predicted / (rack + cross) - 1)) < 0.05
    assert {c.algorithm for c in fabric.curves_for("moe_all_to_all", "scale_up")} == {"dispatch", "combine"}
    got = moe_all_to_all_time_s(fabric, 2 * sizes, 8, phase="combine")
    assert np.median(np.abs(got / combine - 1)) < 0.05
    reported = {f.key.stage for f in fits if not f.key.for_prediction}
    assert {"count_exchange", "total"} <= reported


def test_uncovered_regimes_and_poor_fits_are_flagged():
    small = [_record("all_reduce", s, 20.0 + s / 1e5, 4, world=4) for s in (8, 16, 32, 64, 128, 256)]
    (fit,), _ = fit_all(small, {})
    assert any("latency-bound" in w for w in fit.warnings)
    rng = np.random.default_rng(0)
    junk = [_record("all_reduce", s, float(rng.uniform(10, 1000)), 4, world=4) for s in SIZES[8:]]
    (bad,), _ = fit_all(junk, {})
    assert any("poor fit" in w for w in bad.warnings)


def test_points_with_wrong_data_are_not_fitted():
    """A point whose data check failed (#wrong > 0, status ok) may be fast because it did not do the work (a
    no-op collective): fitted, it would make the fabric look faster than it is."""
    sizes = SIZES[8:]
    good = [_record("all_reduce", s, 20.0 + s / 1e4, 4, world=4) for s in sizes]
    wrong = [_record("all_reduce", s, 1.0, 4, world=4, num_wrong=s // 4) for s in sizes[::2]]
    (fit,), notes = fit_all(good + wrong, {})
    (clean,), _ = fit_all(good, {})
    assert fit.fit.latency_s == pytest.approx(clean.fit.latency_s)
    assert fit.fit.busbw_bytes_per_s[-1] == pytest.approx(clean.fit.busbw_bytes_per_s[-1])
    assert any("wrong data" in n for n in notes)


def test_no_usable_points_is_one_clear_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("e"))
        writer.write(_record("all_reduce", 1024, None, 4, run_id="e", status="failed", error="timeout"))
    with pytest.raises(CommbenchError, match="no usable points"):
        fit_result_files([str(path)])
    with pytest.raises(CommbenchError, match="cannot be read"):
        fit_result_files([str(tmp_path / "missing.jsonl")])


def _gloo_sweep(path) -> None:
    cmd = [sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "--backend", "gloo",
           "-b", "16K", "-e", "16M", "-n", "20", "-w", "3", "-c", "0", "-J", str(path)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


def _sweep_noise(paths: list[str], min_size: int = 65536) -> float:
    """Typical deviation of one sweep's time from the per-size median of all sweeps (sizes >= 64 KiB):
    the measurement's own repeatability, a floor for any model's held-out error on one sweep."""
    from commbench.results.records import measurements, read_records

    by_size: dict[int, list[float]] = {}
    for path in paths:
        for m in measurements(read_records([path])):
            if m.size_bytes >= min_size and m.time_us_median:
                by_size.setdefault(m.size_bytes, []).append(m.time_us_median)
    spread = [np.median(np.abs(np.array(t) / np.median(t) - 1)) for t in by_size.values() if len(t) > 1]
    return float(np.median(spread)) if spread else 0.0


def _stall_ratio(paths: list[str], min_size: int = 65536) -> float:
    """Median over sizes >= 64 KiB of median/min iteration time: ~1 on a quiet host; >> 1 when
    scheduling stalls (a shared or virtualised 2-core machine: vCPU wake-ups of several ms) dominate."""
    from commbench.results.records import measurements, read_records

    ratios = [m.time_us_median / m.time_us_min for path in paths for m in measurements(read_records([path]))
              if m.size_bytes >= min_size and m.time_us_min]
    return float(np.median(ratios)) if ratios else float("inf")


def test_fit_of_a_gloo_sweep_predicts_held_out_sizes_within_10_percent(tmp_path):
    """The bar: median held-out error <= 10% on sizes >= 64 KiB. Up to three sweeps are merged
    (median per size). Where the host itself is too noisy to judge 10% — its medians sit far above its
    minima (scheduling stalls) or its sweeps disagree by more than 10% — the strict check is reported
    as an expected failure with both figures, never silently passed; the fit must still be sane."""
    paths, fit = [], None
    for attempt in range(3):
        paths.append(str(tmp_path / f"gloo{attempt}.jsonl"))
        _gloo_sweep(paths[-1])
        _, fits, _ = fit_result_files(paths)
        (fit,) = fits
        if fit.heldout_median_rel_error <= 0.10:
            break
    noise, stalls = _sweep_noise(paths), _stall_ratio(paths)
    summary = (f"gloo all_reduce fit over {len(paths)} sweep(s): held-out median error "
               f"{fit.heldout_median_rel_error:.1%}, run-to-run noise {noise:.1%}, median/min {stalls:.2f}, "
               f"busbw {[round(b / 1e9, 3) for b in fit.fit.busbw_bytes_per_s]} GB/s")
    print(summary)
    assert fit.heldout_num_points >= 8
    assert all(0.01e9 < b < 100e9 for b in fit.fit.busbw_bytes_per_s)  # CPU loopback: ~0.1-10 GB/s
    assert fit.heldout_median_rel_error < 1.0
    # stalls add (median/min - 1) of the fastest time to a point's median, unevenly over sizes: beyond twice
    # the bar (seen at 1.36 beside two busy jobs: held-out 12.9%) a 10% curve cannot be told from the noise
    if fit.heldout_median_rel_error > 0.10 and (noise > 0.10 or stalls > 1 + 2 * 0.10):
        pytest.xfail(f"host too noisy to judge the 10% bar: {summary}")
    assert fit.heldout_median_rel_error <= 0.10, summary


def test_forced_nccl_sweeps_teach_the_preset_its_nccl_parameters():
    """Sweeps run with NCCL_ALGO/NCCL_PROTO set are fitted apart and set the NCCL parameters they
    measure (ring and NVLS efficiency, launch overhead); the held-out error is reported per regime."""

    base = load_preset("h100-hgx")
    truth = dataclasses.replace(base, nccl=dataclasses.replace(base.nccl, ring_efficiency=0.7, nvls_efficiency=0.6,
                                                               launch_us=4.0, fill_us_per_rank={}))
    sizes = 2.0 ** np.arange(10, 34)
    rng = np.random.default_rng(5)
    ring = _noisy(collective_time_s(truth, "all_reduce", sizes, 8, algorithm="ring", protocol="Simple"), rng, 0.01)
    nvls = _noisy(collective_time_s(truth, "all_reduce", sizes, 8, algorithm="nvls"), rng, 0.01)
    records = [_record("all_reduce", int(s), t * 1e6, 8, run_id="ring", world=8) for s, t in zip(sizes, ring)]
    records += [_record("all_reduce", int(s), t * 1e6, 8, run_id="nvls", world=8, params={"nccl": {"algo": "NVLS"}})
                for s, t in zip(sizes, nvls)]
    headers = {"ring": _header("ring", world_size=8), "nvls": _header("nvls", world_size=8)}
    headers["ring"] = dataclasses.replace(headers["ring"], nccl_env={"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})
    fits, _ = fit_all(records, headers)
    assert sorted(f.key.algorithm for f in fits) == ["nvls/*", "ring/Simple"]
    assert all({"latency", "middle", "bandwidth"} <= dict(f.heldout_by_regime).keys() for f in fits)
    fabric = fabric_from_fits(fits, base=base, name="learned", source="fitted:test")
    assert fabric.nccl.ring_efficiency == pytest.approx(0.7, rel=0.05)
    assert fabric.nccl.nvls_efficiency == pytest.approx(0.6, rel=0.05)
    assert fabric.nccl.launch_us == pytest.approx(4.0, abs=3.0)
    assert base.nccl.ring_efficiency != fabric.nccl.ring_efficiency
    assert any("ring_efficiency" in note for note in fabric.notes)


def _two_runs(path, second: dict) -> None:
    """Two runs of one all_reduce curve (half the sizes each), the second's header changed by `second`."""
    with JsonlWriter(path) as writer:
        for run_id, changes in (("run_a", {}), ("run_b", second)):
            writer.write(dataclasses.replace(_header(run_id, world_size=4),
                                             **{"nccl_version": "2.27.3", "devices": ["NVIDIA H100"], **changes}))
            for size in SIZES[8 + (run_id == "run_b")::2]:
                writer.write(_record("all_reduce", size, 20.0 + size / 1e4, 4, world=4, run_id=run_id))


@pytest.mark.parametrize("second, mixed", [({"nccl_version": "2.21.5"}, "NCCL versions"),
                                           ({"devices": ["NVIDIA A100"]}, "devices"),
                                           ({"emulated": {"emulated": True, "num_racks": 2}}, "fabrics"),
                                           ({"nccl_env": {"NCCL_P2P_DISABLE": "1"}}, "NCCL_\\* settings")])
def test_runs_of_different_systems_are_not_merged_into_one_fit(tmp_path, second, mixed):
    """Medians per size of two NCCL versions, two GPU models or an emulated and a real fabric made one curve of
    no real fabric, silently; now refused in one line naming the runs."""
    path = tmp_path / "mixed.jsonl"
    _two_runs(path, second)
    with pytest.raises(CommbenchError, match=f"mix {mixed} .*run run_[ab].*run run_[ab]"):
        fit_result_files([str(path)])


def test_a_profile_names_the_runs_it_was_fitted_from_and_an_emulated_one_says_so(tmp_path):
    path = tmp_path / "same.jsonl"
    _two_runs(path, {"hostnames": ["h2"]})
    fabric, _, _ = fit_result_files([str(path)])
    runs = [n for n in fabric.notes if n.startswith("fitted from run")]
    assert len(runs) == 2 and "run_a" in runs[0] and "NCCL 2.27.3" in runs[0] and "NVIDIA H100" in runs[0]
    assert not any("emulated" in w for w in fabric.warnings)
    emulated = tmp_path / "emulated.jsonl"
    _two_runs(emulated, {"emulated": {"emulated": True, "num_racks": 1}, "hostnames": ["h"]})
    with pytest.raises(CommbenchError, match="mix fabrics .*real fabric: .*emulated.jsonl run run_a"):
        fit_result_files([str(emulated)])
    alone = tmp_path / "emulated-alone.jsonl"
    with JsonlWriter(alone) as writer:
        writer.write(_header("emu", world_size=4, emulated={"emulated": True, "tool": "commbench emulate"}))
        for size in SIZES[8:]:
            writer.write(_record("all_reduce", size, 20.0 + size / 1e4, 4, world=4, run_id="emu"))
    fabric, _, _ = fit_result_files([str(alone)])
    assert fabric.warnings[0].startswith("emulated fabric: fitted on `commbench emulate`")


def test_curves_measured_on_different_hosts_say_which_host_each_came_from(tmp_path):
    """all_reduce measured on node-a and all_to_all on node-b (one cluster's collectives measured apart) are fitted
    into one profile, not refused; but neither the profile's curves nor fit's table said which came from where
    (only the notes listed both runs). Now each curve's source and fit report name its hosts, the table has a
    'measured on' column and a note says the profile joins curves of different hosts."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    paths = []
    for run_id, collective, host in (("run_a", "all_reduce", "node-a"), ("run_b", "all_to_all", "node-b")):
        path = tmp_path / f"{collective}.jsonl"
        with JsonlWriter(path) as writer:
            writer.write(dataclasses.replace(_header(run_id, world_size=4), hostnames=[host] * 4))
            for size in SIZES[8:]:   # whole 4-rank chunks of float32, as nccl-tests aligns all_to_all's
                writer.write(_record(collective, size // 16 * 16, 20.0 + size / 1e4, 4, world=4, run_id=run_id))
        paths.append(str(path))
    fabric, fits, notes = fit_result_files(paths)
    assert {(f.key.collective, f.runs, f.hosts) for f in fits} == {("all_reduce", ("run_a",), ("node-a",)),
                                                                   ("all_to_all", ("run_b",), ("node-b",))}
    assert {c.collective: c.source for c in fabric.curves} == {
        "all_reduce": "fitted: all_reduce nccl n=4 world (1 domain) on node-a",
        "all_to_all": "fitted: all_to_all nccl n=4 world (1 domain) on node-b"}
    assert {r["collective"]: r["hosts"] for r in fabric.fit_report} == {"all_reduce": ["node-a"],
                                                                        "all_to_all": ["node-b"]}
    joined = ("curves measured on different hosts, joined in one profile as one system's: all_reduce/scale_up n=4 on "
              "node-a; all_to_all/scale_up n=4 on node-b")
    assert joined in notes and joined in fabric.notes
    result = CliRunner().invoke(app, ["fit", *paths], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].split()[0]: line.split("│")[2].strip() for line in result.output.splitlines()
            if line.startswith("│")}
    assert rows == {"all_reduce": "node-a", "all_to_all": "node-b"} and "measured on" in result.output
    assert f"note: {joined}" in " ".join(result.output.split())
    # one host for every curve: no such note; a run without a header says its hosts are unknown
    assert not any("different hosts" in n for n in fit_result_files(paths[:1])[0].notes)
    (same,), _ = fit_all([_record("all_reduce", s, 20.0 + s / 1e4, 4, world=4) for s in SIZES[8:]], {})
    assert same.hosts == () and same.hosts_text == "hosts unknown"


@pytest.mark.parametrize("busiest", ["bytes_sent_max", "bytes_received_max"])
def test_a_moe_record_is_fitted_against_its_busiest_side_sending_or_receiving(tmp_path, busiest):
    """moe/accounting.py writes bytes_sent_max and bytes_received_max; the fit read bytes_recv_max, which nothing
    writes, so a receiver-bound all-to-all (skewed routing: one rank receives 1.3x what any sends) was fitted
    against the bytes sent and its bandwidth read 1.3x low."""
    other = "bytes_received_max" if busiest == "bytes_sent_max" else "bytes_sent_max"
    path = tmp_path / "moe.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header("m"))
        _moe_records(writer, np.random.default_rng(11), lambda payload: {busiest: payload * 1.3, other: payload})
    _, fits, _ = fit_result_files([str(path)])
    moe = next(f for f in fits if f.key.collective == "moe_all_to_all")
    assert moe.fit.busbw_bytes_per_s[-1] / 1e9 == pytest.approx(150, rel=0.05)


def test_a_size_regime_no_point_covers_is_named():
    """8 B..512 KiB of a 100 us + 2.7 GB/s curve is neither latency-bound at its largest size nor bandwidth-bound at
    its smallest, so no warning said the bandwidth regime (>= 64 MiB, where gradient reduce-scatters run) was never
    measured: a profile used there predicts 100x beyond its data. Each regime with no point is now named."""
    sizes = [8 * 4 ** k for k in range(9)]  # 8 B .. 512 KiB
    (fit,), _ = fit_all([_record("all_reduce", s, 100.0 + s / 2.7e3, 4, world=4) for s in sizes], {})
    assert [w for w in fit.warnings if "regime" in w] == [
        "no size in the bandwidth regime (>= 64 MiB): measured 8 B..512 KiB; predictions there are extrapolated"]
    (whole,), _ = fit_all([_record("all_reduce", s, 20.0 + s / 1e4, 4, world=4) for s in SIZES], {})
    assert not any("regime" in w for w in whole.warnings)  # 1 KiB .. 64 MiB: every regime has a point
    (big,), _ = fit_all([_record("all_reduce", s, 20.0 + s / 1e4, 4, world=4) for s in SIZES[-8:]], {})
    assert any(w.startswith("no size in the latency regime (< 512 KiB)") for w in big.warnings)


def test_runs_apart_only_in_what_the_fit_keys_or_logs_are_one_fit(tmp_path):
    """NCCL_ALGO/NCCL_PROTO runs are fitted apart and forced channel counts skipped (fit_records), NCCL_DEBUG only
    logs: none of them makes the runs another fabric."""
    path = tmp_path / "same.jsonl"
    _two_runs(path, {"nccl_env": {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring"}})
    fit_result_files([str(path)])
