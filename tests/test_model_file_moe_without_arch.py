"""A --model-file MoE model with no [model.NAME.arch] table plans (Llama-style defaults, said in a note) instead of
a traceback: the search's capacity-factor check read `architecture.capacity_factor` of None (session 42)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app

MOE_WITHOUT_ARCH = """
[model.mymoe]
layers = 32
dense_layers = 0
hidden = 4096
heads = 32
kv_heads = 8
head_dim = 128
attention = "gqa"
routed_experts = 8
shared_experts = 0
top_k = 2
expert_ffn = 14336
vocab = 32000
glu = true
params_total_b = 46.7
params_active_b = 12.9
seq_len = 4096
flops_per_token_gflop = 79.7
"""


def test_a_moe_model_file_without_an_arch_table_plans(tmp_path):
    model_file = tmp_path / "m.toml"
    model_file.write_text(MOE_WITHOUT_ARCH)
    result = CliRunner().invoke(app, ["plan", "--model-file", str(model_file), "--model", "mymoe", "--system",
                                      "h100-hgx", "--gpus", "16", "-O", str(tmp_path / "plan")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "mymoe has no [arch] table" in " ".join(result.output.split())
    assert "--num-experts 8" in (tmp_path / "plan" / "megatron_args.txt").read_text()
