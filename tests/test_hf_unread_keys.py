"""A config.json key its model_type's reader never looks up is refused unless hf_unread.INERT_KEYS says why it changes
nothing planned: Arctic's parallel_attn_mlp_res (a dense residual MLP beside every MoE one) and MiniMax's rotary_dim
on a config labelled mixtral, with no `architectures` to tell them apart, were planned as Mixtral (outside probe P1)."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.planner.models.hf_config import load_hf_model
from commbench.planner.models.hf_unread import ANY, INERT_KEYS, SOFTMAX_ROUTER_KEYS
from tests.hf_configs import edited_config

# another architecture's keys on a config of a type the planner reads, without its class
OTHER_ARCHITECTURE_KEYS = [
    ("Mixtral-8x7B-v0.1", {"parallel_attn_mlp_res": True, "moe_layer_frequency": 1}, "parallel_attn_mlp_res=True"),
    ("Mixtral-8x7B-v0.1", {"rotary_dim": 64, "attn_type_list": [0, 1]}, "rotary_dim=64"),
    ("Qwen1.5-MoE-A2.7B", {"num_shared_experts": 2}, "num_shared_experts=2"),
    # inert at its listed values only
    ("Mixtral-8x7B-v0.1", {"mlp_bias": True}, "mlp_bias=True"),
    ("DeepSeek-V3", {"mamba_proj_bias": True}, "mamba_proj_bias=True"),   # inert for Nemotron-H only
    ("Nemotron-H-8B-Base-8K", {"hidden_dropout": 0.1}, "hidden_dropout=0.1"),
    # inert for its own types only: an MoE key on a dense Llama may say the model is not that Llama
    ("Llama-3.1-8B", {"n_routed_experts": 64}, "n_routed_experts=64"),
]


@pytest.mark.parametrize("folder,changes,named", OTHER_ARCHITECTURE_KEYS)
def test_a_key_no_reader_looks_up_is_refused_by_name(tmp_path, folder, changes, named):
    with pytest.raises(CommbenchError) as err:
        load_hf_model(edited_config(tmp_path, folder, drop=("architectures",), **changes))
    message = str(err.value)
    assert f"{named} is not read for model_type" in message and "\n" not in message, message


@pytest.mark.parametrize("key", ["pad_token_id", "torch_dtype", "initializer_range", "use_cache", "auto_map",
                                 "output_router_logits", "task_specific_params"])
def test_a_key_that_does_not_shape_the_network_is_read_as_before(tmp_path, key):
    load_hf_model(edited_config(tmp_path, "Mixtral-8x7B-v0.1", **{key: 1}))


def test_every_inert_key_says_why():
    for key, (values, why, types) in [*INERT_KEYS.items(), *SOFTMAX_ROUTER_KEYS.items()]:
        assert why and (values is ANY or isinstance(values, tuple)) and isinstance(types, tuple), key


def test_a_key_set_to_null_is_absent(tmp_path):
    """transformers writes `"rope_scaling": null` beside `rope_parameters`: an unread key set to null changes nothing
    (it was refused as `rope_scaling=None is not read`, CI at d722ffcd: tests/test_mtp_with_yarn.py)."""
    from commbench.planner.models.hf_unread import ReadKeys, unread_key_refusal

    raw = ReadKeys({"rope_scaling": None, "some_future_key": None})
    assert unread_key_refusal(raw, "glm4_moe") is None
    assert "some_future_key=1" in unread_key_refusal(ReadKeys({"some_future_key": 1}), "glm4_moe")
