"""`commbench verify-plan` on gloo: a small plan's collectives, measured beside predicted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.plan import load_plan
from commbench.workflows.verify import plan_items


def test_plan_items_use_the_plan_groups(small_plan):
    doc = load_plan(small_plan)
    items, flags = plan_items(doc, 4, 1 << 20)
    kinds = {i.kind for i in items}
    assert kinds == {"tp", "ep", "dp_cp", "edp"}     # dense and expert gradients on their own DP groups
    ep = next(i for i in items if i.kind == "ep")
    assert ep.groups == tuple(tuple(g) for g in doc["placement"]["groups"]["ep"])
    assert any("routing" in f for f in flags) and any("--max-bytes" in f for f in flags)


@pytest.mark.timeout(120)
def test_verify_plan_runs_on_gloo(small_plan):
    result = CliRunner().invoke(app, ["verify-plan", str(small_plan), "--max-bytes", "256K", "--iters", "2"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "measured" in out and "predicted" in out and "EP all-to-all" in out and "DP grad bucket" in out
    assert "unmet assumption" in out and "gloo" in out


@pytest.mark.timeout(120)
def test_verify_plan_says_which_collective_it_is_measuring(small_plan):
    # a plan-sized point can take minutes on gloo; verify-plan printed nothing until its table (probe P5: 100 s).
    # A process of its own: the ranks are forked and write to the real stderr, which CliRunner does not hold
    done = subprocess.run([sys.executable, "-m", "commbench", "verify-plan", str(small_plan), "--max-bytes", "64K",
                           "--iters", "2"], capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    assert "verify-plan: measuring 1/" in done.stderr and "EP all-to-all" in done.stderr, done.stderr
    assert "verify-plan: measuring" not in done.stdout   # the table and --json stay on stdout alone


def test_a_rank_count_no_group_of_the_plan_divides_is_said_so_naming_its_groups(small_plan):
    """TP2 EP2 (4 B200) on 3 ranks: every group is 2, none divides 3. Before, verify-plan said the plan had no
    collective of more than one rank (tp = ep = dp*cp = 1): false (probe W: TP1 PP2 DP4 on --nproc 5)."""
    from commbench.errors import CommbenchError

    with pytest.raises(CommbenchError) as caught:
        plan_items(load_plan(small_plan), 3, 1 << 20)
    text = str(caught.value)
    assert "fits 3 ranks" in text and "TP " in text and "EP all-to-all" in text and "group of 2" in text
    result = CliRunner().invoke(app, ["verify-plan", str(small_plan), "--nproc", "3"], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "no group of 2 to 2 ranks" in result.output and "run a rank count its groups divide" in result.output
    assert "tp = ep = dp*cp = 1" not in result.output


def test_verify_plan_refuses_other_schema(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"format": "commbench-plan", "version": 0}))
    result = CliRunner().invoke(app, ["verify-plan", str(path)])
    assert result.exit_code == 2 and "version" in result.output


@pytest.mark.timeout(120)
def test_verify_plan_json_validates_against_its_schema(small_plan):
    import jsonschema

    from tests.test_json_output import schema

    result = CliRunner().invoke(app, ["verify-plan", str(small_plan), "--max-bytes", "64K", "--iters", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema("verify-plan"), cls=jsonschema.Draft202012Validator)
    assert {p["collective"].split()[0] for p in doc["points"]} >= {"EP", "DP"}
    assert all(p["size_bytes"] <= 64 << 10 and p["measured_time_us"] > 0 for p in doc["points"])
    assert any("gloo" in flag for flag in doc["unmet_assumptions"])
    assert any("NCCL over NVLink and the NIC" in flag for flag in doc["unmet_assumptions"])   # a preset's plan


# a `commbench emulate` run's header field (results/emulated.py), as a 1-rack 2-rank emulation records it
EMULATED = {"emulated": True, "tool": "commbench emulate", "num_racks": 1, "ranks_per_rack": 2,
            "scale_out_rate_bits_per_s": 1e9, "scale_up": "loopback inside one network namespace per rack (no rate limit)",
            "scale_out": "veth per rack with a tbf rate limit (bandwidth only, no added latency)", "tbf_burst_bytes": 250000}


def plan_on_a_gloo_fitted_profile(tmp_path, emulated: dict | None = None):
    """(fabric.json, plan folder): a profile fitted from 2-rank gloo sweeps of every collective (measured on
    `commbench emulate`'s fabric `emulated`, if given), and a TP2 plan made on it with `plan -O`."""
    from tests.test_costmodel_cli import _write_sweep

    fabric, folder = tmp_path / "fabric.json", tmp_path / "plan"
    collectives = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sendrecv")
    for collective in collectives:
        path = tmp_path / f"{collective}.jsonl"
        _write_sweep(path, collective, 2, 200e-6, 2e9)
        if emulated is not None:
            header, *rest = path.read_text().splitlines()
            path.write_text("\n".join([json.dumps({**json.loads(header), "emulated": emulated}), *rest]) + "\n")
    fitted = CliRunner().invoke(app, ["fit", *(str(tmp_path / f"{c}.jsonl") for c in collectives), "-O", str(fabric)])
    assert fitted.exit_code == 0, fitted.output
    planned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", str(fabric), "--gpu", "gb300",
                                       "--gpus", "2", "--layout", "tp=2,pp=1,vp=1,ep=1,mbs=1", "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    return fabric, folder


@pytest.mark.timeout(120)
def test_verify_plan_predicts_from_the_plans_fitted_fabric_or_says_why_not(tmp_path):
    """A plan made on a fitted fabric .json was verified with no prediction at all ('-') and no word why; now the
    prediction comes from that profile, and a profile missing or changed since the plan is flagged."""
    fabric, folder = plan_on_a_gloo_fitted_profile(tmp_path)
    verify = ["verify-plan", str(folder / "plan.json"), "--max-bytes", "64K", "--iters", "1", "--json"]
    doc = json.loads(CliRunner().invoke(app, verify).stdout)
    assert doc["points"] and all(p["predicted_time_us"] and p["predicted_time_us"] > 0 for p in doc["points"])
    assert not any("no prediction" in f for f in doc["unmet_assumptions"])
    # the fabric is what the plan used: a profile fitted on gloo, which gloo here measures against (no flag that
    # the bandwidth goes unchecked, and nothing of "NCCL over NVLink and the NIC" as for a preset)
    assert doc["comparable"] and not any("not its bandwidth" in f for f in doc["unmet_assumptions"])
    assert not any("NVLink and the NIC" in f for f in doc["unmet_assumptions"])
    fabric.write_text(fabric.read_text().replace('"name": "fitted"', '"name": "other"'))
    doc = json.loads(CliRunner().invoke(app, verify).stdout)
    assert all(p["predicted_time_us"] is None for p in doc["points"])
    assert doc["fabric_check"]["status"] == "changed"
    assert any(f.startswith("FABRIC CHANGED") and "now 'other'" in f for f in doc["unmet_assumptions"])
    fabric.unlink()   # found nowhere (from the plan's folder, the absolute path, as given, beside the plan): one line
    gone = CliRunner().invoke(app, verify)
    assert gone.exit_code == 2 and "is a fabric profile found nowhere here: tried" in " ".join(gone.output.split())


@pytest.mark.timeout(120)
def test_verify_plan_shows_the_size_it_measured(small_plan):
    """The EP row's size was the plan's accounting at the tokens measured, not the buffer measured (the busiest
    rank's dispatch as routed here, which can differ): the table's 'size measured' and the JSON's
    measured_size_bytes are the record's size, and where the plan's figure differs a flag gives both."""
    from commbench.cli.verify_plan import verify_rows

    result = CliRunner().invoke(app, ["verify-plan", str(small_plan), "--max-bytes", "64K", "--iters", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    ep = next(p for p in doc["points"] if p["collective"].startswith("EP"))
    assert ep["measured_size_bytes"] > 0 and all(p["measured_size_bytes"] == p["size_bytes"]
                                                 for p in doc["points"] if p is not ep)
    assert ep["measured_size_bytes"] != ep["size_bytes"]   # this plan at 64K: 8,448 B measured, 8,415 B accounted
    assert any(f"measured buffer {ep['measured_size_bytes']:,} B" in f and f"{ep['size_bytes']:,} B" in f
               for f in doc["unmet_assumptions"])
    point = dict(ep, measured_size_bytes=37_000, size_bytes=33_660)   # as a plan's rounding of tokens can differ
    row = verify_rows([point])[0]
    assert row[2] == f"{37_000 / 1024:,.2f}" and row[3] == f"{point['plan_size_bytes'] / 1024:,.2f}"


def test_verify_plan_sizes_read_in_one_unit_named_in_the_header():
    # the two size columns mixed units: '2160576 B' measured beside '8415 KiB' planned, '16 MiB' beside '80 MB'
    from commbench.cli.verify_plan import verify_columns, verify_rows

    points = [{"collective": "EP all-to-all", "group_size": 2, "plan_group_size": 2, "measured_size_bytes": 2_160_576,
               "plan_size_bytes": 8415 << 10, "measured_time_us": 1.0, "predicted_time_us": None,
               "measured_over_predicted": None, "plan_predicted_time_us": None, "num_wrong": 0},
              {"collective": "DP grad bucket reduce-scatter", "group_size": 2, "plan_group_size": 2,
               "measured_size_bytes": 16 << 20, "plan_size_bytes": 80_000_000, "measured_time_us": 1.0,
               "predicted_time_us": None, "measured_over_predicted": None, "plan_predicted_time_us": None,
               "num_wrong": 0}]
    names = [c.name for c in verify_columns(points)]
    assert "size measured (MiB)" in names and "plan size (MiB)" in names
    rows = verify_rows(points)
    assert [r[2:4] for r in rows] == [["2.06", "8.22"], ["16.00", "76.29"]]
    assert not any(unit in cell for r in rows for cell in r[2:4] for unit in ("B", "KiB", "MiB", "MB"))
    small = [dict(points[0], measured_size_bytes=512)]   # below 1 KiB: whole bytes, the header says B
    assert "size measured (B)" in [c.name for c in verify_columns(small)] and verify_rows(small)[0][2] == "512"


def test_plan_items_measure_the_models_expert_capacity(small_plan):
    """A model with a capacity factor (Megatron's --moe-expert-capacity-factor) is measured with it: the EP item's
    params carry it (no padding: no plan emits --moe-pad-expert-input-to-capacity), and a flag says so."""
    doc = load_plan(small_plan)
    ep = next(i for i in plan_items(doc, 4, 1 << 20)[0] if i.kind == "ep")
    assert ep.params.get("capacity_factor") is None  # the zoo model is dropless
    doc["inputs"]["model_spec"]["architecture"]["capacity_factor"] = 1.25
    items, flags = plan_items(doc, 4, 1 << 20)
    ep = next(i for i in items if i.kind == "ep")
    assert ep.params["capacity_factor"] == 1.25 and ep.params["pad_to_capacity"] is False
    assert any("capacity factor 1.25" in f for f in flags)
    from collectives import REGISTRY

    (spec, _), = REGISTRY["moe_all_to_all"].plan_specs({**ep.params, "tokens_per_rank": [ep.params["tokens_per_rank"]]}, 2)
    assert spec.params["capacity_factor"] == 1.25


@pytest.mark.timeout(120)
def test_verify_plan_says_its_predictions_come_from_an_emulated_fabric(tmp_path):
    """A plan on a profile fitted from `commbench emulate` runs was verified against that profile's predictions with no
    word that they are the emulator's links (probe EN: planEE2 on fabEE.json), where predict, plan and report --fabric
    say it: the title, the first unmet assumption and --json's predicted_from_emulated now do."""
    import jsonschema

    from tests.test_json_output import schema

    _, folder = plan_on_a_gloo_fitted_profile(tmp_path, emulated=EMULATED)
    verify = ["verify-plan", str(folder / "plan.json"), "--max-bytes", "64K", "--iters", "1"]
    doc = json.loads(CliRunner().invoke(app, [*verify, "--json"]).stdout)
    jsonschema.validate(doc, schema("verify-plan"), cls=jsonschema.Draft202012Validator)
    assert doc["points"] and all(p["predicted_time_us"] for p in doc["points"])
    assert doc["emulated"] is None   # measured here on no emulated fabric; the prediction's profile was
    assert doc["predicted_from_emulated"].startswith("emulated fabric: fitted on `commbench emulate`")
    assert "EMULATED" in doc["unmet_assumptions"][0] and "the emulator's links" in doc["unmet_assumptions"][0]
    shown = CliRunner().invoke(app, verify, env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert "predicted for " in shown.output and ", an EMULATED fabric" in shown.output.splitlines()[0]
    plain, _ = plan_on_a_gloo_fitted_profile(tmp_path / "real")
    doc = json.loads(CliRunner().invoke(app, ["verify-plan", str(tmp_path / "real" / "plan" / "plan.json"),
                                              "--max-bytes", "64K", "--iters", "1", "--json"]).stdout)
    assert doc["predicted_from_emulated"] is None and not any("EMULATED" in f for f in doc["unmet_assumptions"])
