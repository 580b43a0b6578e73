"""--model-file fields the plan would leave unread are refused in one line (session 42 leads, G10): a model-level
n_group / topk_group beside an [arch] table (the plan routes by arch.router_groups), MLA's sizes on a GQA model (its
attention was planned as GQA), and an RMSNorm epsilon no model uses (0, 0.5, 1e-30: emitted to the launch as given);
an architecture field written in the model table, or a model-table router name in the arch table, says where it goes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import load_model


def _plan(tmp_path, text: str, name: str):
    model_file = tmp_path / "m.toml"
    model_file.write_text(text)
    return CliRunner().invoke(app, ["plan", "--model-file", str(model_file), "--model", name, "--system", "h100-hgx",
                                    "--gpus", "16", "--top", "1"], env={"COLUMNS": "400"})


@pytest.mark.parametrize("extra, says", [
    ("n_group = 8\ntopk_group = 4", "n_group=8 / topk_group=4 beside an [arch] table are not read"),
    ("q_lora_rank = 1536", 'mine.q_lora_rank=1536 is invalid: 0 with attention = "gqa"'),
    ("kv_lora_rank = 512\nqk_rope_head_dim = 64", 'mine.kv_lora_rank=512 is invalid: 0 with attention = "gqa"'),
    ("[model.mine.arch]\nnorm_epsilon = 0.5", "norm_epsilon=0.5 is invalid: 1e-12 <= norm_epsilon < 0.1"),
    ("[model.mine.arch]\nnorm_epsilon = 1e-30", "norm_epsilon=1e-30 is invalid"),
    ("[model.mine.arch]\nnorm_epsilon = 0.0", "norm_epsilon=0.0 is invalid"),
    ("norm_epsilon = 1e-5", "'norm_epsilon' is an architecture field: it belongs in the [model.mine.arch] table"),
    ("[model.mine.arch]\nn_group = 8", "arch key 'n_group' is not an architecture field: the arch table names it "
                                       "'router_groups'"),
])
def test_a_model_file_field_the_plan_would_not_read_is_refused_in_one_line(tmp_path, extra, says):
    result = _plan(tmp_path, f'[model.mine]\nvariant_of = "qwen3-30b-a3b"\n{extra}\n', "mine")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert says in result.output, result.output


def test_the_fields_the_plan_reads_still_plan(tmp_path):
    """The same routing in both places (or one group, which limits nothing: Kimi-K2's n_group = topk_group = 1), an
    MLA model's sizes, published epsilons."""
    for extra in ("n_group = 1\ntopk_group = 1", "[model.mine.arch]\nnorm_epsilon = 1e-5",
                  "[model.mine.arch]\nnorm_epsilon = 1e-12"):
        result = _plan(tmp_path, f'[model.mine]\nvariant_of = "qwen3-30b-a3b"\n{extra}\n', "mine")
        assert result.exit_code == 0, (extra, result.output)
    (tmp_path / "v3.toml").write_text('[model.mine]\nvariant_of = "deepseek-v3"\nn_group = 8\ntopk_group = 4\n')
    assert load_model("mine", tmp_path / "v3.toml").router_groups == (8, 4)
    assert load_model("kimi-k2").router_groups == (0, 0) and load_model("deepseek-v3").q_lora_rank == 1536
