"""predict's `extrapolated` merged moe_all_to_all's dispatch and combine ranges (probe PE): an fp8 dispatch measured
16,896 B..4.2 MiB and an fp32 combine 64 KiB..16 MiB gave one range 16,896 B..16 MiB, so 32 KiB (below every
combine point) and 8 MiB (twice the largest dispatch) were 'in range' though each row is mean(dispatch, combine).
Each phase's curve is checked against its own range now, and the row names the phase beyond it; verify-plan reads
each phase's curve at the sizes the plan prices it at (dispatch: both sizes; combine: the bf16 one)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement, RunHeader

DISPATCH_SIZES = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]   # the combine's: 4x (fp32 vs fp8)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moe")
    results = folder / "moe.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(RunHeader(run_id="m", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None,
                               backend="gloo", world_size=2, hostnames=["h"], devices=["cpu"] * 2, nccl_env={},
                               launcher="local"))
        for size in DISPATCH_SIZES:
            dispatch_us, combine_us = 100 + size / 1e3, 150 + 4 * size / 1e3
            writer.write(Measurement(run_id="m", collective="moe_all_to_all", backend="gloo", size_bytes=size,
                                     count=size, dtype="uint8", op=None, in_place=False, world_size=2,
                                     group_size=2, iters=5, warmup_iters=1,
                                     time_us_median=10 + dispatch_us + combine_us,
                                     metrics={"combine_bytes_max": 4 * size},
                                     stages_us_median={"count_exchange": 10.0, "dispatch": dispatch_us,
                                                       "combine": combine_us}))
    fitted = CliRunner().invoke(app, ["fit", str(results), "-O", str(folder / "fabric.json")])
    assert fitted.exit_code == 0, fitted.output
    return folder / "fabric.json"


def _predict(profile, *args):
    result = CliRunner().invoke(app, ["predict", "--fabric", str(profile), "-c", "moe_all_to_all", "-g", "2", *args],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def test_each_phase_is_checked_against_its_own_range(profile):
    doc = json.loads(_predict(profile, "-b", "32K", "-e", "8M", "-f", "16", "--json").stdout)
    rows = {row["size_bytes"]: row for row in doc["rows"]}
    assert {s: r["extrapolated"] for s, r in rows.items()} == {32 << 10: True, 512 << 10: False, 8 << 20: True}
    assert {s: r["extrapolated_phases"] for s, r in rows.items()} == {
        32 << 10: ["combine"], 512 << 10: [], 8 << 20: ["dispatch"]}
    phases = doc["fitted_range"]["phases"]
    assert (phases["dispatch"]["min_size_bytes"], phases["dispatch"]["max_size_bytes"]) == (16 << 10, 4 << 20)
    assert (phases["combine"]["min_size_bytes"], phases["combine"]["max_size_bytes"]) == (64 << 10, 16 << 20)
    # the sizes both phases measured
    assert (doc["fitted_range"]["min_size_bytes"], doc["fitted_range"]["max_size_bytes"]) == (64 << 10, 4 << 20)
    text = _predict(profile, "-b", "32K", "-e", "8M", "-f", "16").output
    assert "extrapolated (combine)" in text and "extrapolated (dispatch)" in text, text
    assert "measured for moe_all_to_all[dispatch] (scale_up)" in text and "[combine] (scale_up)" in text, text


def test_one_phase_is_checked_against_its_range_alone(profile):
    doc = json.loads(_predict(profile, "-b", "32K", "-e", "8M", "-f", "16", "--algorithm", "combine", "--json").stdout)
    assert [r["extrapolated"] for r in doc["rows"]] == [True, False, False]
    assert doc["fitted_range"]["curve"] == "moe_all_to_all[combine] (scale_up)"
    assert "extrapolated_phases" not in doc["rows"][0]


def test_verify_plan_reads_the_combine_only_at_the_bf16_size(profile):
    from commbench.cli.predict import fitted_range
    from commbench.cli.verify_plan import _beyond
    from commbench.costmodel import load_fabric

    measured = fitted_range(load_fabric(str(profile)), "moe_all_to_all", 1)
    # an fp8 dispatch of 32 KiB, its bf16 twin and the combine 64 KiB: the combine curve holds 64 KiB
    assert _beyond(measured, [32 << 10, 64 << 10], 2) == []
    # 8 MiB of dispatch lies past the dispatch's 4 MiB, the combine's 16 MiB holds 16 MiB
    ((one, read),) = _beyond(measured, [8 << 20, 16 << 20], 2)
    assert one["curve"] == "moe_all_to_all[dispatch] (scale_up)" and read == [8 << 20, 16 << 20]


def test_plan_names_each_curves_largest_message(profile):
    from commbench.costmodel import load_fabric
    from commbench.planner.emit.plan import fabric_lines

    measured, beyond = fabric_lines(load_fabric(str(profile)))[:2]
    assert "moe_all_to_all[dispatch]/scale_up 4 MiB" in measured and "[combine]/scale_up 16 MiB" in measured, measured
    assert "messages of 16 MiB" not in beyond, beyond
