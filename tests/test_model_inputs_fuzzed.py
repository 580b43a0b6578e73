"""Model inputs users write (--model-file TOML, hf:PATH config.json), fuzzed field by field through `plan`
(session 42, fix-FL): each case below was a traceback (or bad input planned without a word) on main, and is now one
line naming the field, the value and what is allowed, exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

# mixtral-8x7b's sizes (commbench/data/models.toml) without its [arch] table
MOE = {"layers": 32, "dense_layers": 0, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
       "attention": "gqa", "routed_experts": 8, "shared_experts": 0, "top_k": 2, "expert_ffn": 14336,
       "vocab": 32000, "glu": True, "seq_len": 4096}


# mixtral-8x7b's [arch] table, cited to a shipped [source.*]
ARCH = {"activation": "swiglu", "norm_epsilon": 1e-5, "rotary_base": 1000000, "max_position_embeddings": 32768}


def _model_file(tmp_path, arch=None, **changes) -> str:
    row = {**MOE, **changes}
    text = "[model.fz]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in row.items())
    if arch is not None:
        text += "[model.fz.arch]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in {**ARCH, **arch}.items())
        text += '[model.fz.arch_sources]\n"*" = "mlm-mixtral"\n'
    (tmp_path / "m.toml").write_text(text.replace("True", "true"))
    return str(tmp_path / "m.toml")


def _plan(args, tmp_path):
    return CliRunner().invoke(app, ["plan", *args, "--system", "h100-hgx", "--gpus", "16", "-O", str(tmp_path / "p")],
                              env={"COLUMNS": "200"})


@pytest.mark.parametrize("changes, says", [
    ({"variant_of": ["a"]}, "variant_of=['a'] is invalid"),          # TypeError: unhashable type: 'list'
    ({"n_group": "x"}, "n_group='x' is invalid"),                      # ValueError: int('x') in ModelSpec.router_groups
    ({"topk_group": "x"}, "topk_group='x' is invalid"),
    ({"n_group": -1, "topk_group": 1}, "n_group=-1 is invalid"),       # planned with -1 groups
    ({"n_group": 3, "topk_group": 1}, "fz.n_group=3 is invalid: a divisor of routed_experts (8)"),  # planned
    ({"n_group": 4, "topk_group": 5}, "fz.topk_group=5 is invalid"),   # planned
    ({"n_group": 4}, "fz.topk_group=0 is invalid"),                    # planned: groups without a group top-k
    # MoE fields without routed experts planned a dense model without a word (the shared expert unread) ...
    ({"routed_experts": 0, "top_k": 0, "expert_ffn": 0, "shared_experts": 1, "dense_layers": 32, "dense_ffn": 14336},
     "fz.shared_experts=1 is invalid: 0 without routed experts"),
    ({"routed_experts": 0, "dense_layers": 32, "dense_ffn": 14336}, "fz.top_k=2 is invalid: 0 without routed experts"),
    # ... and dense_layers = 0 of a dense model planned layers with no MLP at all
    ({"routed_experts": 0, "top_k": 0, "expert_ffn": 0, "dense_ffn": 14336},
     "fz.dense_layers=0 is invalid: 32 (= layers) without routed experts"),
    # Mamba sizes without a layer_pattern (or one without "M") planned a transformer, the sizes unread
    ({"mamba_num_heads": 64, "mamba_head_dim": 64}, "model 'fz': mamba_num_heads=64 is invalid: with Mamba layers only"),
])
def test_a_bad_model_file_field_is_one_line(tmp_path, changes, says):
    result = _plan(["--model-file", _model_file(tmp_path, **changes), "--model", "fz"], tmp_path)
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError))
    assert says in " ".join(result.output.split())


@pytest.mark.parametrize("arch, says", [
    # emitted as --moe-router-dtype x, which megatron-core's Literal['fp32', 'fp64'] refuses at launch
    ({"router_dtype": "x"}, "architecture.router_dtype='x' is invalid: one of fp32, fp64"),
    # rotary_percent 2.0 planned (Megatron builds the whole head), 0 planned (Megatron rotates no dimension)
    ({"rotary_percent": 2.0}, "architecture.rotary_percent=2.0 is invalid: 0 < rotary_percent <= 1"),
    ({"rotary_percent": 0.0}, "architecture.rotary_percent=0.0 is invalid"),
    ({"rope_scaling": "llama3", "rope_scaling_factor": 0.0}, "architecture.rope_scaling_factor=0.0 is invalid"),
])
def test_a_bad_arch_field_is_one_line(tmp_path, arch, says):
    result = _plan(["--model-file", _model_file(tmp_path, arch), "--model", "fz"], tmp_path)
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())


def test_group_limited_routing_in_a_model_file_without_arch_still_plans(tmp_path):
    result = _plan(["--model-file", _model_file(tmp_path, n_group=4, topk_group=2), "--model", "fz"], tmp_path)
    assert result.exit_code == 0, result.output


def test_an_upper_case_hf_prefix_reads_the_path_after_it():
    """`--model HF:PATH` was taken as hf: (zoo.load_model compares case-insensitively) and then read the file
    'HF:PATH' (hf_config stripped only a lower-case prefix): "cannot be read: No such file or directory"."""
    from commbench.planner.models.zoo import load_model
    from tests.hf_configs import HF
    assert load_model(f"HF:{HF / 'Mixtral-8x7B-v0.1'}").num_routed_experts == 8


@pytest.mark.parametrize("folder, rope", [
    # planned as factor 1.0 (no scaling) without a word; transformers' _compute_llama3/yarn_parameters read ["factor"]
    ("Llama-3.1-8B", {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}),
    ("Mixtral-8x7B-v0.1", {"rope_type": "yarn", "original_max_position_embeddings": 4096}),
])
def test_an_hf_rope_scaling_without_its_factor_is_one_line(tmp_path, folder, rope):
    from tests.hf_configs import edited_config
    result = _plan(["--model", edited_config(tmp_path, folder, rope_scaling=rope)], tmp_path)
    assert result.exit_code == 2, result.output
    assert f"lacks rope_scaling.'factor' (needed for rope_type '{rope['rope_type']}'" in " ".join(result.output.split())
