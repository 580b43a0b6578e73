"""`commbench calibrate` on inputs that would narrow or stale the data it fits: a field it does not read, the
same run given twice, a log cut off mid-line, a calibration file fitted on other GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.runlogs import parse_megatron_log, parse_torchtitan_log

DATA = Path(__file__).parent / "data"
MEGATRON = DATA / "megatron_deepseek_v3_gb300.log"
TITAN = DATA / "torchtitan_qwen3_30b_b200.log"
ROW = dict(model="deepseek-v3", gpu="gb300-nvl72", num_gpus=256, precision="MXFP8", seq_len=4096, tp=1, pp=2, vp=8,
           ep=32, etp=1, cp=1, mbs=1, gbs=4096, tokens_per_s_per_gpu=6300.0)
LOG_ARGS = ["--model", "deepseek-v3", "--system", "gb300-nvl72"]


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _one_error_line(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("note:")]   # notes: stderr
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("renamed,into", [("ep", "EP"), ("seq_len", "Seq-Len"), ("vp", "VP")])
def test_a_read_field_in_another_case_is_refused_not_read_as_unset(tmp_path, renamed, into):
    # {"EP": 32} (no near miss of 'ep' by spelling) was dropped without a word: the run was modelled as ep=1
    row = dict(ROW)
    row[into] = row.pop(renamed)
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([row]))
    _one_error_line(_invoke("calibrate", "--evaluate", str(runs)), "row 1", repr(into), f"did you mean {renamed!r}")


@pytest.mark.parametrize("renamed,into", [("vp", "virtual_pipeline_size"), ("cp", "context_parallel")])
def test_a_field_calibrate_does_not_read_is_named(tmp_path, renamed, into):
    # a size under a name it does not read reads as unset (1): the run is modelled as another layout, not a word
    row = dict(ROW, cluster="eos")
    row[into] = row.pop(renamed)
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([row, dict(row, gbs=2048)]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "not read" in line]
    assert len(warnings) == 1 and f"'cluster', '{into}' not read" in warnings[0] and str(runs) in warnings[0]
    assert warnings[0].endswith(", tp, tp_comm_overlap, vp")


def test_an_unread_recipe_field_is_refused(tmp_path):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([dict(ROW, recipe={"recompute": "full", "a2a_overlap": True})]))
    _one_error_line(_invoke("calibrate", "--evaluate", str(runs)), "'a2a_overlap'", "moe_a2a_overlap")


def test_the_same_runs_file_twice_is_refused(tmp_path):
    # it was fitted as two runs (the in-sample table listed it twice, the file recorded it twice)
    out = tmp_path / "cal.json"
    _one_error_line(_invoke("calibrate", str(MEGATRON), str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo"),
                    "given twice", "RUNS 1 and 2")
    assert not out.exists()
    copy = tmp_path / "copy.log"
    copy.write_text(MEGATRON.read_text())
    _one_error_line(_invoke("calibrate", "--evaluate", str(MEGATRON), str(copy), *LOG_ARGS), "the same text",
                    str(copy))
    copy.write_text(MEGATRON.read_text() + "[after training] done\n")   # a line more: not the same text
    _one_error_line(_invoke("calibrate", "--evaluate", str(MEGATRON), str(copy), *LOG_ARGS),
                    f"{copy} row 1 is {MEGATRON} row 1 again")


def test_the_same_row_twice_is_refused(tmp_path):
    runs, other = tmp_path / "runs.json", tmp_path / "other.json"
    runs.write_text(json.dumps([ROW, dict(ROW, tokens_per_s_per_gpu=6200.0)]))
    assert _invoke("calibrate", "--evaluate", str(runs)).exit_code == 0   # a repeat with its own figure is a run
    other.write_text(json.dumps([dict(ROW, gbs=2048), ROW]))
    _one_error_line(_invoke("calibrate", "--evaluate", str(runs), str(other)), f"{other} row 2",
                    f"{runs} row 1 again")


def _cut_after(text: str, label: str, keep_chars: int) -> str:
    """`text` up to `keep_chars` characters into the figure after the last `label`: a log whose writer stopped
    mid-line."""
    at = text.rstrip("\n").rfind(label) + len(label)
    return text[:at + keep_chars]


def _megatron_lines(keep: int) -> str:
    text = MEGATRON.read_text()
    lines = text.splitlines(keepends=True)
    iteration = [i for i, line in enumerate(lines) if "elapsed time per iteration" in line]
    return "".join(lines[:iteration[keep - 1] + 1])


def test_a_megatron_log_cut_off_mid_line_leaves_the_cut_figure_out_and_says_so():
    # "elapsed time per iteration (ms): 10" (of 10402.9) was read as a 10 ms iteration: 2x the throughput here
    whole = _megatron_lines(4)
    cut = _cut_after(whole, "elapsed time per iteration (ms): ", 3)
    without = parse_megatron_log(_megatron_lines(3), source="x", model="deepseek-v3", gpu="gb300-nvl72")
    row = parse_megatron_log(cut, source="x", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["tokens_per_s_per_gpu"] == pytest.approx(without["tokens_per_s_per_gpu"])
    assert "last line cut off" in row["notes"]


def test_a_torchtitan_log_cut_off_mid_line_leaves_the_cut_figure_out_and_says_so():
    text = TITAN.read_text()
    cut = _cut_after(text, "tps: ", 2)   # "tps: 24" of 24,420
    whole = parse_torchtitan_log(text, source="x", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    row = parse_torchtitan_log(cut, source="x", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_408.5)   # median of 24,311 and 24,506, not 24
    assert whole["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)
    assert "last line cut off" in row["notes"]


def test_the_cli_names_a_cut_off_line(tmp_path):
    log = tmp_path / "cut.log"
    log.write_text(_cut_after(MEGATRON.read_text(), "elapsed time per iteration (ms): ", 2))
    result = _invoke("calibrate", "--evaluate", str(log), *LOG_ARGS)
    assert result.exit_code == 0, result.output
    assert "last line cut off" in result.output and str(log) in result.output


def test_a_calibration_fitted_on_other_gpus_keeps_their_kernel_terms_out_of_a_plan_of_this_gpu(tmp_path):
    # terms fitted on GB300 runs planned an H100 or GB200 run whole: GB300's kernel efficiencies (its GEMMs, its
    # attention) came along, which on the newer releases predicted other GPUs worse than the shipped terms
    # (step.terms.KERNEL_TERMS); now the plan takes those from the shipped calibration, says so, and records it
    from commbench.planner.step.terms import CALIBRATED, FITTED_TERMS, KERNEL_TERMS

    out = tmp_path / "cal.json"
    assert _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo").exit_code == 0
    data = json.loads(out.read_text())   # one log moves one term: move a software and a kernel term by hand
    data["terms"].update(layer_overhead_s=0.004, gemm_efficiency_blackwell=0.6, gemm_efficiency_hopper=0.6)
    out.write_text(json.dumps(data))
    fitted = data["terms"]
    plan = ["plan", "--model", "deepseek-v3", "--gpus", "256", "--gbs", "4096", "--calibration", str(out)]
    for system, precision, layout in (("h100-hgx", "fp8", "tp=1,pp=8,vp=4,ep=32,mbs=1"),
                                      ("gb200-nvl72", "mxfp8", "tp=1,pp=4,vp=4,ep=64,mbs=1")):
        shown = _invoke(*plan, "--system", system, "--precision", precision, "--layout", layout)
        assert shown.exit_code == 0, shown.output
        gpu = system.split("-")[0]
        assert f"fitted on runs of gb300 only; for {gpu}: its kernel terms" in shown.output, shown.output
        assert "kernel terms were fitted on this plan's GPU" in " ".join(shown.output.split())   # the efficiency-terms line names them too
        as_json = _invoke(*plan, "--system", system, "--precision", precision, "--layout", layout, "--json")
        inputs = json.loads(as_json.stdout)["inputs"]
        assert inputs["calibration_other_gpu_terms"] == list(KERNEL_TERMS)
        used = inputs["calibration_terms"]
        assert all(used[t] == getattr(CALIBRATED, t) for t in KERNEL_TERMS)
        assert all(used[t] == fitted[t] for t in FITTED_TERMS if t not in KERNEL_TERMS)
        assert "only; for " in as_json.stderr   # the warning is on stderr
    searched = _invoke(*plan, "--system", "h100-hgx", "--precision", "fp8", "--top", "1", "--json")
    assert json.loads(searched.stdout)["inputs"]["calibration_other_gpu_terms"] == list(KERNEL_TERMS)
    own = _invoke(*plan, "--system", "gb300-nvl72", "--precision", "mxfp8", "--layout", "tp=1,pp=4,vp=4,ep=64,mbs=1",
                  "--json")
    assert own.exit_code == 0 and "fitted on runs of" not in own.stderr, own.output
    inputs = json.loads(own.stdout)["inputs"]
    assert inputs["calibration_other_gpu_terms"] == [] and inputs["calibration_terms"] == fitted


def test_verify_plan_does_not_call_the_shipped_kernel_terms_of_an_other_gpu_plan_a_changed_file(tmp_path):
    from commbench.workflows.verify import plan_context

    out = tmp_path / "cal.json"
    assert _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo").exit_code == 0
    planned = _invoke("plan", "--model", "deepseek-v3", "--gpus", "256", "--gbs", "4096", "--calibration", str(out),
                      "--system", "h100-hgx", "--precision", "fp8", "--layout", "tp=1,pp=8,vp=4,ep=32,mbs=1", "--json")
    doc = json.loads(planned.stdout)
    assert not [f for f in plan_context(doc).flags if "has changed" in f]
    data = json.loads(out.read_text())
    data["terms"]["layer_overhead_s"] *= 2   # a term the plan took from the file: that change is named
    out.write_text(json.dumps(data))
    assert [f for f in plan_context(doc).flags if "has changed" in f and "layer_overhead_s" in f]
    doc["inputs"]["calibration_other_gpu_terms"] = "gemm_efficiency_hopper"
    with pytest.raises(Exception, match="calibration_other_gpu_terms"):
        plan_context(doc)


def test_calibrate_evaluate_predicts_each_run_as_plan_would_with_the_file(tmp_path):
    # --evaluate with --calibration predicted every run with the whole file: a run of a GPU the file was not fitted on
    # got that file's kernel terms, which plan no longer gives it; both runs in one call, in their order
    out = tmp_path / "cal.json"
    assert _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo").exit_code == 0
    data = json.loads(out.read_text())
    data["terms"]["gemm_efficiency_blackwell"] = 0.6   # only a kernel term differs from the shipped calibration
    out.write_text(json.dumps(data))
    both = [str(MEGATRON), str(TITAN), "--model", "deepseek-v3", "--model", "qwen3-30b-a3b", "--system",
            "gb300-nvl72", "--system", "b200-hgx", "--gpus", "256", "--gpus", "8"]

    def rows(*extra):
        result = _invoke("calibrate", "--evaluate", *both, "--json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout), result.stderr

    shipped, _ = rows()
    scoped, stderr = rows("--calibration", str(out))
    assert [r["gpu"] for r in scoped["rows"]] == ["gb300-nvl72", "b200-hgx"]
    assert scoped["calibration_other_gpus"] == ["b200"] and "gb300 only; for b200: its kernel terms" in stderr
    gb300, b200 = scoped["rows"]
    assert b200["predicted_tokens_per_s_per_gpu"] == shipped["rows"][1]["predicted_tokens_per_s_per_gpu"]
    assert gb300["predicted_tokens_per_s_per_gpu"] != shipped["rows"][0]["predicted_tokens_per_s_per_gpu"]


def test_a_fit_on_runs_of_two_gpus_says_their_kernel_terms_are_one_set(tmp_path):
    # a file fitted on GB300 and B200 runs holds one GEMM/attention efficiency for both: said once, on stderr
    both = [str(MEGATRON), str(TITAN), "--model", "deepseek-v3", "--model", "qwen3-30b-a3b", "--system",
            "gb300-nvl72", "--system", "b200-hgx", "--gpus", "256", "--gpus", "8", "--no-loo"]
    two = _invoke("calibrate", *both, "-O", str(tmp_path / "two.json"), "--json")
    assert two.exit_code == 0, two.output
    assert "lists runs of 2 GPUs (gb300, b200): its kernel terms" in two.stderr
    json.loads(two.stdout)   # the note stays off the JSON
    one = _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(tmp_path / "one.json"), "--no-loo")
    assert one.exit_code == 0 and "kernel terms" not in one.stderr, one.output


def test_a_whole_last_line_without_a_line_break_is_counted():
    text = MEGATRON.read_text().rstrip("\n")
    whole = parse_megatron_log(text + "\n", source="x", model="deepseek-v3", gpu="gb300-nvl72")
    row = parse_megatron_log(text, source="x", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["tokens_per_s_per_gpu"] == whole["tokens_per_s_per_gpu"] and row["left_out"] == whole["left_out"]
    assert "cut off" not in row["left_out"]
    titan = TITAN.read_text().rstrip("\n")
    row = parse_torchtitan_log(titan, source="x", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_420.0) and not row["left_out"]


def test_megatron_iterations_going_back_without_an_arguments_block_are_two_runs():
    # a second run's lines appended with no arguments block: its warm-up iteration (15.9 s) was counted as steady
    text = MEGATRON.read_text()
    iterations = "".join(line for line in text.splitlines(keepends=True) if "elapsed time per iteration" in line)
    from commbench.errors import CommbenchError
    with pytest.raises(CommbenchError, match=r"iteration numbers go back \(iteration 5, then iteration 1\) with no "
                                             r"arguments block"):
        parse_megatron_log(text + iterations, source="m.log", model="deepseek-v3", gpu="gb300-nvl72")


def _titan_on(device: str) -> str:
    lines = TITAN.read_text().splitlines(keepends=True)
    said = (f"[rank0]:[titan] 2026-01-10 10:00:00,500 - root - INFO - CUDA capacity: {device} with 178.36GiB "
            "memory\n")
    return "".join(lines[:4]) + said + "".join(lines[4:])


def test_a_torchtitan_log_of_another_gpu_than_its_system_is_refused():
    # TorchTitan names the device it ran on; an H100 run said to be --system b200-hgx was predicted as a B200's
    from commbench.errors import CommbenchError
    row = parse_torchtitan_log(_titan_on("NVIDIA B200"), source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)
    with pytest.raises(CommbenchError, match=r"ran on 'NVIDIA H100 80GB HBM3' \(its 'CUDA capacity' line\), but "
                                             r"--system b200-hgx has b200 GPUs"):
        parse_torchtitan_log(_titan_on("NVIDIA H100 80GB HBM3"), source="t", model="qwen3-30b-a3b", gpu="b200-hgx",
                             num_gpus=8)
    # a device it cannot name (GH200) is not checked
    parse_torchtitan_log(_titan_on("NVIDIA GH200 480GB"), source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)


@pytest.mark.parametrize("count", ["0", "-8", "1000000000"])
def test_a_gpu_count_no_run_has_is_refused_naming_the_option(count):
    # --gpus 0 read as not given ("give it with --gpus"); -8 was named as a row's num_gpus, not the option
    result = _invoke("calibrate", "--evaluate", str(TITAN), "--model", "qwen3-30b-a3b", "--system", "b200-hgx",
                     "--gpus", count)
    _one_error_line(result, f"--gpus={count} is invalid", "a GPU count from 1 to")


def test_a_calibration_term_outside_the_fit_range_is_named(tmp_path):
    # gemm_efficiency_blackwell 0.557 -> 0.95 by hand: inside the hard range (0 to 1], so read as a fitted value
    out = tmp_path / "cal.json"
    assert _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo").exit_code == 0
    plan = ["plan", "--model", "deepseek-v3", "--gpus", "256", "--gbs", "4096", "--system", "gb300-nvl72",
            "--precision", "mxfp8", "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1", "--calibration", str(out)]
    assert "outside the range a fit reaches" not in _invoke(*plan).output
    doc = json.loads(out.read_text())
    doc["terms"]["gemm_efficiency_blackwell"] = 0.95
    out.write_text(json.dumps(doc))
    result = _invoke(*plan)
    assert result.exit_code == 0, result.output
    assert "gemm_efficiency_blackwell=0.95 (0.45 to 0.8) outside the range a fit reaches" in result.output
    evaluate = _invoke("calibrate", "--evaluate", str(MEGATRON), *LOG_ARGS, "--calibration", str(out))
    assert "gemm_efficiency_blackwell=0.95" in evaluate.output


def _megatron_with(**args) -> str:
    text = MEGATRON.read_text()
    extra = "".join(f"  {k} {'.' * (40 - len(k))} {v}\n" for k, v in args.items())
    return text.replace("-------------------- end of arguments", extra + "-------------------- end of arguments", 1)


def test_a_megatron_fsdp_log_is_modelled_as_fsdp():
    # use_megatron_fsdp was not read: the run was modelled as distributed-optimizer DP
    from commbench.planner.calibrate.published import published_runs
    assert "end of arguments" in MEGATRON.read_text()
    row = parse_megatron_log(_megatron_with(use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params"),
                             source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert "FSDP=128" in row["notes"]   # 256 GPUs / (tp1 pp2 cp1): every DP rank shards
    # the step model prices FSDP without PP only: this pp=2 run is listed as not modelled, by the fsdp rule
    assert "breaks the fsdp rule" in published_runs((row,))[0].skip_reason
    hsdp = parse_megatron_log(_megatron_with(use_megatron_fsdp=True, num_distributed_optimizer_instances=2,
                                             data_parallel_sharding_strategy="optim_grads_params"),
                              source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert "FSDP=64" in hsdp["notes"]
    plain = parse_megatron_log(MEGATRON.read_text(), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert "FSDP" not in plain["notes"] and not published_runs((plain,))[0].layout.fsdp


def test_a_torch_fsdp2_megatron_log_is_refused():
    from commbench.errors import CommbenchError
    with pytest.raises(CommbenchError, match=r"ran with use_torch_fsdp2=True: .* give the run as a JSON row"):
        parse_megatron_log(_megatron_with(use_torch_fsdp2=True), source="m", model="deepseek-v3", gpu="gb300-nvl72")


def test_a_megatron_log_without_mtp_is_modelled_without_it():
    # mtp_num_layers None (Megatron's default: no MTP) was predicted with DeepSeek-V3's MTP layer: more compute
    from commbench.errors import CommbenchError
    from commbench.planner.calibrate.published import published_runs
    with_mtp = parse_megatron_log(_megatron_with(mtp_num_layers=1), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    without = parse_megatron_log(_megatron_with(mtp_num_layers=None), source="m", model="deepseek-v3",
                                 gpu="gb300-nvl72")
    assert "w/o MTP" in without["notes"] and "w/o MTP" not in with_mtp["notes"]
    assert published_runs((without,))[0].model.num_mtp_layers == 0
    assert published_runs((with_mtp,))[0].model.num_mtp_layers == 1
    with pytest.raises(CommbenchError, match=r"ran with mtp_num_layers=3, but --model deepseek-v3 has 1"):
        parse_megatron_log(_megatron_with(mtp_num_layers=3), source="m", model="deepseek-v3", gpu="gb300-nvl72")


def test_a_megatron_log_of_another_dense_ffn_is_refused():
    # the model check compared layers, width, heads and experts: a cut-down dense FFN passed as the zoo model
    from commbench.errors import CommbenchError
    parse_megatron_log(_megatron_with(ffn_hidden_size=18432), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    with pytest.raises(CommbenchError, match=r"ran with ffn_hidden_size=4096, but --model deepseek-v3 has 18432"):
        parse_megatron_log(_megatron_with(ffn_hidden_size=4096), source="m", model="deepseek-v3", gpu="gb300-nvl72")


@pytest.mark.parametrize("section", ["'compile': {'enable': True}", "'quantize': {'grouped_mm': {'mx': {}}}"])
def test_a_torchtitan_log_whose_second_config_compiles_or_quantizes_otherwise_is_two_runs(section):
    # a restart with torch.compile (or another quantization) turned on mixed both runs' steps into one median
    from commbench.errors import CommbenchError
    text = TITAN.read_text()
    body = "".join(line for line in text.splitlines(keepends=True) if "Running with args" in line or "tps:" in line)
    changed = body.replace("'activation_checkpoint'", section + ", 'activation_checkpoint'")
    assert changed != body
    parse_torchtitan_log(text + body, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    with pytest.raises(CommbenchError, match=r"holds 2 runs: config 2 has (compile|quantize)="):
        parse_torchtitan_log(text + changed, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)


def test_megatron_iterations_of_a_batch_size_ramp_up_are_left_out_and_named():
    # --rampup-batch-size: early iterations run a smaller global batch in less time; every line was read as a
    # global_batch_size iteration, the throughput overstated
    text = MEGATRON.read_text()
    line3 = next(line for line in text.splitlines() if "(ms): 10398.7" in line)
    ramped = line3.replace("(ms): 10398.7", "(ms): 2600.0").replace("global batch size:  4096", "global batch size:  1024")
    row = parse_megatron_log(text.replace(line3, ramped), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["tokens_per_s_per_gpu"] == pytest.approx(4096 * 4096 / (10.4072 * 256))   # median of 4, 5
    assert "1 iteration line(s) of a batch-size ramp-up (a global batch size other than global_batch_size=4096) left out" in row["left_out"]


@pytest.mark.parametrize("edit,precision", [(dict(fp16=True, bf16=False), "FP16"), (dict(bf16=False), "FP32")])
def test_a_megatron_log_in_fp16_or_fp32_is_listed_not_read_as_bf16(edit, precision):
    # megatron_precision read any run without fp8/fp4 as BF16: an FP16 run was predicted as a BF16 one
    from commbench.planner.calibrate.published import published_runs
    text = MEGATRON.read_text().replace("  fp8 ............................................. e4m3\n", "")
    text = text.replace("  bf16 ............................................ True\n", "")
    row = parse_megatron_log(_with_args(text, **edit), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["precision"] == precision
    run = published_runs((row,))[0]
    assert run.layout is None and f"'precision' = '{precision}'" in run.skip_reason
    bf16 = parse_megatron_log(_with_args(text, bf16=True), source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert bf16["precision"] == "BF16"


def _with_args(text: str, **args) -> str:
    extra = "".join(f"  {k} {'.' * (40 - len(k))} {v}\n" for k, v in args.items())
    return text.replace("-------------------- end of arguments", extra + "-------------------- end of arguments", 1)


def test_a_torchtitan_log_without_bf16_mixed_precision_is_not_read_as_bf16():
    # training.mixed_precision_param float32 (no mixed precision) was read as BF16
    text = TITAN.read_text().replace("'converters': ['mx']", "'converters': []")
    fp32 = text.replace("'seq_len': 4096,", "'seq_len': 4096, 'mixed_precision_param': 'float32',")
    assert fp32 != text
    row = parse_torchtitan_log(fp32, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["precision"] == "FP32"
    bf16 = text.replace("'seq_len': 4096,", "'seq_len': 4096, 'mixed_precision_param': 'bfloat16',")
    assert parse_torchtitan_log(bf16, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)[
        "precision"] == "BF16"
    assert parse_torchtitan_log(text, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)[
        "precision"] == "BF16"


@pytest.mark.parametrize("written_by,needle", [(None, "records no commbench version"),
                                               ("0.0.9", "written by commbench 0.0.9")])
def test_a_calibration_file_of_another_commbench_is_named(tmp_path, written_by, needle):
    # its terms were fitted to another release's step model, and were read as this one's without a word
    out = tmp_path / "cal.json"
    assert _invoke("calibrate", str(MEGATRON), *LOG_ARGS, "-O", str(out), "--no-loo").exit_code == 0
    evaluate = ["calibrate", "--evaluate", str(MEGATRON), *LOG_ARGS, "--calibration", str(out)]
    assert "commbench version" not in _invoke(*evaluate).output and "written by" not in _invoke(*evaluate).output
    doc = json.loads(out.read_text())
    doc.pop("commbench_version")
    doc.pop("step_model")   # a file of an older commbench records no step model either
    if written_by:
        doc["commbench_version"] = written_by
    out.write_text(json.dumps(doc))
    result = _invoke(*evaluate)
    assert result.exit_code == 0 and needle in result.output, result.output


def test_a_throughput_far_below_any_published_run_is_named(tmp_path):
    # 6.3 (thousands of tokens/s/GPU) was fitted as a run at 0.1% of the GPU's peak; published runs reach >= 4%
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([ROW]))
    assert "of the GPU's" not in _invoke("calibrate", "--evaluate", str(runs)).output
    runs.write_text(json.dumps([dict(ROW, tokens_per_s_per_gpu=6.3)]))
    result = _invoke("calibrate", "--evaluate", str(runs))
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if "peak" in line]
    assert len(warning) == 1 and "tokens_per_s_per_gpu=6.3 means 2 model TFLOP/s per GPU" in warning[0], warning
    assert "0.0% of the GPU's" in warning[0] and "row 1" in warning[0]


def test_published_rows_under_the_shipped_start_are_labelled_in_sample(tmp_path):
    # probe BL 5: the shipped calibration is fitted on calibration-runs.json, yet its rows given as RUNS printed a
    # 'before' and a 'leave-one-out' error as if held out (a --calibration FILE's own runs are refused: they would count
    # twice). Text and JSON now say how many are in the start's fit, and --evaluate marks them in_sample
    import json as _json
    from importlib import resources

    from typer.testing import CliRunner

    from commbench.cli.app import app
    shipped = _json.loads(resources.files("commbench.data").joinpath("calibration-runs.json").read_text())
    runs = tmp_path / "runs.json"
    runs.write_text(_json.dumps([shipped[i] for i in (14, 16, 17, 39, 42)]))
    fit = CliRunner().invoke(app, ["calibrate", str(runs), "-O", str(tmp_path / "c.json"), "--no-loo"],
                             env={"COLUMNS": "300"})
    assert fit.exit_code == 0, fit.output
    said = " ".join(fit.output.split())
    assert "note: 5 of these 5 run(s) are rows of commbench/data/calibration-runs.json, which the shipped start terms " \
           "were fitted on" in said and "before (in-sample for 5)" in said, said
    doc = _json.loads(CliRunner().invoke(app, ["calibrate", str(runs), "-O", str(tmp_path / "d.json"), "--no-loo",
                                               "--json"]).stdout)
    assert doc["num_in_start"] == 5
    ev = _json.loads(CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs), "--json"]).stdout)
    assert ev["num_in_sample"] == 5 and all(r["in_sample"] for r in ev["rows"])
    # a user's row (another measured figure) is no row of the shipped fit
    mine = tmp_path / "mine.json"
    mine.write_text(_json.dumps([dict(shipped[14], tokens_per_s_per_gpu=20000, source="mine"), shipped[39]]))
    doc = _json.loads(CliRunner().invoke(app, ["calibrate", str(mine), "-O", str(tmp_path / "e.json"), "--no-loo",
                                               "--json"]).stdout)
    assert doc["num_in_start"] == 1


def test_a_row_repeated_with_other_notes_only_is_the_same_run(tmp_path):
    # probe BL 6: a copy of a row whose notes say "copy" was accepted and counted twice (median over 6 runs of 5
    # distinct rows); notes calibrate does not read are information, so it is refused as an exact copy is. Notes it
    # does read (FSDP=N, GA=N, w/o MTP) still make another run
    import json as _json
    from importlib import resources

    from typer.testing import CliRunner

    from commbench.cli.app import app
    shipped = _json.loads(resources.files("commbench.data").joinpath("calibration-runs.json").read_text())
    rows = [shipped[i] for i in (14, 16, 17, 39, 42)]
    path = tmp_path / "dup.json"
    path.write_text(_json.dumps([*rows, dict(rows[0], notes="copy")]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"{path} row 6 is {path} row 1 again" in " ".join(result.output.split()), result.output
    from commbench.cli.calibrate import _check_not_repeated
    seen: dict = {}
    _check_not_repeated(dict(rows[0], notes="GA=4"), "row 1", seen)
    _check_not_repeated(dict(rows[0], notes="GA=8"), "row 2", seen)   # read: another run
