"""The pipeline layer-split chooser: hand cases (61, 94, 126 layers; PP 2/4/8/16; VP up to 16; MTP),
refusals, the layout string syntax, and (where megatron-core is installed) Megatron's own split."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from commbench.errors import CommbenchError
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.layout.split import (best_split, buildable, choose_split, parse_layout_text, split_from_layout,
                                     split_options, stage_imbalance, stage_weights)

DSV3 = load_model("deepseek-v3")            # 61 layers + 1 MTP
QWEN235 = load_model("qwen3-235b-a22b")     # 94 layers
LLAMA405 = load_model("llama3.1-405b")      # 126 layers
SWEEP = [(m, pp, vp) for m in (DSV3, dataclasses.replace(DSV3, num_mtp_layers=0), QWEN235, LLAMA405)
         for pp in (2, 4, 8, 16) for vp in range(1, 17)]


def test_126_layers_pp8_vp8_count_embedding_and_loss_as_layers():
    split = choose_split(LLAMA405, 8, 8)    # (126 + 2) / 64 = 2 per virtual stage
    assert split.megatron_args() == ["--num-virtual-stages-per-pipeline-rank", "8",
                                     "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    assert split.stages[0] == "Et" and split.stages[-1] == "tL" and set(split.stages[1:-1]) == {"tt"}


def test_126_layers_pp2_split_evenly_without_flags():
    split = choose_split(LLAMA405, 2, 1)    # 63 + 63; the output layer (0.63 layers of FLOPs) stays last
    assert split.method == "even" and split.megatron_args() == [] and split.decoder_layers() == [63, 63]


def test_61_layers_and_mtp_pp2_vp8_need_a_pipeline_layout():
    # Neither 61, 62 nor 63 divides over 16 stages: only an explicit layout builds (the published recipe's way).
    assert all(o.method in ("layout", "uneven") for o in split_options(DSV3, 2, 8))
    split = choose_split(DSV3, 2, 8)
    args = split.megatron_args()
    assert args[0] == "--pipeline-model-parallel-layout" and len(args) == 2
    stages = parse_layout_text(args[1])
    assert len(stages) == 16 and "".join(stages).count("t") == 61 and "".join(stages).count("m") == 1
    assert stages[0].startswith("E") and stages[-1].endswith("L")
    costs = split.rank_costs(stage_weights(DSV3))
    assert max(costs) - min(costs) <= max(stage_weights(DSV3).mtp, stage_weights(DSV3).loss)


def test_94_layers_pp4_vp12_offer_the_account_flags_and_pick_the_lighter_busiest_rank():
    options = split_options(QWEN235, 4, 12)
    account = [o for o in options if o.method == "account"]
    assert account and account[0].account_for_embedding and account[0].account_for_loss   # (94 + 2) / 48 = 2
    w = stage_weights(QWEN235)
    best = choose_split(QWEN235, 4, 12)
    assert max(best.rank_costs(w)) <= min(max(o.rank_costs(w)) for o in options)
    # The output layer is ~2.4 layers of FLOPs: the chosen split gives the last rank one decoder layer fewer.
    assert best.rank_stages(3)[-1] == "L"


def test_61_layers_pp16_mtp_sits_with_or_just_before_the_loss():
    split = choose_split(DSV3, 16, 2)
    mtp_stage = next(i for i, s in enumerate(split.stages) if "m" in s)
    assert mtp_stage // 16 == 1 and "t" not in "".join(split.stages[mtp_stage:])[1:]


@pytest.mark.parametrize("model,pp,vp", SWEEP[::7], ids=lambda x: getattr(x, "name", str(x)))
def test_every_chosen_split_holds_each_layer_once_in_megatron_order(model, pp, vp):
    split = best_split(model, pp, vp)
    slots = model.num_layers + model.num_mtp_layers + 2
    if split is None:
        assert pp * vp > slots - 1 - (model.num_mtp_layers > 0) or pp * vp > slots
        return
    flat = "".join(split.stages)
    assert all(split.stages) and flat.count("t") == model.num_layers and flat.count("m") == model.num_mtp_layers
    assert flat[0] == "E" and flat[-1] == "L" and ("m" not in flat or "t" not in flat[flat.index("m"):])
    assert parse_layout_text(split.layout) == split.stages
    if split.method == "even":
        assert model.num_layers % (pp * vp) == 0
    if split.method == "account":
        assert (model.num_layers + split.account_for_embedding + split.account_for_loss) % (pp * vp) == 0
    if split.method == "uneven":
        for n in (split.first_stage_layers, split.last_stage_layers):
            assert n is None or n % vp == 0


def test_no_buildable_split_is_refused_in_one_line_naming_layers_and_pp():
    llama8 = load_model("llama3-8b")  # 32 layers: 64 stages cannot each hold something
    with pytest.raises(CommbenchError) as err:
        choose_split(llama8, 16, 4)
    text = str(err.value)
    assert "\n" not in text and "32 layers" in text and "pp=16" in text
    assert not buildable(llama8, np.array([16]), np.array([4]))[0]
    with pytest.raises(CommbenchError, match="32 layers.*pp = 16"):
        check_layout(llama8, Layout(tp=1, pp=16, vp=4, dp=1, gbs=16), 16)
    with pytest.raises(CommbenchError, match="vp>1 needs pp>1"):
        choose_split(llama8, 1, 2)


def test_step_model_charges_the_busiest_rank():
    imb = stage_imbalance(LLAMA405, np.array([1, 8, 2]), np.array([1, 8, 1]))
    w = stage_weights(LLAMA405)
    costs = choose_split(LLAMA405, 8, 8).rank_costs(w)
    assert imb[0] == 1.0 and imb[1] == pytest.approx(max(costs) * 8 / sum(costs))
    assert imb[2] == pytest.approx((63 + w.loss) * 2 / (126 + w.loss))


def test_user_layouts_are_checked_like_megatron_checks_them():
    assert split_from_layout(DSV3, 16, "Et*3|(tt|)*29,m|L").vp == 2   # Megatron's documented DeepSeek-V3 example
    assert split_from_layout(DSV3, 8, "Et|(tt|)*30mL").vp == 4         # Megatron-Bridge's DeepSeek-V3 recipe layout
    for bad, pp, why in (("Et*3|(tt|)*29,m|", 16, "loss L must come last"),
                         ("Et*2|(tt|)*29,m|L", 16, "60 decoder"),
                         ("Et*3|(tt|)*29,m|L", 7, "32 stages are not a multiple of pp"),
                         ("Et*3m|(tt|)*29,|L", 16, "decoder layers must come before the MTP"),
                         ("Et*3|(tt|)*29,x|L", 16, "unknown layer character 'x'")):
        with pytest.raises(CommbenchError, match=why):
            split_from_layout(DSV3, pp, bad)


def test_megatron_builds_every_chosen_split():
    """megatron-core's own TransformerConfig validation and layer split on the sweep (skips without it)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (requirements-frameworks.txt)")
    import torch
    from megatron.core import parallel_state
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig
    checked = 0
    try:
        for model, pp, vp in SWEEP:
            split = best_split(model, pp, vp)
            if split is None:
                continue
            kw = dict(num_layers=model.num_layers, hidden_size=64, num_attention_heads=4, pipeline_model_parallel_size=pp,
                      pipeline_dtype=torch.bfloat16,
                      virtual_pipeline_model_parallel_size=vp if vp > 1 else None,
                      mtp_num_layers=model.num_mtp_layers or None,
                      account_for_embedding_in_pipeline_split=split.account_for_embedding,
                      account_for_loss_in_pipeline_split=split.account_for_loss,
                      num_layers_in_first_pipeline_stage=split.first_stage_layers,
                      num_layers_in_last_pipeline_stage=split.last_stage_layers,
                      pipeline_model_parallel_layout=split.layout if split.method == "layout" else None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = TransformerConfig(**kw)
            parallel_state.set_virtual_pipeline_model_parallel_world_size(vp if vp > 1 else None)
            built = []
            for v in range(vp):
                for r in range(pp):
                    parallel_state.set_pipeline_model_parallel_rank(r)
                    built.append(get_num_layers_to_build(config, vp_stage=v if vp > 1 else None, pp_rank=r))
            assert built == split.decoder_layers(), (model.name, pp, vp, split.method)
            checked += 1
    finally:
        parallel_state.set_pipeline_model_parallel_rank(None)
        parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
    assert checked > 150


def test_plan_with_a_pinned_unbuildable_split_names_layers_and_pp_through_the_cli():
    from typer.testing import CliRunner

    from commbench.cli.app import app

    result = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "16",
                                      "--layout", "tp=1,pp=16,vp=4,mbs=1,gbs=64"], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "32 layers" in lines[0] and "pp=16 x vp=4" in lines[0], result.output


def test_the_loss_stage_weighs_the_padded_vocabulary_the_step_model_charges(monkeypatch):
    """The split weighed the output layer at the model's 129,280 rows while the step model charged Megatron's
    padded 133,120 (DeepSeek-V3 at TP 8: divisor 1280 x 8, models/counts.step_vocab): the split chosen and the
    busiest rank charged were another vocabulary's. Now both weigh the rows charged."""
    from commbench.planner.emit.plan import megatron_section
    from commbench.planner.layout.split import split_vocab
    from commbench.planner.models.counts import step_vocab

    # a vocabulary TP8 cannot divide, so Megatron-LM must pad it (DeepSeek-V3's own is kept: divisor 160 at TP8)
    DSV3 = dataclasses.replace(load_model("deepseek-v3"), vocab=129_283)

    vocab = split_vocab(DSV3, 8)
    assert vocab == step_vocab(DSV3, 8, "megatron") == 133_120 and split_vocab(DSV3, 8, "torchtitan") == 129_283
    assert stage_weights(DSV3, vocab).loss == pytest.approx(stage_weights(DSV3).loss * 133_120 / 129_283)
    padded, unpadded = choose_split(DSV3, 8, 1, vocab), choose_split(DSV3, 8, 1)
    assert padded.stages != unpadded.stages   # the heavier loss stage moves a layer off the last rank
    section = megatron_section(Layout(tp=8, pp=8, ep=8, etp=1, dp=8, mbs=1, gbs=4096), DSV3, gpu_name="h100",
                               fabric_name="h100-hgx")
    assert section["layer_split"]["layout"] == padded.layout != unpadded.layout
    # the step model charges the busiest rank of that split, at those rows
    from commbench.planner.step import evaluate
    seen = []

    def recorded(model, pp, vp, vocab=None):
        seen.append(None if vocab is None else np.asarray(vocab).ravel().tolist())
        return stage_imbalance(model, pp, vp, vocab)

    monkeypatch.setattr(evaluate, "stage_imbalance", recorded)
    from commbench.planner.search.space import SearchRequest, best_for_pins
    from commbench.costmodel import load_preset
    req = SearchRequest(model=DSV3, fabric=load_preset("h100-hgx", num_gpus=512), num_gpus=512, gbs=4096,
                        precision="fp8", pins={"tp": 8, "pp": 8, "vp": 1, "ep": 8, "etp": 1, "cp": 1, "mbs": 1})
    best_for_pins(req)
    assert seen and all(v is not None and set(v) == {133_120.0} for v in seen), seen
