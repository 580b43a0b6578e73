"""Megatron-LM log features the step model prices only in some settings: a setting it does not price is refused
in one line naming the argument and value, never priced as another (the Megatron-FSDP sharding strategy,
--recompute-modules, the MoE token dispatcher, the pipeline split)."""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs import parse_megatron_log

MEGATRON = Path(__file__).parent / "data" / "megatron_deepseek_v3_gb300.log"


def _with(**args) -> str:
    """The fixture with `args` set (a later line of the arguments block overrides an earlier one)."""
    extra = "".join(f"  {k} {'.' * (40 - len(k))} {v}\n" for k, v in args.items())
    return MEGATRON.read_text().replace("-------------------- end of arguments", extra +
                                        "-------------------- end of arguments", 1)


def _row(text: str) -> dict:
    return parse_megatron_log(text, source="m", model="deepseek-v3", gpu="gb300-nvl72")


@pytest.mark.parametrize("strategy", ["no_shard", "optim", "optim_grads"])
def test_a_megatron_fsdp_strategy_other_than_zero3_is_refused(strategy):
    with pytest.raises(CommbenchError, match=f"data_parallel_sharding_strategy='{strategy}', which the step model "
                                             "does not price; allowed: optim_grads_params"):
        _row(_with(use_megatron_fsdp=True, data_parallel_sharding_strategy=strategy))
    with pytest.raises(CommbenchError, match="no data_parallel_sharding_strategy .*default is no_shard"):
        _row(_with(use_megatron_fsdp=True))
    assert "FSDP=128" in _row(_with(use_megatron_fsdp=True,
                                    data_parallel_sharding_strategy="optim_grads_params"))["notes"]


@pytest.mark.parametrize("modules", ["['moe']", "['layernorm']", "['core_attn', 'shared_experts']",
                                     "['mla_up_proj', 'moe_act']"])
def test_recompute_modules_the_step_model_does_not_price_are_refused(modules):
    with pytest.raises(CommbenchError, match=r"recompute_modules=\[.*\], which the step model does not price"):
        _row(_with(recompute_granularity="selective", recompute_modules=modules))


# a module set the recipes run (layout/spec.py RECIPE_MODULE_SETS: megatron-core's default core_attn alone, DeepSeek-V3's
# mlp, mla_up_proj + mlp) is priced as it ran, per module; a superset of core_attn as the step model's selective
@pytest.mark.parametrize("modules, mode", [("['core_attn']", "core_attn"), ("None", "core_attn"),
                                           ("['core_attn', 'layernorm', 'moe_act', 'mla_up_proj']", "selective"),
                                           ("['mla_up_proj']", "mla_up_proj"), ("['moe_act']", "moe_act"),
                                           ("['mlp']", "mlp"), ("['mlp', 'mla_up_proj']", "mla_up_proj+mlp")])
def test_recompute_modules_the_step_model_prices_are_read(modules, mode):
    row = _row(_with(recompute_granularity="selective", recompute_modules=modules))
    assert row["recipe"]["recompute"] == mode


def test_the_allgather_dispatcher_is_refused_and_alltoall_read():
    with pytest.raises(CommbenchError, match="moe_token_dispatcher_type='allgather', which the step model does not "
                                             "price; allowed: alltoall, flex"):
        _row(_with(moe_token_dispatcher_type="allgather", overlap_moe_expert_parallel_comm=False))
    row = _row(_with(moe_token_dispatcher_type="alltoall", overlap_moe_expert_parallel_comm=False))
    assert row["recipe"]["dispatcher"] == "alltoall"


PRICED_DSV3 = "Et*4|(t*4|)*14tmL"   # best_split of DeepSeek-V3 (61 layers + 1 MTP) over pp=2 x vp=8


def test_a_pipeline_split_other_than_the_step_model_s_best_is_priced_as_it_ran():
    # the log's layout string was not read: every split was priced as the step model's own, without a word
    row = _row(_with(pipeline_model_parallel_layout=PRICED_DSV3))
    assert "pipeline split" not in row["notes"] and row["pipeline_layout"] == PRICED_DSV3
    row = _row(_with(pipeline_model_parallel_layout="Et|(t*4|)*14t*4mL"))
    assert row["pipeline_layout"] == "Et|(t*4|)*14t*4mL"
    assert re.search(r"pipeline split priced as it ran: pipeline_model_parallel_layout='Et\|\(t\*4\|\)\*14t\*4mL', .*"
                     r"busiest rank 1\.107x.*best for pp=2 vp=8", row["notes"]), row["notes"]
    with pytest.raises(CommbenchError, match="has 4 virtual stages per rank, but it ran with "
                                             "virtual_pipeline_model_parallel_size=8"):
        _row(_with(pipeline_model_parallel_layout="Et*4|(t*8|)*6t*9mL"))
    # a block that lacks the split arguments (this excerpt: 61 layers, no layout) says what is priced
    row = _row(MEGATRON.read_text())
    assert f"priced as the step model's best split '{PRICED_DSV3}'" in row["notes"] and "pipeline_layout" not in row


@pytest.mark.parametrize("args, layout", [({}, "Et*24|t*24L"), ({"decoder_first_pipeline_num_layers": 12},
                                                                  "Et*12|t*36L"),
                                          ({"pipeline_model_parallel_layout": "Et*26|t*22L"}, "Et*26|t*22L")])
def test_an_even_or_first_stage_split_is_priced_as_it_ran(args, layout):
    """24/24 (Megatron-LM's default even split: the loss on the last rank) and 12/36 run slower than the step model's
    best 26/22: the row carries the split it ran (pipeline_layout), which the step model prices (it was priced as
    26/22 and said only in a note: a fit moved the terms to make up the difference)."""
    from commbench.planner.calibrate.runlogs.megatron_split import SPLIT_ARGS, check_logged_split
    stated = {**{k: None for k in SPLIT_ARGS}, **args}
    ran, note = check_logged_split("L", stated, "qwen3-30b-a3b", pp=2, vp=1, tp=1, without_mtp=False)
    assert ran == layout and (note == "") == (layout == "Et*26|t*22L")


def test_a_stated_split_megatron_does_not_build_is_refused():
    from commbench.planner.calibrate.runlogs.megatron_split import SPLIT_ARGS, check_logged_split
    stated = {**{k: None for k in SPLIT_ARGS}, "decoder_first_pipeline_num_layers": 7}
    with pytest.raises(CommbenchError, match="decoder_first_pipeline_num_layers=7 does not split 48 layers over pp=4 "
                                             "x vp=1, a split Megatron-LM does not build"):
        check_logged_split("L", stated, "qwen3-30b-a3b", pp=4, vp=1, tp=1, without_mtp=False)


@pytest.mark.parametrize("args, named", [
    ({"kv_lora_rank": 128}, "kv_lora_rank=128"), ({"vocab_size": 32000}, "vocab_size=32000"),
    ({"padded_vocab_size": 262144}, "padded_vocab_size=262144"), ({"moe_layer_freq": 2}, "moe_layer_freq"),
    ({"moe_layer_freq": "'[1]*61'"}, r"moe_layer_freq='\[1\]\*61'"), ({"moe_shared_expert_intermediate_size": "None"},
                                                       "moe_shared_expert_intermediate_size=None"),
    ({"multi_latent_attention": False}, "multi_latent_attention=False")])
def test_every_printed_architecture_argument_is_checked_against_the_model(args, named):
    with pytest.raises(CommbenchError, match=f"ran with {named}.*the log is of another model"):
        _row(_with(**args))


def test_the_model_s_own_architecture_arguments_pass():
    # DeepSeek-V3 as emit/megatron.py writes it; a tokenizer's slightly other vocabulary is the same model
    row = _row(_with(multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128,
                     qk_pos_emb_head_dim=64, v_head_dim=128, vocab_size=129280, moe_layer_freq="'[0]*3+[1]*58'",
                     moe_shared_expert_intermediate_size=2048, padded_vocab_size=129536))
    assert row["tokens_per_s_per_gpu"] > 0


def test_a_gqa_model_s_query_groups_and_kv_channels_are_checked():
    from commbench.planner.calibrate.runlogs.megatron_arch import architecture_mismatch
    from commbench.planner.models.zoo import load_model
    qwen = load_model("qwen3-30b-a3b")
    assert architecture_mismatch(qwen, {"group_query_attention": True, "num_query_groups": 4, "kv_channels": 128}) \
        is None
    assert architecture_mismatch(qwen, {"group_query_attention": True, "num_query_groups": 32})[0] == \
        "num_query_groups"
    assert architecture_mismatch(qwen, {"kv_channels": 64})[0] == "kv_channels"


@pytest.mark.parametrize("arg, first, second", [("data_parallel_sharding_strategy", "optim_grads_params", "no_shard"),
                                                ("moe_layer_freq", 1, 2), ("pipeline_model_parallel_layout",
                                                                            PRICED_DSV3, "Et|(t*4|)*14t*4mL")])
def test_two_starts_that_differ_in_a_split_strategy_or_architecture_argument_are_two_runs(arg, first, second):
    # only the first arguments block is checked and priced: a second start in another setting was merged into it
    text = _with(**{arg: first})
    block = text[text.index("------------------------ arguments"):text.index("end of arguments") + 60]
    text += block.replace(f"  {arg} {'.' * (40 - len(arg))} {first}", f"  {arg} {'.' * (40 - len(arg))} {second}")
    with pytest.raises(CommbenchError, match=f"holds 2 runs: arguments block 2 has {arg}="):
        _row(text)
