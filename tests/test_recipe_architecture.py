"""Per zoo model: the architecture flags the Megatron-LM emitter writes against the framework's own
published recipe or example for that model (each transcribed below with its file and commit).

Only architecture flags are compared (sizes, activation, norms, rotary, attention variant, router,
vocabulary); fusion switches, tokenizer, data, batch and parallelism flags of the examples are not
architecture. Where an example names a flag by another spelling, the effective value is compared
(Mixtral's example sets --ffn-hidden-size, which Megatron uses as the experts' width when
--moe-ffn-hidden-size is absent).
"""

from __future__ import annotations

import shlex

import pytest

from commbench.planner.emit.megatron import model_args
from commbench.planner.models.spec import load_model, model_names

MLM = "NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553"
BRIDGE = "NVIDIA-NeMo/Megatron-Bridge@dc805f5cf9e0001c1f7c860ebb8e42c580ef45b3"
NEMO = "NVIDIA/NeMo@02f25a80bb783e04558303bed0d967bbcc486bdb"

QWEN3_COMMON = ("--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
                "--normalization RMSNorm --swiglu --group-query-attention --num-query-groups 4 --kv-channels 128 "
                "--qk-layernorm --num-experts 128 --moe-router-topk 8 --moe-router-dtype fp32 --moe-aux-loss-coeff 1e-3 "
                "--moe-router-load-balancing-type aux_loss --max-position-embeddings 40960 "
                "--make-vocab-size-divisible-by 1187 --rotary-percent 1.0 --rotary-base 1000000")
LLAMA31 = ("--normalization RMSNorm --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
           "--group-query-attention --num-query-groups 8 --position-embedding-type rope --rotary-base 500000 "
           "--rotary-percent 1.0 --use-rope-scaling --rope-scaling-factor 8.0 --norm-epsilon 1e-5 "
           "--make-vocab-size-divisible-by 128 --vocab-size 128256 --max-position-embeddings 131072")

# model -> (source, the recipe's architecture flags)
RECIPES = {
    "deepseek-v3": (f"{MLM}:examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-R1.sh (DeepSeek-V3's architecture)",
                    "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
                    "--normalization RMSNorm --swiglu --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 "
                    "--num-attention-heads 128 --multi-latent-attention --kv-lora-rank 512 --v-head-dim 128 "
                    "--q-lora-rank 1536 --qk-head-dim 128 --qk-layernorm --qk-pos-emb-head-dim 64 --num-experts 256 "
                    "--moe-layer-freq [0]*3+[1]*58 --moe-ffn-hidden-size 2048 --moe-router-dtype fp32 "
                    "--moe-router-score-function sigmoid --moe-router-bias-update-rate 1e-3 "
                    "--moe-router-enable-expert-bias --moe-router-topk 8 --moe-router-num-groups 8 "
                    "--moe-router-group-topk 4 --moe-router-pre-softmax --moe-router-topk-scaling-factor 2.5 "
                    "--moe-shared-expert-intermediate-size 2048 --moe-aux-loss-coeff 1e-4 "
                    "--moe-router-load-balancing-type seq_aux_loss --max-position-embeddings 163840 "
                    "--make-vocab-size-divisible-by 1280 --rotary-base 10000 --rotary-percent 1.0 "
                    "--rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim 1.0"),
    "qwen3-235b-a22b": (f"{MLM}:examples/post_training/modelopt/conf/Qwen/Qwen3-235B-A22B.sh",
                        QWEN3_COMMON + " --num-layers 94 --hidden-size 4096 --num-attention-heads 64 "
                                       "--moe-ffn-hidden-size 1536"),
    "qwen3-30b-a3b": (f"{MLM}:examples/post_training/modelopt/conf/Qwen/Qwen3-30B-A3B.sh",
                      QWEN3_COMMON + " --num-layers 48 --hidden-size 2048 --num-attention-heads 32 "
                                     "--moe-ffn-hidden-size 768"),
    "mixtral-8x7b": (f"{MLM}:examples/mixtral/train_mixtral_8x7b_distributed.sh",
                     "--disable-bias-linear --max-position-embeddings 32768 --num-layers 32 --hidden-size 4096 "
                     "--ffn-hidden-size 14336 --num-attention-heads 32 --normalization RMSNorm "
                     "--position-embedding-type rope --swiglu --untie-embeddings-and-output-weights "
                     "--group-query-attention --num-query-groups 8 --rotary-base 1000000 --num-experts 8 "
                     "--moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2"),
    "mixtral-8x22b": (f"{NEMO}:nemo/collections/llm/gpt/model/mixtral.py (MixtralConfig + MixtralConfig8x22B, as flags)",
                      "--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
                      "--num-layers 56 --hidden-size 6144 --num-attention-heads 48 --num-query-groups 8 "
                      "--ffn-hidden-size 16384 --max-position-embeddings 65536 --num-experts 8 "
                      "--moe-aux-loss-coeff 0.01 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss "
                      "--norm-epsilon 1e-5 --rotary-percent 1.0 --rotary-base 1000000 "
                      "--untie-embeddings-and-output-weights --make-vocab-size-divisible-by 128"),
    # gpt-oss's --max-position-embeddings 40960 there is the post-training length; the model's is 131072
    # (Megatron-Bridge GPTOSSProvider.seq_length), so it is left out.
    "gpt-oss-120b": (f"{MLM}:examples/post_training/modelopt/conf/openai/gpt-oss-120b.sh",
                     "--untie-embeddings-and-output-weights --normalization RMSNorm --num-layers 36 "
                     "--hidden-size 2880 --ffn-hidden-size 2880 --num-attention-heads 64 --group-query-attention "
                     "--num-query-groups 8 --kv-channels 64 --num-experts 128 --moe-ffn-hidden-size 2880 "
                     "--moe-router-dtype fp32 --moe-router-topk 4 --moe-aux-loss-coeff 0.0 "
                     "--moe-router-score-function softmax --moe-router-load-balancing-type aux_loss "
                     "--make-vocab-size-divisible-by 128 --rotary-percent 1.0 --rotary-base 150000 "
                     "--vocab-size 201088 --quick-geglu --glu-linear-offset 1.0 --softmax-type learnable "
                     "--window-attn-skip-freq 2 --activation-func-clamp-value 7.0 --window-size 127,0"),
    "llama3-8b": (f"{BRIDGE}:src/megatron/bridge/models/llama/llama_provider.py (Llama3ModelProvider8B, as flags)",
                  "--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
                  "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 "
                  "--norm-epsilon 1e-5 --rotary-percent 1.0 --rotary-base 500000 --num-layers 32 "
                  "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32"),
    "llama3.1-70b": (f"{BRIDGE}:src/megatron/bridge/models/llama/llama_provider.py (Llama31ModelProvider70B, as flags)",
                     LLAMA31 + " --num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64"),
    "llama3.1-405b": (f"{BRIDGE}:src/megatron/bridge/models/llama/llama_provider.py (Llama31ModelProvider405B, as flags)",
                      LLAMA31 + " --num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 "
                                "--num-attention-heads 128"),
}


def flag_values(args: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    i = 0
    while i < len(args):
        flag, values = args[i], []
        i += 1
        while i < len(args) and not args[i].startswith("--"):
            values.append(args[i])
            i += 1
        out[flag] = True if not values else values[0] if len(values) == 1 else values
    return out


def same(a: object, b: object) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def test_every_zoo_model_has_a_recipe():
    assert sorted(RECIPES) == model_names()


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_emitted_architecture_matches_the_published_recipe(name):
    source, recipe = RECIPES[name]
    emitted = flag_values(model_args(load_model(name)))
    if "--ffn-hidden-size" in emitted or "--moe-ffn-hidden-size" not in emitted:
        effective_ffn = emitted.get("--ffn-hidden-size")
    else:  # all-MoE models: the experts' width is the FFN width the example gives
        effective_ffn = emitted["--moe-ffn-hidden-size"]
    wrong = []
    for flag, value in flag_values(shlex.split(recipe)).items():
        got = effective_ffn if flag == "--ffn-hidden-size" else emitted.get(flag)
        if got is None or not same(got, value):
            wrong.append(f"{flag}: recipe {value!r}, emitted {got!r}")
    assert wrong == [], f"{name} vs {source}: " + "; ".join(wrong)
