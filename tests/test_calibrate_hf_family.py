"""An hf:PATH model's family (calibrate's error by family and the fit's per-family weights) is its architecture's,
not the first letters of its path: `calibrate --evaluate run.log --model hf:hf/l8` printed "by family: hf:l"
(probe P6, fit.family_of of the name 'hf:l8'). A config with a zoo model's architecture is that model's family
(llama3-8b's: llama); one of no zoo architecture its config's model_type's."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

# Llama 3 8B's config.json (meta-llama/Meta-Llama-3-8B), in a folder whose name says nothing of the family
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 128256, "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
             "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
             "rope_scaling": None, "torch_dtype": "bfloat16"}


def _evaluate(tmp_path, config: dict) -> dict:
    folder = tmp_path / "l8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    row = {"source": "mine", "model": f"hf:{folder}", "gpu": "H100", "num_gpus": 16, "precision": "BF16",
           "seq_len": 8192, "gbs": 64, "mbs": 1, "tp": 2, "pp": 1, "cp": 1, "vp": 1, "ep": 1, "etp": 1,
           "tokens_per_s_per_gpu": 8000, "release": "user"}
    (tmp_path / "runs.json").write_text(json.dumps([row]))
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(tmp_path / "runs.json"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["median_abs_error_pct_by_family"]


def test_an_hf_model_of_a_zoo_architecture_is_that_models_family(tmp_path):
    assert list(_evaluate(tmp_path, LLAMA3_8B)) == ["llama"]


def test_an_hf_model_of_no_zoo_architecture_is_its_model_types_family(tmp_path):
    assert list(_evaluate(tmp_path, dict(LLAMA3_8B, num_hidden_layers=20))) == ["llama"]


def test_the_fit_weighs_an_hf_model_in_its_architectures_family(tmp_path):
    from types import SimpleNamespace

    from commbench.planner.calibrate.fit import fit_weights
    from commbench.planner.models.zoo import load_model
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA3_8B, num_hidden_layers=20)))
    models = (load_model("llama3-8b"), load_model(f"hf:{tmp_path / 'config.json'}"))
    runs = [SimpleNamespace(model=m, preset="h100-hgx", row={"num_gpus": 16}, layout=i) for i, m in enumerate(models)]
    # one family x system group: the two runs share its unit weight
    assert list(fit_weights(runs)) == [0.5, 0.5]
