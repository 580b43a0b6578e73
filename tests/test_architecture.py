"""Every zoo model carries its whole architecture, each field citing the file it comes from."""

from __future__ import annotations

import re

import pytest

from commbench.errors import CommbenchError
from commbench.planner.models.architecture import ARCH_FIELDS, architecture_from_row
from commbench.planner.models.zoo import load_model, model_names


@pytest.mark.parametrize("name", model_names())
def test_every_zoo_field_cites_a_file_at_a_commit(name):
    arch = load_model(name).architecture
    assert arch is not None, f"{name} has no [arch] table"
    assert set(arch.sources) == set(ARCH_FIELDS)
    for field, src in arch.sources.items():
        assert src.path and "/" in src.repo or src.repo.startswith("pypi:"), (field, src)
        assert re.fullmatch(r"[0-9a-f]{40}|\d+\.\d+\.\d+", src.commit), (field, src.commit)


def test_named_facts_the_issue_lists():
    dsv3, qwen, oss = load_model("deepseek-v3"), load_model("qwen3-235b-a22b"), load_model("gpt-oss-120b")
    assert (dsv3.architecture.router_score, dsv3.router_groups, dsv3.architecture.router_expert_bias) == \
        ("sigmoid", (8, 4), True)
    assert qwen.architecture.qk_norm and qwen.architecture.rotary_base == 1_000_000
    a = oss.architecture
    assert (a.activation, a.glu_linear_offset, a.activation_clamp, a.softmax_type, a.linear_bias,
            a.sliding_window, a.window_skip_freq) == ("quick_geglu", 1.0, 7.0, "learnable", True, 128, 2)
    assert load_model("llama3.1-405b").architecture.rope_scaling == "llama3"


def test_a_value_without_a_source_is_refused():
    with pytest.raises(CommbenchError, match="cites no source"):
        architecture_from_row("m", {"activation": "swiglu", "norm_epsilon": 1e-5, "rotary_base": 1,
                                    "max_position_embeddings": 8}, {}, {})


def test_a_wrongly_typed_value_is_refused_by_name():
    with pytest.raises(CommbenchError, match=r"arch.qk_norm='yes' is invalid"):
        architecture_from_row("m", {"qk_norm": "yes"}, {"*": "s"}, {"s": object()})


@pytest.mark.parametrize("field, value, message", [
    ("norm_epsilon", float("nan"), "norm_epsilon=nan is invalid: a finite number >= 0"),
    ("rotary_base", -5, "rotary_base=-5 is invalid: a finite number >= 0"),
    ("rope_scaling_factor", float("inf"), "rope_scaling_factor=inf is invalid"),
    ("vocab_divisible_by", 0, "vocab_divisible_by=0 is invalid: >= 1"),
])
def test_a_non_finite_or_negative_number_is_refused_by_name(field, value, message):
    """They were emitted as they were (--norm-epsilon nan, --rotary-base -5)."""
    row = {"activation": "swiglu", "norm_epsilon": 1e-5, "rotary_base": 10000, "max_position_embeddings": 8, field: value}
    with pytest.raises(CommbenchError, match=message):
        architecture_from_row("m", row, {"*": "s"}, {"s": object()})
