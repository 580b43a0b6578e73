"""`commbench calibrate` on a run whose layout breaks a layout rule: one line naming the file and row, the rule in
words (layout.spec.RULES) and the row's fields and values that break it, not the rule's code name alone."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.published import broken_rule_text, published_runs
from commbench.planner.layout.spec import RULES, Layout, rule_detail
from commbench.planner.models.zoo import load_model

ROW = {"model": "qwen3-30b-a3b", "gpu": "B200", "num_gpus": 8, "precision": "MXFP8", "seq_len": 4096,
       "gbs": 512, "mbs": 4, "tp": 1, "pp": 1, "ep": 8, "tokens_per_s_per_gpu": 26695}


@pytest.mark.parametrize("change, needles", [
    (dict(num_gpus=50, tp=2, pp=4), ("num_gpus must be a multiple of tp*pp*cp", "num_gpus = 50",
                                     "tp*pp*cp = 8 (2*4*1)")),
    (dict(ep=16), ("etp*ep must divide tp*cp*dp", "etp*ep = 16 (1*16) does not divide tp*cp*dp = 8 (1*1*8)",
                   "dp = num_gpus/(tp*pp*cp) = 8/1 = 8", "not in the row", "etp = 1")),
    (dict(gbs=500), ("gbs must be a multiple of mbs*dp", "gbs = 500 is not a multiple of mbs*dp = 32 (4*8)")),
    (dict(cp=2, ep=4, seq_len=4098), ("seq_len must be divisible by 2*cp when cp>1",
                                      "seq_len = 4098 is not divisible by 2*cp = 4")),
    (dict(tp=2, ep=4, seq_len=4097), ("each CP rank's seq_len/cp tokens must split over tp",
                                      "seq_len = 4097 is not divisible by 2 (tp = 2, cp = 1")),
    (dict(pp=2, vp=2, ep=4, gbs=48), ("with vp>1 a multiple of pp and at least pp", "microbatch_group_size_per_vp_stage",
                                      "3 micro-batches (gbs/(mbs*dp) = 48/(4*4)) with pp = 2, vp = 2")),
    (dict(ep=3, num_gpus=6, gbs=480), ("ep must divide the routed experts", "ep = 3 does not divide routed experts = 128")),
    (dict(tp=8, ep=1), ("tp must divide the attention heads", "tp = 8, heads = 32, kv_heads = 4")),
    (dict(vp=2), ("vp>1 needs pp>1", "pp = 1 x vp = 2 (vp > 1 with pp = 1)")),
    (dict(recipe={"recompute_layers": 2, "recompute": "selective"}),
     ("needs recompute=full", "recompute_layers = 2, recompute = selective")),
    (dict(recipe={"cpu_offload_layers": 4, "recompute": "full"}),
     ("cpu_offload_layers needs pp=1, recompute=none", "cpu_offload_layers = 4", "recompute = full")),
])
def test_a_run_breaking_a_layout_rule_is_one_line_with_the_rule_in_words(tmp_path, change, needles):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([dict(ROW, **change)]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs)], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert f"{runs} row 1 (qwen3-30b-a3b" in result.output, result.output
    assert "breaks rule" not in result.output   # the old cryptic form: "published layout breaks rule world"
    for needle in needles:
        assert needle in result.output, (needle, result.output)


def test_an_odd_sequence_without_context_or_sequence_parallelism_breaks_no_rule(tmp_path):
    """Megatron-LM checks seq_len against 2*cp only with context parallelism on (arguments.py), and an odd length
    splits over no TP rank at tp=1: such a run is modelled, not refused."""
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([dict(ROW, seq_len=4097)]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs)], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and "not modelled" not in result.output, result.output


def test_a_run_breaking_a_rule_beside_good_ones_is_listed_with_its_file_and_row(tmp_path):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([ROW, dict(ROW, gbs=500)]))
    text = CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs)], env={"COLUMNS": "80"})
    assert text.exit_code == 0, text.output
    (line,) = [s for s in text.output.splitlines() if s.startswith("not modelled")]   # one line, not wrapped
    assert f"{runs} row 2: qwen3-30b-a3b" in line and "gbs = 500 is not a multiple of mbs*dp = 32" in line
    doc = json.loads(CliRunner().invoke(app, ["calibrate", "--evaluate", str(runs), "--json"]).output)
    (skipped,) = doc["skipped"]
    assert skipped["where"] == f"{runs} row 2" and skipped["run_index"] == 2
    assert skipped["reason"].startswith("its layout breaks the batch rule: gbs must be a multiple of mbs*dp")


def test_every_layout_rule_has_worded_values():
    """rule_detail words every rule check_layout and calibrate can raise (a new rule without one is a KeyError)."""
    model = load_model("qwen3-30b-a3b")
    layout = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1, gbs=8)
    for name, words in RULES:
        assert words and rule_detail(name, model, layout, 8, 4096), name


def test_a_valid_row_breaks_no_rule_and_the_shipped_rows_name_their_place():
    model = load_model("qwen3-30b-a3b")
    layout = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=4, gbs=512)
    assert broken_rule_text(model, layout, ROW) == ""
    runs = published_runs((ROW, dict(ROW, gbs=500)))
    assert [r.where for r in runs] == ["row 1", "row 2"] and runs[1].layout is None
    assert "gbs = 500" in runs[1].skip_reason


def test_the_offload_rule_names_the_megatron_cores_it_holds_for():
    # it quoted "CUDA graphs not supported with CPU offloading" as a rule of every release, while megatron-core
    # 0.18.0 on (Megatron-Bridge 26.06, 26.08) allows offload under the full-iteration graph (probe P10)
    from commbench.planner.layout.spec import RULES

    offload = dict(RULES)["offload"]
    assert "0.16.1 to 0.17.1" in offload and "0.18.0 on" in offload and "full-iteration graph" in offload


def test_the_fused_moe_refusal_does_not_name_one_release_for_all():
    # it said "Megatron-Bridge 26.06's recipes run a newer Megatron-Core" whatever release was asked (26.08 too: P10)
    from commbench.planner.search.frameworks import MEGATRON_NO_FUSED_MLP

    assert "from 26.06 on" in MEGATRON_NO_FUSED_MLP and "26.08: 0.19.0" in MEGATRON_NO_FUSED_MLP
