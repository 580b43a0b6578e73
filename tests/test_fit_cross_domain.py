"""Fitted cross-domain (scale-out) curves predict the layouts they were measured at, and compose sensibly for
others: the latency split between the steps across and inside domains (profile.split_latency)."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import collective_time_s
from commbench.costmodel.fit_records import fit_all
from commbench.costmodel.formulas import bus_factor
from commbench.costmodel.profile import fabric_from_fits
from commbench.results.records import Measurement, RunHeader

SIZES = [1 << k for k in range(10, 31)]  # 1 KiB .. 1 GiB, as nccl-tests -b 1K -e 1G


def _header(run_id: str, world: int) -> RunHeader:
    return RunHeader(run_id=run_id, started_at="2026-01-01T00:00:00", argv=["synthetic"], commbench_version="0",
                     python_version="3.11", torch_version=None, nccl_version=None, cuda_version=None,
                     cupy_version=None, backend="nccl", world_size=world, hostnames=["h"], devices=["gpu"],
                     nccl_env={}, launcher="synthetic", topology={"ranks_per_node": 8})


def exact_time_s(collective: str, size: float, n: int, latency_us: float, busbw_gbps: float) -> float:
    """nccl-tests' time of an alpha-beta fabric: latency + bus bytes / busbw."""
    return latency_us * 1e-6 + float(bus_factor(collective, n)) * size / (busbw_gbps * 1e9)


def _records(collective: str, n: int, latency_us: float, busbw_gbps: float, run_id: str) -> list[Measurement]:
    return [Measurement(run_id=run_id, collective=collective, backend="nccl", size_bytes=s, count=s // 4,
                        dtype="float32", op="sum", in_place=True, world_size=n, group_size=n, group_layout="world",
                        iters=20, warmup_iters=5,
                        time_us_median=exact_time_s(collective, s, n, latency_us, busbw_gbps) * 1e6)
            for s in SIZES]


def two_domain_fabric(collective: str, up: tuple[float, float], out: tuple[float, float]):
    """A profile fitted from 8 ranks on one node (latency us, busbw GB/s `up`) and 16 on two (`out`)."""
    records = _records(collective, 8, *up, "one-node") + _records(collective, 16, *out, "two-nodes")
    headers = {"one-node": _header("one-node", 8), "two-nodes": _header("two-nodes", 16)}
    fits, _ = fit_all(records, headers)
    return fabric_from_fits(fits, base=None, name="fitted", source="fitted:test", num_gpus=16)


@pytest.mark.parametrize("up_latency_us", [25.0, 5.0, 2.0])
def test_a_fitted_cross_domain_curve_predicts_its_own_points(up_latency_us):
    """8 ranks in 25 us on one node, 16 over two nodes in 30 us: the in-domain rate x the 28 in-domain steps of the
    16-rank group (50 us) exceeds the measured 30 us; the crossing was clamped to 0 and the measured layout
    predicted at 50 us (+67% at 1 KiB)."""
    fabric = two_domain_fabric("all_reduce", (up_latency_us, 100.0), (30.0, 40.0))
    sizes = np.array(SIZES, dtype=float)
    predicted = collective_time_s(fabric, "all_reduce", sizes, 16, 2)
    measured = np.array([exact_time_s("all_reduce", s, 16, 30.0, 40.0) for s in SIZES])
    np.testing.assert_allclose(predicted, measured, rtol=0.01)


@pytest.mark.parametrize("up_latency_us", [25.0, 5.0])
def test_a_group_across_domains_is_never_faster_than_the_same_group_inside_one(up_latency_us):
    """One rank per node: a 2-rank group on two nodes was predicted at ~0.2 us (its crossing clamped to 0), below
    the same 2 ranks on one node and below any cross-domain latency measured."""
    fabric = two_domain_fabric("all_reduce", (up_latency_us, 100.0), (30.0, 40.0))
    across = float(collective_time_s(fabric, "all_reduce", 1024, 2, 2))
    inside = float(collective_time_s(fabric, "all_reduce", 1024, 2, 1))
    assert across >= inside * 0.999
    assert across > 1e-6


def test_the_ordinary_split_keeps_the_in_domain_step_latency():
    """Where the in-domain steps explain less than the measured latency, the crossings take the rest and the
    in-domain steps keep the in-domain curve's rate (the decomposition as before)."""
    fabric = two_domain_fabric("all_reduce", (5.0, 100.0), (30.0, 40.0))
    (out,) = [c for c in fabric.curves if c.tier == "scale_out"]
    (up,) = [c for c in fabric.curves if c.tier == "scale_up"]
    assert out.latency_per_intra_step_us == pytest.approx(up.latency_per_step_us, rel=1e-6)
    assert out.latency_per_step_us == pytest.approx((30.0 - 28 * 5.0 / 14) / 2, rel=1e-3)


@pytest.mark.parametrize("collective, up, out", [("all_reduce", (10.0, 100.0), (20.0, 150.0)),
                                                 ("all_to_all", (10.0, 20.0), (20.0, 100.0))])
def test_a_cross_domain_busbw_above_the_nodes_is_not_capped_at_its_own_layout(collective, up, out):
    """16 ranks on 2 nodes measured at 150 GB/s busbw, 8 on one at 100 (NCCL's tree / NVLS-tree on few nodes beat
    the node's ring: the h100-hgx preset predicts 511 vs 478): the composition capped the 16-rank group at the
    node's 100 GB/s, 50% slow at its own points, and the fit warned that the scale-out rate may be higher."""
    fabric = two_domain_fabric(collective, up, out)
    sizes = np.array(SIZES, dtype=float)
    predicted = collective_time_s(fabric, collective, sizes, 16, 2)
    measured = np.array([exact_time_s(collective, s, 16, *out) for s in SIZES])
    np.testing.assert_allclose(predicted, measured, rtol=0.01)
    if collective == "all_reduce":
        (warning,) = [w for w in fabric.warnings if "scale-up rate" in w]
        assert "above the scale-up rate" in warning and "may be higher" not in warning


def _on_preset(tmp_path):
    """A profile fitted on h100-hgx from all_reduce on 8 ranks of one node at 100 GB/s (fit --system h100-hgx)."""
    from commbench.costmodel import load_preset

    fits, _ = fit_all(_records("all_reduce", 8, 10.0, 100.0, "one-node"), {"one-node": _header("one-node", 8)})
    fabric = fabric_from_fits(fits, base=load_preset("h100-hgx", num_racks=2), name="h100-hgx+fitted",
                              source="fitted:test")
    path = tmp_path / "fabric.json"
    fabric.to_json(path)
    return fabric, path


def test_a_preset_cross_domain_curve_is_bounded_by_the_measured_in_domain_rate(tmp_path):
    """fit --system h100-hgx on a node measured at 100 GB/s: 16 ranks on 2 nodes were predicted at 375 GB/s busbw
    (the preset's 47 GB/s per NIC x 8, its ring / tree having no in-domain curve beside the measured 'fitted' one,
    so no in-domain bound)."""
    fabric, _ = _on_preset(tmp_path)
    size = float(1 << 30)
    busbw_gbps = size * float(bus_factor("all_reduce", 16)) / float(collective_time_s(fabric, "all_reduce", size, 16, 2)) / 1e9
    assert busbw_gbps <= 100.0 * 1.001


def test_predict_names_the_curves_that_come_from_the_preset(tmp_path):
    """predict on a profile fitted on a preset said nothing of which curves are the preset's (plan does)."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app

    _, path = _on_preset(tmp_path)
    args = ["predict", "-c", "all_reduce", "-g", "16", "--fabric", str(path), "-b", "1G", "-e", "1G"]
    result = CliRunner().invoke(app, args + ["--json"])
    assert result.exit_code == 0, result.output
    # JSON on stdout; stderr warns that results file 'test' cannot be found to check the profile's age
    borrowed = json.loads(result.stdout)["preset_curves"]
    assert "all_reduce/scale_out tree" in borrowed and not any("scale_up" in c for c in borrowed)
    text = CliRunner().invoke(app, args, env={"COLUMNS": "250"}).output
    assert "from the preset (not measured): all_reduce/scale_out ring, all_reduce/scale_out tree" in text
    inside = CliRunner().invoke(app, ["predict", "-c", "all_reduce", "-g", "8", "--fabric", str(path), "-b", "1G",
                                      "-e", "1G", "--json"])
    assert json.loads(inside.stdout)["preset_curves"] == []   # one node: the measured curve alone


def test_the_cross_domain_fields_round_trip_and_a_presets_file_is_unchanged(tmp_path):
    """A fitted profile keeps its scale-out curves' own in-domain step latency and rate through its file; a
    preset's curves write neither (its digest, which verify-plan checks, is as before the fields existed)."""
    from commbench.costmodel import load_preset
    from commbench.costmodel.fabric import Fabric

    fabric = two_domain_fabric("all_reduce", (25.0, 100.0), (30.0, 150.0))
    fabric.to_json(tmp_path / "f.json")
    back = Fabric.from_json(tmp_path / "f.json")
    (out,) = [c for c in back.curves if c.tier == "scale_out"]
    assert out.latency_per_intra_step_us is not None and out.intra_busbw_gbps == pytest.approx(150.0, rel=1e-3)
    assert float(collective_time_s(back, "all_reduce", 1 << 30, 16, 2)) == pytest.approx(
        exact_time_s("all_reduce", 1 << 30, 16, 30.0, 150.0), rel=0.01)
    for curve in load_preset("h100-hgx").to_dict()["curves"]:
        assert "latency_per_intra_step_us" not in curve and "intra_busbw_gbps" not in curve
