"""Parameter counts equal, to the parameter, what the Hugging Face transformers module of each architecture creates
(sum(p.numel() for p in model.parameters()) of XForCausalLM built from the config.json in tests/data/hf/), each
derived term by term from the modeling source; buffers (the aux-loss-free router's correction bias) are not
parameters. MTP layers are not built by transformers and are left out of `total` (commbench counts them apart)."""

from pathlib import Path

import pytest

from commbench.planner.models.counts import param_counts
from commbench.planner.models.zoo import load_model

HF = Path(__file__).parent / "data" / "hf"


def _counts(folder: str):
    return param_counts(load_model(f"hf:{HF / folder}"))


def test_qwen3_8b_dense():
    """transformers modeling_qwen3.py (Qwen3-8B: hidden 4096, 36 layers, 32 heads / 8 KV of 128, intermediate 12288,
    vocab 151936, untied). Per layer: Qwen3Attention q/k/v/o_proj without bias (attention_bias false) + q_norm and
    k_norm of head_dim; Qwen3MLP gate/up/down; input_layernorm + post_attention_layernorm. Then embed_tokens,
    lm_head and the final norm."""
    h, heads, kv, d, ffn, vocab, layers = 4096, 32, 8, 128, 12288, 151936, 36
    attention = h * heads * d + 2 * h * kv * d + heads * d * h + 2 * d
    layer = attention + 3 * h * ffn + 2 * h
    total = layers * layer + 2 * vocab * h + h
    assert total == 8_190_735_360
    assert _counts("Qwen3-8B").total == total


def test_qwen3_30b_a3b():
    """transformers modeling_qwen3_moe.py (hidden 2048, 48 layers, 32 heads / 4 KV of 128, 128 experts of 768,
    vocab 151936, untied, every layer MoE). Per layer: Qwen3MoeAttention (no bias) + q_norm, k_norm of head_dim;
    the router Linear(hidden, 128, bias=False); 128 experts of gate/up/down; two norms."""
    h, heads, kv, d, experts, ffn, vocab, layers = 2048, 32, 4, 128, 128, 768, 151936, 48
    attention = h * heads * d + 2 * h * kv * d + heads * d * h + 2 * d
    routed = experts * 3 * h * ffn
    layer = attention + h * experts + routed + 2 * h
    total = layers * layer + 2 * vocab * h + h
    assert total == 30_532_122_624
    p = _counts("Qwen3-30B-A3B")
    assert (p.total, p.expert, p.non_expert) == (total, layers * routed, total - layers * routed)


def test_gpt_oss_120b():
    """transformers modeling_gpt_oss.py (hidden 2880, 36 layers, 64 heads / 8 KV of 64, 128 experts of 2880, vocab
    201088, untied). Per layer: GptOssAttention q/k/v/o_proj with bias (attention_bias true) and sinks (one per head);
    GptOssTopKRouter weight and bias (one per expert); GptOssExperts gate_up_proj (hidden x 2 intermediate) and its
    bias (2 intermediate), down_proj (intermediate x hidden) and its bias (hidden), per expert; two norms. The total
    is the OpenAI model card's 116.83B."""
    h, heads, kv, d, experts, ffn, vocab, layers = 2880, 64, 8, 64, 128, 2880, 201088, 36
    q, kvw = heads * d, kv * d
    attention = (h * q + q) + 2 * (h * kvw + kvw) + (q * h + h) + heads
    router = experts * h + experts
    routed = experts * (h * 2 * ffn + 2 * ffn + ffn * h + h)
    layer = attention + router + routed + 2 * h
    total = layers * layer + 2 * vocab * h + h
    assert total == 116_829_156_672
    p = _counts("gpt-oss-120b")
    assert (p.total, p.expert, p.non_expert) == (total, layers * routed, total - layers * routed)


def test_deepseek_v3():
    """transformers modeling_deepseek_v3.py (hidden 7168, 61 layers of which the first 3 dense of 18432, 128 heads,
    q_lora 1536, kv_lora 512, nope 128 / rope 64 / v 128, 256 routed experts + 1 shared of 2048, vocab 129280,
    untied). DeepseekV3Attention: q_a_proj, q_a_layernorm (q_lora), q_b_proj, kv_a_proj_with_mqa (kv_lora + rope),
    kv_a_layernorm (kv_lora), kv_b_proj, o_proj, no bias (attention_bias false). DeepseekV3TopkRouter: weight only;
    its e_score_correction_bias is register_buffer, not a parameter (the released checkpoint also stores those
    58 x 256 = 14,848 values: 671,026,419,200 tensors' elements). The MTP layer (model.layers.61) is not built
    (_keys_to_ignore_on_load_unexpected)."""
    h, heads, ql, kvl, nope, rope, v = 7168, 128, 1536, 512, 128, 64, 128
    dense, moe_layers, dense_ffn, experts, ffn, vocab = 3, 58, 18432, 256, 2048, 129280
    attention = (h * ql + ql + ql * heads * (nope + rope) + h * (kvl + rope) + kvl + kvl * heads * (nope + v)
                 + heads * v * h)
    routed = experts * 3 * h * ffn
    moe = h * experts + routed + 3 * h * ffn
    total = (dense + moe_layers) * (attention + 2 * h) + dense * 3 * h * dense_ffn + moe_layers * moe \
        + 2 * vocab * h + h
    assert total == 671_026_404_352
    assert total + moe_layers * experts == 671_026_419_200
    p = _counts("DeepSeek-V3")
    assert (p.total, p.routed_experts) == (total, moe_layers * routed)   # p.expert adds the MTP layer's


@pytest.mark.parametrize("folder, total", [
    # transformers modeling_qwen2.py: q/k/v_proj bias=True, o_proj none
    ("Qwen2.5-7B", 7_615_616_512),
    # modeling_qwen2_moe.py: the QKV biases and Qwen2MoeSparseMoeBlock.shared_expert_gate Linear(hidden, 1, bias=False)
    ("Qwen1.5-MoE-A2.7B", 14_315_784_192), ("Qwen2-57B-A14B", 57_408_658_944),
    # modeling_glm4_moe.py: q/k/v bias=attention_bias, q_norm / k_norm with use_qk_norm (GLM-4.5 only), router buffer
    ("GLM-4.5-Air", 106_852_245_504), ("GLM-4.5", 352_797_814_784),
    # modeling_qwen3_next.py / modeling_qwen3_5.py: gated q_proj, q/k norms, the shared expert's gate
    ("Qwen3-Next-80B-A3B-Instruct", 79_674_391_296), ("Qwen3.5-35B-A3B", 34_660_610_688),
    ("Qwen3.5-27B", 26_895_998_464),
])
def test_the_other_biased_and_normed_models_count_their_hf_parameters(folder, total):
    """The totals of the same term-by-term derivation (Qwen3-Next's is also its safetensors' weight count)."""
    assert _counts(folder).total == total


def test_qwen3_coder_480b_a35b():
    """Qwen3-30B-A3B's terms (modeling_qwen3_moe.py) at Qwen3-Coder-480B-A35B's sizes: 62 layers of 6144, 96 / 8 heads of
    128 with q/k norms, every layer MoE (160 experts of 2560, router Linear(hidden, 160), no shared expert), untied."""
    h, heads, kv, d, experts, ffn, vocab, layers = 6144, 96, 8, 128, 160, 2560, 151936, 62
    attention = h * heads * d + 2 * h * kv * d + heads * d * h + 2 * d
    layer = attention + experts * h + experts * 3 * h * ffn + 2 * h
    total = layers * layer + 2 * vocab * h + h
    assert total == 480_154_875_392
    assert _counts("Qwen3-Coder-480B-A35B-Instruct").total == total


def test_llama_3_2_1b_ties_its_output_layer_to_the_input_embedding():
    """modeling_llama.py with tie_word_embeddings true: lm_head shares embed_tokens' weight, counted once (hidden 2048,
    16 layers, 32 / 8 heads of 64, intermediate 8192, vocab 128256): 1,235,814,400, the card's "1.23B"."""
    h, heads, kv, d, ffn, vocab, layers = 2048, 32, 8, 64, 8192, 128256, 16
    layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * ffn + 2 * h
    total = layers * layer + vocab * h + h
    assert total == 1_235_814_400
    assert _counts("Llama-3.2-1B-Instruct").total == total


def test_gpt_oss_20b():
    """gpt-oss-120b's terms (modeling_gpt_oss.py) at gpt-oss-20b's sizes: 24 layers, 32 experts of 2880, vocab
    201088, untied. The total is the model card's 20.91B."""
    h, heads, kv, d, experts, ffn, vocab, layers = 2880, 64, 8, 64, 32, 2880, 201088, 24
    q, kvw = heads * d, kv * d
    attention = (h * q + q) + 2 * (h * kvw + kvw) + (q * h + h) + heads
    routed = experts * (h * 2 * ffn + 2 * ffn + ffn * h + h)
    total = layers * (attention + experts * h + experts + routed + 2 * h) + 2 * vocab * h + h
    assert total == 20_914_757_184
    p = _counts("gpt-oss-20b")
    assert (p.total, p.expert) == (total, layers * routed)


def test_phi_4():
    """transformers 5.25.0 modeling_phi3.py (microsoft/phi-4, model_type phi3: hidden 5120, 40 layers, 40 heads / 10 KV
    of 128, intermediate 17920, vocab 100352, untied). Per layer: Phi3Attention qkv_proj Linear(hidden, heads * d +
    2 * kv * d, bias=False) and o_proj, Phi3MLP gate_up_proj Linear(hidden, 2 * intermediate, bias=False) and
    down_proj, input_layernorm + post_attention_layernorm; then embed_tokens, lm_head and the final norm. The fused
    projections hold Llama's q/k/v and gate/up weights, no more. Phi3ForCausalLM built from this config (on the meta
    device) has 14,659,507,200 parameters; the model card's "14B"."""
    h, heads, kv, d, ffn, vocab, layers = 5120, 40, 10, 128, 17920, 100352, 40
    attention = h * (heads * d + 2 * kv * d) + heads * d * h
    layer = attention + h * 2 * ffn + ffn * h + 2 * h
    total = layers * layer + 2 * vocab * h + h
    assert total == 14_659_507_200
    p = _counts("phi-4")
    assert (p.total, p.expert) == (total, 0)


def test_deepseek_v4_flash():
    """transformers 5.25.0 modeling_deepseek_v4.py DeepseekV4ForCausalLM built on the meta device from
    tests/data/hf/DeepSeek-V4-Flash/config.json: 284,332,230,231 parameters (MTP not built). Its 3 hash-routed
    layers choose experts by token id (tid2eid, a buffer) but keep the learned gate weight (DeepseekV4HashRouter
    .weight, 256 x 4096) that scores them: every one of the 43 MoE layers has a router; commbench counted 40."""
    c = _counts("DeepSeek-V4-Flash")
    assert c.router == 43 * 256 * 4096
    assert c.total == 284_332_230_231


# transformers 5.25.0: AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)) built on the meta device,
# sum(p.numel() for p in model.parameters()) (session 21); the configs not derived term by term above
TRANSFORMERS_5_25_TOTALS = {
    "DeepSeek-V2-Lite": 15_706_484_224, "GLM-4.7-Flash": 29_943_390_976, "Moonlight-16B-A3B": 15_960_108_544,
    "Llama-3.1-8B": 8_030_261_248, "Llama-3.1-70B": 70_553_706_496, "Mistral-Nemo-Base-2407": 12_247_782_400,
    "Mixtral-8x7B-v0.1": 46_702_792_704, "Mixtral-8x22B-v0.1": 140_620_634_112, "Qwen3-235B-A22B": 235_093_634_560,
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 31_577_937_344, "NVIDIA-Nemotron-3-Super-120B-A12B-BF16": 120_668_687_360,
    "Nemotron-H-8B-Base-8K": 8_100_852_736, "Nemotron-H-47B-Base-8K": 46_791_554_816,
    "Nemotron-H-56B-Base-8K": 56_324_350_464, "Qwen3.5-4B": 4_205_751_296, "Qwen3.5-9B": 8_953_803_264,
    "Qwen3.5-122B-A10B": 122_111_526_912, "Qwen3.5-397B-A17B": 396_346_350_336,
}


@pytest.mark.parametrize("folder, total", sorted(TRANSFORMERS_5_25_TOTALS.items()))
def test_every_other_config_counts_what_transformers_builds(folder, total):
    assert _counts(folder).total == total
