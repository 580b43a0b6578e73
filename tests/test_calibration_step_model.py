"""A calibration file records the step model its terms were fitted to (step.terms.STEP_MODEL): commbench's version
string is 0.1.0 throughout its history, so a file fitted to an older step model was read as current without a word.
A file of another step model is warned about in one line naming the file and both; one that records none (written
before they were) reads as before, with a note that its step model is unknown."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench import __version__
from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step.terms import CALIBRATED, STEP_MODEL, Calibration, calibration_json

PLAN = ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8", "--gbs", "64",
        "--layout", "tp=1,pp=1,vp=1,ep=8,mbs=1"]


def _plan_with(tmp_path, **fields):
    data = dict(calibration_json(CALIBRATED, fitted_on=["x.log"]), commbench_version=__version__)
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, [*PLAN, "--calibration", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return str(path), [" ".join(line.split()) for line in result.stderr.splitlines() if "step model" in line]


def test_calibrate_writes_the_step_model_and_a_current_file_reads_without_a_note(tmp_path):
    assert calibration_json(CALIBRATED, fitted_on=[])["step_model"] == STEP_MODEL
    assert _plan_with(tmp_path)[1] == []


def test_a_file_of_another_step_model_names_the_file_and_both(tmp_path):
    # the same release string (0.1.0), an older step model: read as current without a word before
    path, lines = _plan_with(tmp_path, step_model="2026-01-01")
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: calibration file {path} was fitted to step model 2026-01-01")
    assert f"has step model {STEP_MODEL}" in lines[0] and "calibrate -O" in lines[0]


def test_a_file_without_a_step_model_reads_with_a_note_that_it_is_unknown(tmp_path):
    # written by this very release string before step models were recorded: no note at all before
    path, lines = _plan_with(tmp_path, step_model=None)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: calibration file {path} was written by commbench {__version__} and records "
                               "no step model")
    assert "is unknown" in lines[0] and f"has step model {STEP_MODEL}" in lines[0]


def _plan_doc(tmp_path, **fields) -> dict:
    data = dict(calibration_json(CALIBRATED, fitted_on=["x.log"]), commbench_version=__version__)
    data.update(fields)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    result = CliRunner().invoke(app, [*PLAN, "--calibration", str(path), "-O", str(tmp_path / "p")],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "p" / "plan.json").read_text())


def test_plan_json_records_the_step_models_and_verify_plan_flags_another(tmp_path):
    # probe BL 3: a calibration of another step model was warned about on the terminal only; plan.json recorded
    # neither step model nor commbench's version, so verify-plan (and anyone reading the plan) could not tell
    from commbench.workflows.verify import plan_context

    doc = _plan_doc(tmp_path, step_model="2025-01-01.1")
    inputs = doc["inputs"]
    assert (inputs["step_model"], inputs["commbench_version"]) == (STEP_MODEL, __version__)
    assert (inputs["calibration_step_model"], inputs["calibration_commbench_version"]) == ("2025-01-01.1", __version__)
    said = [a for a in doc["assumptions"] if a.startswith("step model: ")]
    assert len(said) == 1 and "fitted to step model 2025-01-01.1" in said[0] and STEP_MODEL in said[0]
    flags = plan_context(doc).flags
    assert any("was fitted to step model 2025-01-01.1, the plan predicted by " + STEP_MODEL in f for f in flags), flags
    # a plan written under another step model (a newer commbench reading an older plan, or the reverse)
    doc["inputs"] = dict(inputs, step_model="2025-01-01.1")
    flags = plan_context(doc).flags
    assert any(f.startswith("the plan was predicted by step model 2025-01-01.1 (commbench " + __version__) and
               f"this commbench has step model {STEP_MODEL}" in f for f in flags), flags
    # a plan from before plans recorded the step model: its figures are an older physics', so it is flagged too
    doc["inputs"] = {k: v for k, v in inputs.items() if k not in ("step_model", "commbench_version")}
    flags = plan_context(doc).flags
    assert any(f.startswith("the plan records no step model") and STEP_MODEL in f for f in flags), flags
    # a current file: recorded, nothing said or flagged
    doc = _plan_doc(tmp_path)
    assert doc["inputs"]["calibration_step_model"] == STEP_MODEL
    assert not [a for a in doc["assumptions"] if a.startswith("step model: ")]
    assert not [f for f in plan_context(doc).flags if "step model" in f]


# Fixed terms (not CALIBRATED, which moves with a refit) so only the step model's physics moves these figures.
TERMS = dict(gemm_efficiency_hopper=0.7, gemm_efficiency_blackwell=0.55, fp4_gemm_ratio=0.8,
             grouped_gemm_efficiency=0.4, attention_efficiency=0.4, hbm_efficiency=0.4, layer_overhead_s=0.005,
             graph_layer_residual=0.4, moe_sync_s=1e-5, all_to_all_efficiency=1.0, overlap_efficiency=0.3,
             ep_overlap_efficiency=0.5, gemm_traffic_factor=1.0, expert_gemm_kernel_s=2e-5,
             grouped_gemm_8bit_efficiency=0.56)
# STEP_MODEL -> step_s of the two layouts below. A physics change moves them: set STEP_MODEL to the day's date
# (calibration files fitted before are then warned about) and pin the new figures under it.
REFERENCE = {"2026-12-05.1": [17.085285043756077, 29.81942600822918],
             "2026-12-05.2": [17.085285043756077, 29.81942600822918],   # .2 moves FSDP hybrid rows only
             "2026-12-05.3": [17.085285043756077, 29.81942600822918],   # .3 Hopper TP overlap beside FSDP / EP overlap
             "2026-12-05.4": [17.085285043756077, 29.81942600822918],   # .4 moves Megatron-FSDP rows only
             "2026-12-05.5": [17.085285043756077, 29.81942600822918],   # .5 moves TorchTitan CP / FSDP rows only
             "2026-12-06.1": [17.085285043756077, 29.81942600822918],   # memory only (selective credit, FSDP mxfp8)
             "2026-12-06.2": [17.240254506347718, 29.81942600822918],   # .2 MXFP8: DP param gather in bf16, GEMM ratio 0.951
             "2026-12-06.3": [17.240254506347718, 29.81942600822918],   # .3 moves sliding-window (gpt-oss) rows only
             "2026-12-06.4": [17.240254506347718, 29.81942600822918],   # .4 moves flex EP across NVLink domains only
             "2026-12-06.5": [17.512040060672888, 29.81942600822918],   # .5 Megatron's output layer in bf16 (module_precision)
             "2026-12-06.6": [17.512040060672888, 29.81942600822918],   # .6 moves full-recompute and CP rows only
             "2026-12-06.7": [17.512040060672888, 29.81942600822918],   # memory only (saved tensors, fix-BU)
             "2026-12-06.8": [17.25348543679896, 29.62521206225039],    # .8 memory-bound kernels at the SMs' power-limited rate
             "2026-12-06.9": [17.25348543679896, 29.62521206225039],    # .9 moves Megatron-FSDP HSDP / offload rows only
             "2026-12-06.10": [17.25348543679896, 29.62521206225039],   # .10 Mamba SSD at its measured rate (hybrid rows)
             "2026-12-06.11": [17.25348543679896, 29.62521206225039],   # .11 memory only: Megatron-FSDP unit buffers
             # .12 Hopper fp8 Megatron-FSDP transposes (these two rows: GB200, no FSDP: unchanged)
             "2026-12-06.12": [17.25348543679896, 29.62521206225039],
             "2026-12-06.13": [17.25348543679896, 29.62521206225039],   # .13 moves moe_act-recompute and sink-attention CP rows only
             "2026-12-06.14": [17.25348543679896, 29.62521206225039],   # .14 moves selective-recompute rows only
             "2026-12-06.15": [17.25348543679896, 29.62521206225039],   # .15 moves hybrid PP rows at 25.09-26.02 only
             "2026-12-06.16": [17.25348543679896, 29.62521206225039],   # .16 memory only (the loss kernel a release launches)
             # .17 a launch of native (these two: no release named) prices its cross entropy's traffic over TE's
             "2026-12-06.17": [17.69713495440708, 30.52302612865731],
             # .18 the launch keeps DeepSeek-V3's 129,280 rows at TP2 (divisor 640), not 130,560 (the TP2 row)
             "2026-12-06.18": [17.69713495440708, 30.430047134609158],
             "2026-12-06.19": [17.69713495440708, 30.430047134609158],  # .19 moves Gated DeltaNet CP rows only
             "2026-12-06.20": [17.69713495440708, 30.430047134609158],  # .20 moves TorchTitan fp8 TP rows only
             "2026-12-06.21": [17.69713495440708, 30.430047134609158],  # memory only (fix-G11)
             "2026-12-06.22": [17.69713495440708, 30.430047134609158],  # memory only (TP-overlap userbuffers, fix-F1)
             # .23 moves recipe rows whose recompute is a module set (and mlp recompute) only (fix-F3)
             "2026-12-06.23": [17.69713495440708, 30.430047134609158],
             "2026-12-06.24": [17.69713495440708, 30.430047134609158],  # .24 moves hybrid vp rows only (fix-F9)
             # .25 the alltoall dispatcher's sorts by local expert (these two: alltoall, 4 and 16 local experts) and
             # gpt-oss's unfused YaRN RoPE as memory-bound passes (fix-F6)
             "2026-12-06.25": [18.78128195544181, 31.563623505982733],
             "2026-12-06.26": [18.78128195544181, 31.563623505982733],  # memory only (optimizer step's copy, fix-F3)
             # memory only (an alltoall graph's permuted tokens in the graph pool, fix-F7)
             "2026-12-06.27": [18.78128195544181, 31.563623505982733],
             # .28 moves flex-dispatcher rows only (distinct experts per token, hypergeometric; fix-F12)
             "2026-12-06.28": [18.78128195544181, 31.563623505982733]}


def test_the_step_model_identifier_moves_with_the_physics():
    model = load_model("deepseek-v3")
    fabric = load_preset("gb200-nvl72", num_gpus=256)
    arrays = LayoutArrays.from_layouts([
        Layout(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, precision="mxfp8"),
        Layout(tp=2, pp=8, vp=2, ep=16, etp=1, dp=16, mbs=1, gbs=4096, precision="bf16")])
    step_s = evaluate_layouts(model, fabric, arrays, calibration=Calibration(**TERMS)).step_s
    assert STEP_MODEL in REFERENCE, f"pin this step model's figures: {STEP_MODEL}: {list(map(float, step_s))}"
    assert list(step_s) == pytest.approx(REFERENCE[STEP_MODEL], rel=1e-9), (
        f"the step model's predictions moved ({list(map(float, step_s))}): set step.terms.STEP_MODEL to today's "
        "date and pin these figures under it")


@pytest.mark.parametrize("value", [19, "banana", None, ["2026-12-06.19"]])
@pytest.mark.parametrize("command", ["plan", "evaluate"])
def test_a_malformed_step_model_is_refused_in_one_line(tmp_path, value, command):
    """step_model 19 read as a file that records none ("written before step models were recorded"), and "banana" as
    another step model, warned and then used (found from outside): refused in one line naming the field, the value
    and what is allowed, exit 2."""
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(dict(calibration_json(CALIBRATED, fitted_on=["x.log"]), step_model=value)))
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([dict(model="Llama3-8B", gpu="H100", num_gpus=8, precision="FP8", seq_len=8192, gbs=128,
                                     mbs=1, tp=1, pp=1, cp=1, tokens_per_s_per_gpu=12000)]))
    args = ([*PLAN, "--calibration", str(path)] if command == "plan"
            else ["calibrate", "--evaluate", str(rows), "--calibration", str(path)])
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    said = " ".join(result.output.split())
    assert said.count("error:") == 1 and "Traceback" not in said, said
    assert f"field 'step_model' = {json.dumps(value)}" in said and "allowed: a step model id" in said, said
    assert "YYYY-MM-DD.N" in said and STEP_MODEL in said, said
