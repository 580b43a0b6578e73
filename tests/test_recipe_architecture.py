"""Per zoo model: the architecture flags the Megatron-LM emitter writes against the framework's own
published recipe or example for that model (each transcribed below with its file and commit).

Only architecture flags are compared (sizes, activation, norms, rotary, attention variant, router,
vocabulary); fusion switches, tokenizer, data, batch and parallelism flags of the examples are not
architecture. Where an example names a flag by another spelling, the effective value is compared
(Mixtral's example sets --ffn-hidden-size, which Megatron uses as the experts' width when
--moe-ffn-hidden-size is absent; Megatron-LM's newer --hybrid-layer-pattern is core_v0.16.1's
--hybrid-override-pattern). A model whose example builds it without its MTP layer (Nemotron-3 Super:
ModelOpt's example has no --mtp-num-layers, and core_v0.16.1's MambaModel builds none, so the emitter
refuses the whole model) is compared without it, and the refusal is checked.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from commbench.errors import CommbenchError
from commbench.planner.emit.megatron import model_args
from commbench.planner.models.zoo import load_model, model_names
from tests.megatron_lm import argv_values

MLM = "NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553"
BRIDGE = "NVIDIA-NeMo/Megatron-Bridge@dc805f5cf9e0001c1f7c860ebb8e42c580ef45b3"
BRIDGE_HYBRID = "NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a"
NEMO = "NVIDIA/NeMo@02f25a80bb783e04558303bed0d967bbcc486bdb"

QWEN3_COMMON = ("--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
                "--normalization RMSNorm --swiglu --group-query-attention --num-query-groups 4 --kv-channels 128 "
                "--qk-layernorm --num-experts 128 --moe-router-topk 8 --moe-router-dtype fp32 --moe-aux-loss-coeff 1e-3 "
                "--moe-router-load-balancing-type aux_loss --max-position-embeddings 40960 "
                "--rotary-percent 1.0 --rotary-base 1000000")
# The ModelOpt examples' --make-vocab-size-divisible-by 1187 (151936 = 128 x 1187: an unpadded export) is left
# out: the zoo pads as Megatron-Bridge's Qwen3 MoE providers, whose published runs it models, train it (128:
# test_qwen3_pads_its_vocabulary_as_megatron_bridge_trains_it).
NANO_FLAGS = (
    "--is-hybrid-model --hybrid-override-pattern MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME "
    "--num-layers 52 --hidden-size 2688 --mamba-num-heads 64 --kv-channels 128 --mamba-state-dim 128 "
    "--ffn-hidden-size 1856 --num-attention-heads 32 --mamba-head-dim 64 --group-query-attention "
    "--num-query-groups 2 --num-experts 128 --moe-ffn-hidden-size 1856 "
    "--moe-shared-expert-intermediate-size 3712 --moe-router-topk 6 --moe-router-topk-scaling-factor 2.5 "
    "--mamba-num-groups 8 --make-vocab-size-divisible-by 128 --squared-relu --moe-aux-loss-coeff 1e-4 "
    "--moe-router-score-function sigmoid --moe-router-enable-expert-bias "
    "--moe-router-load-balancing-type seq_aux_loss --moe-router-dtype fp32 "
    "--untie-embeddings-and-output-weights --position-embedding-type none --normalization RMSNorm "
    "--disable-bias-linear --norm-epsilon 1e-5")
GPT_OSS = ("--untie-embeddings-and-output-weights --normalization RMSNorm --num-layers {layers} "
           "--hidden-size 2880 --ffn-hidden-size 2880 --num-attention-heads 64 --group-query-attention "
           "--num-query-groups 8 --kv-channels 64 --num-experts {experts} --moe-ffn-hidden-size 2880 "
           "--moe-router-dtype fp32 --moe-router-topk 4 --moe-aux-loss-coeff 0.0 "
           "--moe-router-score-function softmax --moe-router-load-balancing-type aux_loss "
           "--make-vocab-size-divisible-by 128 --rotary-percent 1.0 --rotary-base 150000 "
           "--vocab-size 201088 --quick-geglu --glu-linear-offset 1.0 --softmax-type learnable "
           "--window-attn-skip-freq 2 --activation-func-clamp-value 7.0 --window-size 127,0")
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
                     GPT_OSS.format(layers=36, experts=128)),
    # gpt-oss-20b's script differs from 120b's in --num-layers and --num-experts only.
    "gpt-oss-20b": (f"{MLM}:examples/post_training/modelopt/conf/openai/gpt-oss-20b.sh",
                    GPT_OSS.format(layers=24, experts=32)),
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
    # Kimi-K2: left out are --kv-channels 128 (unused with MLA: the heads' widths are --qk-head-dim,
    # --qk-pos-emb-head-dim, --v-head-dim; the emitter writes none for MLA, nor does DeepSeek-R1.sh),
    # --moe-aux-loss-coeff 1e-4 (this post-training example's; Megatron-Bridge's KimiK2Bridge, the zoo's
    # source, sets 1e-3) and --make-vocab-size-divisible-by 1 (the example pads the vocabulary itself with
    # --padded-vocab-size 163840, compared as --vocab-size: 163840 is a multiple of 1280 x TP up to TP 128).
    # The example states no --norm-epsilon (KimiK2Provider at BRIDGE: 1e-6) and no group routing.
    "kimi-k2": (f"{MLM}:examples/post_training/modelopt/conf/moonshotai/Kimi-K2-Instruct.sh",
                "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
                "--normalization RMSNorm --swiglu --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 "
                "--num-attention-heads 64 --multi-latent-attention --kv-lora-rank 512 --v-head-dim 128 "
                "--q-lora-rank 1536 --qk-head-dim 128 --qk-layernorm --qk-pos-emb-head-dim 64 --num-experts 384 "
                "--moe-layer-freq [0]*1+[1]*60 --moe-ffn-hidden-size 2048 --moe-router-dtype fp32 "
                "--moe-router-score-function sigmoid --moe-router-bias-update-rate 1e-3 "
                "--moe-router-enable-expert-bias --moe-router-topk 8 --moe-router-pre-softmax "
                "--moe-router-topk-scaling-factor 2.827 --moe-shared-expert-intermediate-size 2048 "
                "--moe-router-load-balancing-type seq_aux_loss --max-position-embeddings 131072 "
                "--rotary-base 50000 --rotary-percent 1.0 --rotary-scaling-factor 32 --mscale 1.0 "
                "--mscale-all-dim 1.0 --vocab-size 163840"),
    # Nemotron-3 Nano: the recipe's HybridModelProvider(...) with the provider's defaults (untied embeddings,
    # no position embedding, RMSNorm eps 1e-5, no biases). Left out: moe_router_num_groups = group_topk = 1
    # (one group is no group limit; the emitter writes no group flags) and seq_length (not architecture);
    # the recipe states no vocabulary size (the tokenizer's).
    "nemotron-3-nano-30b-a3b": (
        f"{BRIDGE_HYBRID}:src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py "
        "(nemotron_3_nano_pretrain_8gpu_h100_bf16_config's HybridModelProvider) + "
        "src/megatron/bridge/models/hybrid/hybrid_provider.py (HybridModelProvider defaults), as flags",
        NANO_FLAGS),
    # Nemotron-3.5 Lightning: Megatron-Bridge's performance recipes build it from Nano's (the same flags) and add
    # its two MTP depths, which core_v0.16.1's MambaModel cannot build (BUILT_WITHOUT_MTP).
    "nemotron-3.5-lightning-30b-a3b": (
        f"{BRIDGE_HYBRID}:src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py "
        "(_build_nemotron_3_5_lightning_gb200_mxfp8: the Nano recipe + mtp_num_layers 2), as Nano's flags",
        NANO_FLAGS),
    # Nemotron-3 Super: Megatron-Bridge builds it only from its config.json (AutoBridge), so the flags are
    # Megatron-LM's example's. Left out: --max-position-embeddings 8192 (the example's sequence length; no
    # position embedding is used). The example states no --num-layers (the pattern's 88), Mamba state dim
    # or groups, --norm-epsilon or vocabulary.
    "nemotron-3-super-120b-a12b": (
        f"{MLM}:examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh",
        "--num-experts 512 --moe-router-score-function sigmoid --moe-aux-loss-coeff 1e-4 --moe-router-topk 22 "
        "--moe-router-topk-scaling-factor 5.0 --moe-router-enable-expert-bias --moe-router-dtype fp32 "
        "--moe-router-load-balancing-type seq_aux_loss --moe-shared-expert-intermediate-size 5376 "
        "--moe-latent-size 1024 --is-hybrid-model --mamba-num-heads 128 --mamba-head-dim 64 "
        "--hybrid-layer-pattern MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME "
        "--untie-embeddings-and-output-weights --disable-bias-linear --position-embedding-type none "
        "--squared-relu --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
        "--num-query-groups 2 --ffn-hidden-size 2688 --kv-channels 128 --normalization RMSNorm"),
    "nemotron-3-ultra-550b-a55b": (
        f"{MLM}:examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.sh",
        "--moe-latent-size 2048 --moe-router-score-function sigmoid --num-experts 512 --moe-router-topk 22 "
        "--moe-shared-expert-intermediate-size 10240 --moe-aux-loss-coeff 1e-4 --moe-router-topk-scaling-factor 5.0 "
        "--moe-router-enable-expert-bias --moe-router-dtype fp32 --moe-router-load-balancing-type seq_aux_loss "
        "--is-hybrid-model --mamba-num-heads 256 --mamba-head-dim 64 "
        "--hybrid-override-pattern MEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM"
        "*EMEMEM*EMEMEMEM*EMEMEMEME "
        "--untie-embeddings-and-output-weights --disable-bias-linear --position-embedding-type none "
        "--squared-relu --num-layers 108 --hidden-size 8192 --num-attention-heads 64 --group-query-attention "
        "--num-query-groups 2 --ffn-hidden-size 5120 --kv-channels 128 --normalization RMSNorm"),
    # Qwen3-Next: left out are ffn_hidden_size 5120 (no layer has a dense MLP: config.json mlp_only_layers is
    # empty) and max_position_embeddings (inherited from Qwen3MoEModelProvider's 40960 while seq_length is
    # 262144); rotary_base 10000000 is the provider's and the release config.json's rope_theta (the zoo had
    # Qwen3-Coder-Next's 5000000: Megatron-MoE-ModelZoo e865051 Qwen3-Next-80B-A3B.yaml:53 --rotary-base 10000000).
    "qwen3-next-80b-a3b": (
        f"{BRIDGE}:src/megatron/bridge/models/qwen/qwen_provider.py (Qwen3NextModelProvider80B_A3B + "
        "Qwen3NextModelProvider + Qwen3MoEModelProvider, as flags)",
        "--normalization RMSNorm --swiglu --disable-bias-linear --qk-layernorm --untie-embeddings-and-output-weights "
        "--norm-epsilon 1e-6 --position-embedding-type rope --vocab-size 151936 --apply-layernorm-1p "
        "--group-query-attention --num-query-groups 2 --kv-channels 256 --rotary-percent 0.25 --rotary-base 10000000 "
        "--attention-output-gate --num-experts 512 --moe-router-topk 10 --moe-shared-expert-gate "
        "--moe-router-dtype fp32 --moe-router-load-balancing-type global_aux_loss --moe-aux-loss-coeff 1e-3 "
        "--experimental-attention-variant gated_delta_net --linear-attention-freq 4 --linear-conv-kernel-dim 4 "
        "--linear-key-head-dim 128 --linear-value-head-dim 128 --linear-num-key-heads 16 "
        "--linear-num-value-heads 32 --num-layers 48 --hidden-size 2048 --num-attention-heads 16 "
        "--moe-ffn-hidden-size 512 --moe-shared-expert-intermediate-size 512"),
}


# an example's newer spelling -> the one Megatron-LM core_v0.16.1 (the emitter's target) takes
SPELLINGS = {"--hybrid-layer-pattern": "--hybrid-override-pattern"}
BUILT_WITHOUT_MTP = ("nemotron-3-super-120b-a12b", "nemotron-3-ultra-550b-a55b", "nemotron-3.5-lightning-30b-a3b")


def flag_values(args: list[str]) -> dict[str, object]:
    """{"--flag": True | its one value | its values} with the spellings the recipes use mapped to ours."""
    return {SPELLINGS.get(flag, flag): True if not values else values[0] if len(values) == 1 else values
            for flag, values in argv_values(args).items()}


def same(a: object, b: object) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


# Models Megatron-LM core_v0.16.1 has no building block for (DeepSeek-V4's dsv4_hybrid attention and
# hyper-connections are Megatron-Core development code): no example to check flags against, a one-line refusal.
NO_MEGATRON_LM_BUILD = ("deepseek-v4-flash",)


def test_every_zoo_model_has_a_recipe():
    assert sorted(RECIPES) == [n for n in model_names() if n not in NO_MEGATRON_LM_BUILD]


@pytest.mark.parametrize("name", NO_MEGATRON_LM_BUILD)
def test_a_model_megatron_lm_cannot_build_is_one_line(name):
    with pytest.raises(CommbenchError, match=r"^Megatron-LM core_v0.16.1 cannot build deepseek-v4-flash: its hybrid "
                                             r"compressed attention[^\n]*$"):
        model_args(load_model(name))


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_emitted_architecture_matches_the_published_recipe(name):
    source, recipe = RECIPES[name]
    model = load_model(name)
    if name in BUILT_WITHOUT_MTP:
        with pytest.raises(CommbenchError, match="builds no MTP"):
            model_args(model)
        model = replace(model, num_mtp_layers=0)
    # gpt-oss's YaRN on GQA attention: only megatron-core 0.19.0's pretrain_gpt.py builds it (release 26.08)
    from commbench.planner.emit.megatron import needs_release_flags
    emitted = flag_values(model_args(model, release="26.08" if needs_release_flags(model) else None))
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


def test_kimi_k2_yarn_beta_fast_without_a_megatron_flag_is_said_in_the_plan_notes():
    """Kimi-K2 trains YaRN with beta_fast = 1; megatron-core 0.16.1's MLATransformerConfig keeps 32 and
    Megatron-LM core_v0.16.1 parses no flag for it: the plan's notes say so instead of a silent other RoPE."""
    import os
    from pathlib import Path
    from commbench.planner.emit.plan import megatron_section
    from commbench.planner.layout.spec import Layout
    kimi = load_model("kimi-k2")
    section = megatron_section(Layout(tp=1, pp=16, ep=64, etp=1, dp=64, mbs=1, gbs=4096), kimi,
                               gpu_name="h100", fabric_name="h100-hgx")
    assert any("beta_fast = 1 (megatron-core uses 32)" in n for n in section["notes"])
    assert not any("beta" in a for a in section.get("args", []))
    deepseek = load_model("deepseek-v3")  # its betas are megatron-core's own: nothing to say
    assert not any("beta_fast" in n for n in megatron_section(
        Layout(tp=1, pp=16, ep=64, etp=1, dp=64, mbs=1, gbs=4096), deepseek, gpu_name="h100",
        fabric_name="h100-hgx")["notes"])
    root = os.environ.get("MEGATRON_LM_ROOT")
    if root:  # the claim itself, on the release's own argument parser
        text = (Path(root) / "megatron" / "training" / "arguments.py").read_text()
        assert "--beta-fast" not in text and "--yarn-beta-fast" not in text
        mcore = pytest.importorskip("megatron.core.transformer.transformer_config")
        assert mcore.MLATransformerConfig.__dataclass_fields__["beta_fast"].default == 32


def test_an_mla_yarn_original_context_other_than_megatron_cores_is_said_in_the_plan_notes():
    """A DeepSeek-V2/V3-style config with rope_scaling.original_max_position_embeddings 8192: megatron-core 0.16.1's
    MLATransformerConfig keeps 4096 and Megatron-LM core_v0.16.1 has no flag for it, so pretrain_gpt.py trains YaRN
    over another context; the plan said nothing (found from outside)."""
    import dataclasses
    from commbench.planner.emit.plan import megatron_section
    from commbench.planner.layout.spec import Layout
    deepseek = load_model("deepseek-v3")
    longer = dataclasses.replace(deepseek, architecture=dataclasses.replace(deepseek.architecture,
                                                                           rope_original_max_positions=8192))
    layout = Layout(tp=1, pp=16, ep=64, etp=1, dp=64, mbs=1, gbs=4096)
    notes = megatron_section(layout, longer, gpu_name="h100", fabric_name="h100-hgx")["notes"]
    assert any("original_max_position_embeddings = 8192 (megatron-core uses 4096)" in n
               and "MLATransformerConfig.original_max_position_embeddings" in n for n in notes)
    assert not any("original_max_position_embeddings" in n
                   for n in megatron_section(layout, deepseek, gpu_name="h100", fabric_name="h100-hgx")["notes"])
    mcore = pytest.importorskip("megatron.core.transformer.transformer_config")
    assert mcore.MLATransformerConfig.__dataclass_fields__["original_max_position_embeddings"].default == 4096


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "qwen3-235b-a22b"])
def test_qwen3_keeps_its_vocabulary_at_every_tp_as_megatron_bridge_builds_it(name):
    """Megatron-Bridge (v0.3.0 .. v0.6.0 training/setup.py _validate_and_set_vocab_size): a provider's explicit
    vocab_size (Qwen3MoEModelProvider 151936) gives should_pad_vocab False, and gpt_provider.py builds 151,936 rows at
    every TP; its divisor is 128 (GPTModelProvider, model_bridge.make_vocab_size_divisible_by(151936)). The plan passed
    128 at every TP, so Megatron-LM's pretrain_gpt.py padded to 128 x TP (152,064 rows at TP2, priced so, said
    nowhere); it now passes 128 / TP where that keeps 151,936 (models/counts.megatron_vocab_divisor)."""
    from commbench.planner.models.counts import megatron_vocab_divisor, step_vocab

    model = load_model(name)
    assert model.architecture.vocab_divisible_by == 128
    for tp, divisor in ((1, 128), (2, 64), (4, 32), (8, 16)):
        assert flag_values(model_args(model, tp=tp))["--make-vocab-size-divisible-by"] == str(divisor)
        assert megatron_vocab_divisor(model, tp) == divisor and step_vocab(model, tp, "megatron") == 151_936
