"""`--model hf:PATH` plans the network transformers (5.25.0) builds from the config.json: keys its class for the
model type does not read change nothing, a per-layer list it builds from decides over an older count key, and the
configs its save_pretrained writes (tests/data/hf-resaved, SOURCES.md there) plan as the hub files they came from."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.models.counts import param_counts
from commbench.planner.models.zoo import load_model
from tests.hf_configs import HF, edited_config



_config = edited_config


def _megatron_args(model: str, gpus: int = 8, layout: str = "tp=1,pp=1,vp=1,ep=8,mbs=1") -> list[str]:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus),
                                      "--layout", layout, "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    return shlex.split(result.stdout.strip().splitlines()[-1])


def _refusal(model: str, gpus: int = 16) -> str:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", str(gpus)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


# --- 1. Qwen3-MoE has no shared expert ------------------------------------------------------------------------------

def test_qwen3_moe_shared_expert_key_builds_no_shared_expert_and_says_so(tmp_path):
    """transformers 5.25.0 modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock is `experts` and `gate` alone, and
    Qwen3MoeConfig has no shared_expert_intermediate_size: a config carrying one (1536 here) builds Qwen3-30B-A3B's
    30,532,122,624 parameters. It was planned with 2 shared experts (+452,984,832) and launched with
    --moe-shared-expert-intermediate-size 1536."""
    model = load_model(_config(tmp_path, "Qwen3-30B-A3B", shared_expert_intermediate_size=1536))
    assert model.num_shared_experts == 0
    assert param_counts(model).total == 30_532_122_624   # transformers' count on the meta device (probe AD)
    assert any("shared_expert_intermediate_size=1536" in note and "no shared expert" in note
               for note in model.extra.get("notes", ())), model.extra
    assert "--moe-shared-expert-intermediate-size" not in _megatron_args(f"hf:{tmp_path}")


def test_qwen3_moe_shared_expert_key_of_zero_is_not_noted(tmp_path):
    """Qwen3-Coder-480B's published config carries the key as 0: nothing to say."""
    model = load_model(f"hf:{HF / 'Qwen3-Coder-480B-A35B-Instruct'}")
    assert model.num_shared_experts == 0 and not model.extra.get("notes")


def test_qwen2_moe_still_reads_its_shared_expert():
    """Qwen2MoeSparseMoeBlock does build a (gated) shared expert of shared_expert_intermediate_size."""
    assert load_model(f"hf:{HF / 'Qwen1.5-MoE-A2.7B'}").num_shared_experts == 4


# --- 2. the per-layer list a transformers class builds from decides; an older key that disagrees is refused ----------

def test_glm4_moe_lite_mlp_layer_types_and_first_k_dense_replace_that_disagree_are_refused_naming_both(tmp_path):
    """transformers 5.25.0 Glm4MoeLiteConfig has no first_k_dense_replace and Glm4MoeLiteDecoderLayer picks each
    layer's MLP from mlp_layer_types alone: 3 dense layers here, where first_k_dense_replace says 1. It was planned
    (and launched, --moe-layer-freq '[0]*1+[1]*46') with first_k_dense_replace's 1."""
    line = _refusal(_config(tmp_path, "GLM-4.7-Flash", mlp_layer_types=["dense"] * 3 + ["sparse"] * 44))
    assert "mlp_layer_types" in line and "first_k_dense_replace=1" in line and "disagree" in line, line
    assert "transformers 5.25.0 builds model_type 'glm4_moe_lite' from mlp_layer_types" in line, line


def test_glm4_moe_lite_first_k_dense_replace_without_mlp_layer_types_is_checked_against_the_class_default(tmp_path):
    """mlp_layer_types left out: Glm4MoeLiteConfig's ['dense'] + ['sparse'] * 46, one dense layer, whatever
    first_k_dense_replace says (3 was planned as 3 dense layers)."""
    line = _refusal(_config(tmp_path, "GLM-4.7-Flash", first_k_dense_replace=3))
    assert "first_k_dense_replace=3" in line and "left out" in line and "disagree" in line, line


def test_glm4_moe_lite_agreeing_spellings_plan_as_the_list_says(tmp_path):
    """The config transformers 5.x writes carries both keys, agreeing: the released model (1 dense, 46 MoE)."""
    model = load_model(_config(tmp_path, "GLM-4.7-Flash", mlp_layer_types=["dense"] + ["sparse"] * 46))
    assert (model.num_dense_layers, model.num_moe_layers) == (1, 46)


@pytest.mark.parametrize("changes, message", [
    # Glm4MoeLiteDecoderLayer builds MoE where the entry is 'sparse' and a dense MLP for anything else
    (dict(mlp_layer_types=["dense"] + ["moe"] * 46), r"mlp_layer_types entry 'moe' is invalid: one of dense, sparse"),
    (dict(mlp_layer_types=["dense"] + ["sparse"] * 45), r"mlp_layer_types has 46 entries for num_hidden_layers=47"),
    (dict(mlp_layer_types=["dense"] * 47), r"mlp_layer_types is invalid: .*'sparse'"),
])
def test_glm4_moe_lite_mlp_layer_types_as_transformers_reads_them(tmp_path, changes, message):
    line = _refusal(_config(tmp_path, "GLM-4.7-Flash", ("first_k_dense_replace",), **changes))
    assert re.search(message, line), line


def test_deepseek_v3_first_k_dense_replace_decides_and_a_disagreeing_mlp_layer_types_is_refused(tmp_path):
    """DeepseekV3Config reads first_k_dense_replace, not mlp_layer_types (the other way round from glm4_moe_lite)."""
    line = _refusal(_config(tmp_path, "DeepSeek-V3", mlp_layer_types=["dense"] + ["sparse"] * 60))
    assert "first_k_dense_replace=3" in line and "mlp_layer_types" in line and "disagree" in line, line
    assert "from first_k_dense_replace" in line, line


def test_deepseek_v4_mlp_layer_types_decide_over_num_hash_layers(tmp_path):
    """DeepseekV4Config reads the legacy num_hash_layers only where mlp_layer_types is left out; both given and
    disagreeing (2 hash-routed layers against 3) was planned as num_hash_layers said."""
    line = _refusal(_config(tmp_path, "DeepSeek-V4-Flash", mlp_layer_types=["hash_moe"] * 2 + ["moe"] * 41), 64)
    assert "mlp_layer_types" in line and "num_hash_layers=3" in line and "disagree" in line, line
    agree = load_model(_config(tmp_path, "DeepSeek-V4-Flash", mlp_layer_types=["hash_moe"] * 3 + ["moe"] * 40))
    assert agree.hash_layers == 3


def test_deepseek_v4_layer_types_decide_over_compress_ratios(tmp_path):
    """DeepseekV4Config: layer_types given > legacy compress_ratios (__post_init__); both, disagreeing, refused."""
    raw = json.loads((HF / "DeepSeek-V4-Flash" / "config.json").read_text())
    kinds = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    listed = [kinds[r] for r in raw["compress_ratios"][:43]]
    rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    agree = load_model(_config(tmp_path, "DeepSeek-V4-Flash", layer_types=listed, compress_rates=rates))
    assert agree.csa_pattern == load_model(f"hf:{HF / 'DeepSeek-V4-Flash'}").csa_pattern
    listed[2] = "sliding_attention"
    line = _refusal(_config(tmp_path, "DeepSeek-V4-Flash", layer_types=listed, compress_rates=rates), 64)
    assert "layer_types" in line and "compress_ratios" in line and "disagree" in line, line


def test_nemotron_h_layers_block_type_and_hybrid_override_pattern_that_disagree_are_refused(tmp_path):
    """NemotronHConfig (transformers 5.25.0) builds from layers_block_type, reading hybrid_override_pattern only where
    that is left out; the pattern decided here."""
    raw = json.loads((HF / "Nemotron-H-8B-Base-8K" / "config.json").read_text())
    blocks = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    listed = [blocks[ch] for ch in raw["hybrid_override_pattern"]]
    agree = load_model(_config(tmp_path, "Nemotron-H-8B-Base-8K", layers_block_type=listed))
    assert agree.layer_pattern == raw["hybrid_override_pattern"]
    listed[0] = "attention"
    line = _refusal(_config(tmp_path, "Nemotron-H-8B-Base-8K", layers_block_type=listed))
    assert "layers_block_type" in line and "hybrid_override_pattern" in line and "disagree" in line, line


# --- 3. configs re-saved by transformers 5.x plan as the hub files they came from ----------------------------------

RESAVED = Path(__file__).parent / "data" / "hf-resaved"


def _spec(model) -> dict:
    """The ModelSpec's fields but its name, notes' wording and the architecture's file citations."""
    d = dataclasses.asdict(model)
    d.pop("name")
    extra = d.pop("extra")
    d["extra"] = {k: v for k, v in extra.items() if k != "notes"} | {"notes": len(extra.get("notes", ()))}
    d["architecture"] = {k: v for k, v in (d["architecture"] or {}).items() if k != "sources"}
    return d


@pytest.mark.parametrize("folder", sorted(p.name for p in RESAVED.iterdir() if p.is_dir()))
def test_a_config_resaved_by_transformers_5_plans_as_the_hub_file_it_came_from(folder):
    """Qwen3-MoE's num_local_experts, Nemotron-H's linear_attention / full_attention blocks without
    num_hidden_layers, DeepSeek-V4's rope_parameters {main, compress}: each was refused ("lacks 'num_experts'",
    "'linear_attention' is invalid", "rope_parameters.compress is not modelled")."""
    assert _spec(load_model(f"hf:{RESAVED / folder}")) == _spec(load_model(f"hf:{HF / folder}"))


@pytest.mark.parametrize("folder", ["Qwen3-30B-A3B", "Nemotron-H-8B-Base-8K"])
def test_a_resaved_config_plans_through_the_cli(folder):
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{RESAVED / folder}", "--system", "h100-hgx",
                                      "--gpus", "8"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("folder, alias, value, key", [
    ("Qwen3-30B-A3B", "num_local_experts", 128, "num_experts"),       # Qwen3MoeConfig attribute_map
    ("Mixtral-8x7B-v0.1", "num_experts", 8, "num_local_experts"),     # MixtralConfig attribute_map
    ("DeepSeek-V3", "num_local_experts", 256, "n_routed_experts"),    # DeepseekV3Config attribute_map
])
def test_an_attribute_map_spelling_reads_as_the_key_it_names(tmp_path, folder, alias, value, key):
    model = load_model(_config(tmp_path, folder, (key,), **{alias: value}))
    assert model.num_routed_experts == value


def test_two_spellings_of_one_setting_with_different_values_are_refused_naming_both(tmp_path):
    line = _refusal(_config(tmp_path, "Qwen3-30B-A3B", num_local_experts=64))
    assert "num_experts=128 and num_local_experts=64 are one setting" in line, line


@pytest.mark.parametrize("changes, message", [
    (dict(num_hidden_layers=50), r"num_hidden_layers=50 \(50 layers\) and the layer pattern .* \(52 layers\) disagree"),
    (dict(num_nextn_predict_layers=1, mtp_layers_block_type=["full_attention", "mlp"]),
     r"mtp_layers_block_type=\['full_attention', 'mlp'\] is not modelled: '\*E'"),
    (dict(layers_block_type=["linear_attention", "sliding_attention"]),
     r"layers_block_type entry 'sliding_attention' is invalid: one of linear_attention, full_attention, mlp, moe"),
])
def test_nemotron_h_in_transformers_5_names_as_transformers_checks_them(tmp_path, changes, message):
    raw = json.loads((RESAVED / "Nemotron-H-8B-Base-8K" / "config.json").read_text())
    raw.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert re.search(message, _refusal(f"hf:{tmp_path}")), message


def _resaved_v4(tmp_path, **changes) -> str:
    raw = json.loads((RESAVED / "DeepSeek-V4-Flash" / "config.json").read_text())
    for key, value in changes.items():
        node, *path = key.split("__")
        target = raw
        for part in [node, *path][:-1]:
            target = target[part]
        target[([node, *path])[-1]] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return f"hf:{tmp_path}"


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters__main__rope_type="yarn"), r"rope_parameters.main.rope_type='yarn' is not modelled"),
    (dict(rope_parameters__main__rope_theta=50000), r"rope_parameters.main.rope_theta=50000 and rope_theta=10000 "
                                                    "disagree"),
    (dict(rope_parameters__compress__factor=0.5), r"rope_parameters.compress.factor=0.5 is invalid: >= 1"),
    (dict(partial_rotary_factor=0.25), r"partial_rotary_factor=0.25 \(128 of head_dim 512\) and qk_rope_head_dim=64"),
])
def test_deepseek_v4_split_rope_is_read_as_its_hub_form_or_refused_in_one_line(tmp_path, changes, message):
    assert re.search(message, _refusal(_resaved_v4(tmp_path, **changes), 64)), message


# --- 4. attention_head_dim is Nemotron-H's key, not every type's ----------------------------------------------------

def test_attention_head_dim_does_not_set_a_llama_head(tmp_path):
    """LlamaConfig does not read attention_head_dim (transformers 5.25.0: only zamba, zamba2, hunyuan_vl and
    edgetam_video classes do): Llama-3.1-8B without head_dim and with attention_head_dim 64 builds head_dim
    4096 / 32 = 128 and 8,030,261,248 parameters. It was planned with 64 (7,359,172,608) and --kv-channels 64."""
    model = load_model(_config(tmp_path, "Llama-3.1-8B", ("head_dim",) if "head_dim" in json.loads(
        (HF / "Llama-3.1-8B" / "config.json").read_text()) else (), attention_head_dim=64))
    assert model.head_dim == 128 and param_counts(model).total == 8_030_261_248
    args = _megatron_args(f"hf:{tmp_path}", layout="tp=1,pp=1,vp=1,ep=1,mbs=1")
    assert "--kv-channels" not in args or args[args.index("--kv-channels") + 1] == "128"


def test_nemotron_h_attention_head_dim_and_head_dim_that_disagree_are_refused_naming_both(tmp_path):
    """Nemotron-H's remote code builds its attention from attention_head_dim, transformers 5.25.0 NemotronHConfig from
    head_dim (left out: 128): 64 here was read as the class's 128 without a word."""
    line = _refusal(_config(tmp_path, "Nemotron-H-8B-Base-8K", attention_head_dim=64))
    assert "head_dim" in line and "attention_head_dim=64" in line and "disagree" in line, line
    line = _refusal(_config(tmp_path, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", attention_head_dim=64))
    assert "head_dim=128" in line and "attention_head_dim=64" in line, line


# --- 5. layer_types on the full-attention types is checked as transformers checks it --------------------------------

@pytest.mark.parametrize("folder", ["Llama-3.1-8B", "Qwen2.5-7B", "Qwen3-8B", "Mistral-Nemo-Base-2407", "phi-4",
                                    "Qwen3-30B-A3B", "Mixtral-8x7B-v0.1", "DeepSeek-V3", "GLM-4.5-Air"])
def test_layer_types_of_another_length_or_kind_are_refused_in_one_line(tmp_path, folder):
    """transformers 5.25.0 PreTrainedConfig.validate_layer_type: one entry per layer (`num_hidden_layers (32) must be
    equal to the number of layer types`); these types' modeling code builds full attention, or a window where the
    type's own window keys give one, from 'full_attention' / 'sliding_attention' (Qwen2/Qwen3 look each layer's kind
    up in a mask table of those two). Both were planned unchanged."""
    layers = json.loads((HF / folder / "config.json").read_text())["num_hidden_layers"]
    line = _refusal(_config(tmp_path, folder, layer_types=["linear_attention"] * 60))
    assert f"layer_types has 60 entries for num_hidden_layers={layers}: one per layer" in line, line
    line = _refusal(_config(tmp_path, folder, layer_types=["full_attention"] * (layers - 1) + ["linear_attention"]))
    assert "layer_types entry 'linear_attention' is invalid: one of full_attention, sliding_attention" in line, line


def test_layer_types_transformers_writes_for_qwen2_plan_unchanged():
    """Qwen2Config / Qwen3Config write layer_types ['full_attention'] * layers (use_sliding_window false): the same
    model (tests/data/hf-resaved)."""
    assert json.loads((RESAVED / "Qwen2.5-7B" / "config.json").read_text())["layer_types"] == ["full_attention"] * 28
    assert load_model(f"hf:{RESAVED / 'Qwen2.5-7B'}").num_layers == 28
