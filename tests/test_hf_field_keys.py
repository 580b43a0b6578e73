"""An hf: config value the planner refuses is named as config.json names it, never by the internal architecture field
it is read into (models/hf_fields.py): `scoring_func='noaux_tc'` was refused as `architecture.router_score='noaux_tc'`.
The test walks every architecture field: each is read from a config.json key (FIELD_KEYS) or fixed by the model
type's modeling code (NOT_FROM_A_KEY), and for every key a bad value is refused naming that key."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.planner.models.architecture import ARCH_FIELDS
from commbench.planner.models.hf_config import load_hf_model
from commbench.planner.models.hf_fields import FIELD_KEYS, NOT_FROM_A_KEY
from tests.hf_configs import edited_config

LLAMA3_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_type": "llama3"}
DSV3_YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
             "original_max_position_embeddings": 4096, "type": "yarn"}
# field -> (tests/data/hf folder, config.json changes, what the one-line refusal names)
BAD_VALUES = {
    "activation": ("Llama-3.1-8B", {"hidden_act": "gelu"}, "hidden_act='gelu'"),
    "norm_epsilon": ("Llama-3.1-8B", {"rms_norm_eps": 0.5}, "rms_norm_eps=0.5 is invalid"),
    "rotary_base": ("Llama-3.1-8B", {"rope_theta": 0.5}, "rope_theta=0.5 is invalid"),
    "rotary_percent": ("Qwen3-Next-80B-A3B-Instruct", {"partial_rotary_factor": 2.0},
                       "partial_rotary_factor=2.0 is invalid: 0 < partial_rotary_factor <= 1"),
    "rope_scaling": ("Llama-3.1-8B", {"rope_scaling": dict(LLAMA3_ROPE, rope_type="dynamic")},
                     "rope_scaling.rope_type='dynamic'"),
    "rope_scaling_factor": ("Llama-3.1-8B", {"rope_scaling": dict(LLAMA3_ROPE, factor=0.5)},
                            "rope_scaling.factor=0.5 is invalid"),
    "rope_original_max_positions": ("DeepSeek-V3", {"rope_scaling": {k: v for k, v in DSV3_YARN.items()
                                                                     if k != "original_max_position_embeddings"}},
                                    "lacks 'rope_scaling.original_max_position_embeddings'"),
    "llama3_low_freq_factor": ("Llama-3.1-8B", {"rope_scaling": dict(LLAMA3_ROPE, low_freq_factor=-1.0)},
                               "rope_scaling.low_freq_factor=-1.0 is invalid"),
    "llama3_high_freq_factor": ("Llama-3.1-8B", {"rope_scaling": dict(LLAMA3_ROPE, high_freq_factor=-1.0)},
                                "rope_scaling.high_freq_factor=-1.0 is invalid"),
    "llama3_original_positions": ("Llama-3.1-8B", {"rope_scaling": dict(LLAMA3_ROPE,
                                                                        original_max_position_embeddings=-1)},
                                  "rope_scaling.original_max_position_embeddings=-1 is invalid"),
    "yarn_beta_fast": ("DeepSeek-V3", {"rope_scaling": dict(DSV3_YARN, beta_fast=-1)},
                       "rope_scaling.beta_fast=-1 is invalid"),
    "yarn_beta_slow": ("DeepSeek-V3", {"rope_scaling": dict(DSV3_YARN, beta_slow=-1)},
                       "rope_scaling.beta_slow=-1 is invalid"),
    "yarn_mscale": ("DeepSeek-V3", {"rope_scaling": dict(DSV3_YARN, mscale=-1.0)},
                    "rope_scaling.mscale=-1.0 is invalid"),
    "yarn_mscale_all_dim": ("DeepSeek-V3", {"rope_scaling": dict(DSV3_YARN, mscale_all_dim=-1.0)},
                            "rope_scaling.mscale_all_dim=-1.0 is invalid"),
    "yarn_truncate": ("DeepSeek-V3", {"rope_scaling": dict(DSV3_YARN, truncate="no")},
                      "rope_scaling.truncate='no' is invalid"),
    "max_position_embeddings": ("Llama-3.1-8B", {"max_position_embeddings": -1},
                                "max_position_embeddings=-1 is invalid"),
    "sliding_window": ("gpt-oss-20b", {"sliding_window": -1}, "sliding_window=-1 is invalid"),
    "activation_clamp": ("gpt-oss-20b", {"swiglu_limit": -1.0}, "swiglu_limit=-1.0 is invalid"),
    "router_score": ("Kimi-K2-Instruct", {"scoring_func": "noaux_tc"},
                     "scoring_func='noaux_tc' is invalid: one of softmax, sigmoid, sqrtsoftplus"),
    "router_topk_scaling": ("Kimi-K2-Instruct", {"routed_scaling_factor": -1.0},
                            "routed_scaling_factor=-1.0 is invalid"),
    "router_groups": ("DeepSeek-V3", {"n_group": -1}, "n_group=-1 is invalid"),
    "router_group_topk": ("DeepSeek-V3", {"topk_group": 9}, "topk_group"),
    "router_expert_bias": ("DeepSeek-V3", {"topk_method": 5}, "topk_method=5 is invalid"),
    "aux_loss_coeff": ("Mixtral-8x7B-v0.1", {"router_aux_loss_coef": -1.0}, "router_aux_loss_coef=-1.0 is invalid"),
    "attention_dropout": ("Llama-3.1-8B", {"attention_dropout": 1.5}, "attention_dropout=1.5 is invalid"),
    "hidden_dropout": ("phi-4", {"resid_pdrop": 1.5}, "resid_pdrop=1.5 is invalid"),
}


def test_every_architecture_field_is_read_from_a_key_or_fixed_by_the_model_type():
    assert not set(FIELD_KEYS) & set(NOT_FROM_A_KEY)
    assert sorted(set(FIELD_KEYS) | set(NOT_FROM_A_KEY)) == sorted(ARCH_FIELDS)
    assert sorted(BAD_VALUES) == sorted(FIELD_KEYS)


@pytest.mark.parametrize("field", sorted(BAD_VALUES))
def test_a_bad_value_is_refused_naming_its_config_json_key(tmp_path, field):
    folder, changes, named = BAD_VALUES[field]
    with pytest.raises(CommbenchError) as err:
        load_hf_model(edited_config(tmp_path, folder, **changes))
    message = str(err.value)
    assert named in message and "architecture." not in message, message
    assert "\n" not in message


def test_nemotron_h_norm_epsilon_is_named_layer_norm_epsilon(tmp_path):
    """Nemotron-H reads its norms' epsilon from layer_norm_epsilon alone (hf_arch._norm_epsilon), so that key is
    named, not the rms_norm_eps beside it."""
    with pytest.raises(CommbenchError, match=r"layer_norm_epsilon=0\.5 is invalid: 1e-12 <= layer_norm_epsilon"):
        load_hf_model(edited_config(tmp_path, "Nemotron-H-8B-Base-8K", layer_norm_epsilon=0.5))
