"""A Megatron plan builds the vocabulary it prices, and keeps the model's where TP divides it.

Megatron-LM pads the vocabulary to a multiple of --make-vocab-size-divisible-by x TP (26.02's b0cc2706
megatron/training/tokenizer/tokenizer.py:117-123). The plan passed the model's divisor (128) at every TP, so a
Qwen2-57B-A14B plan at TP2 built 152,064 rows for a 151,936-token model and said nothing (probe P1); Megatron-Bridge
builds 151,936 (training/setup.py _validate_and_set_vocab_size: an explicit vocab_size is not padded). The plan now
passes 64 there (models/counts.megatron_vocab_divisor); a vocabulary TP cannot divide is padded, priced and noted.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app

# Qwen2-57B-A14B's config.json (huggingface.co/Qwen/Qwen2-57B-A14B), the fields the reader takes
QWEN2_57B = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "attention_dropout": 0.0,
             "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 32768,
             "moe_intermediate_size": 2560, "norm_topk_prob": False, "num_attention_heads": 28, "num_experts": 64,
             "num_experts_per_tok": 8, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
             "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 20480,
             "decoder_sparse_step": 1, "sliding_window": 65536, "use_sliding_window": False,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936}


def _plan(tmp_path, vocab: int):
    folder = tmp_path / f"q2_{vocab}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN2_57B, "vocab_size": vocab}))
    out = tmp_path / f"out_{vocab}"
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{folder}", "--system", "b200-hgx", "--gpus", "8",
                                      "--software", "26.02", "--precision", "bf16", "--layout", "tp=2",
                                      "-O", str(out)])
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    argv = (out / "megatron_args.txt").read_text().split()
    value = {flag: argv[argv.index(flag) + 1] for flag in ("--vocab-size", "--make-vocab-size-divisible-by",
                                                            "--tensor-model-parallel-size")}
    tp, divisor = int(value["--tensor-model-parallel-size"]), int(value["--make-vocab-size-divisible-by"])
    multiple = divisor * tp
    built = -(-int(value["--vocab-size"]) // multiple) * multiple   # tokenizer.py _vocab_size_with_padding
    return plan, tp, divisor, built


def test_qwen2_57b_at_tp2_builds_its_own_vocabulary(tmp_path):
    plan, tp, divisor, built = _plan(tmp_path, 151936)
    assert (tp, divisor, built) == (2, 64, 151936)
    text = json.dumps(plan)
    assert "padded to" not in text and "pads it to" not in text


def test_a_vocabulary_tp_cannot_divide_is_padded_priced_and_noted(tmp_path):
    plan, tp, divisor, built = _plan(tmp_path, 151937)
    assert (tp, divisor, built) == (2, 128, 152064)
    notes = plan["megatron"]["notes"]
    assert any("vocabulary of 151,937 is not divisible by TP2: Megatron-LM pads it to 152,064 rows" in n
               for n in notes), notes
    # the priced rows: the model TFLOP/s count names the same padded vocabulary
    assert "the vocabulary padded to 152,064 rows at TP2" in json.dumps(plan)
