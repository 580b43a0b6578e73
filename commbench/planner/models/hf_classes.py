"""Which Hugging Face classes each model_type the planner reads is built by, so that a config.json whose
`architectures` names another class is refused rather than planned as model_type's network.

transformers builds a checkpoint from `model_type` (AutoConfig) while the class in `architectures` says which model
the weights are: a config whose class belongs to another model (Arctic's ArcticForCausalLM, MiniMax's
MiniMaxForCausalLM, dots.llm1's Dots1ForCausalLM, Ling's BailingMoeForCausalLM) under a model_type the planner
reads (mixtral, deepseek_v3, qwen2_moe) would be planned as that type's network, losing what the other model has
(Arctic's dense residual MLP, MiniMax's lightning attention). The class says which model is trained.

Sources: transformers src/transformers/models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (commit
001002320fa0, the version read here: llama, qwen2, qwen3, mistral, phi3, qwen2_moe, qwen3_moe, mixtral, gpt_oss,
deepseek_v2, deepseek_v3, glm4_moe, qwen3_next); the types added after it, as transformers 5.25.0 names their
classes (modeling_<type>.py, the release hf_config.py cites): glm4_moe_lite Glm4MoeLiteForCausalLM, deepseek_v4
DeepseekV4ForCausalLM, nemotron_h NemotronHForCausalLM, qwen3_5 / qwen3_5_moe (the vision-language
*ForConditionalGeneration of MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, whose language model the README documents
planning, and the text-only *ForCausalLM). kimi_k2 is not a transformers type: Kimi-K2's config.json names
DeepseekV3ForCausalLM (its remote code, modeling_deepseek.py, is DeepSeek-V3's), as the tests/data/hf copy does.
"""

from __future__ import annotations

from typing import Any

MODEL_CLASSES: dict[str, tuple[str, ...]] = {
    "llama": ("LlamaForCausalLM",),
    "qwen2": ("Qwen2ForCausalLM",),
    "qwen3": ("Qwen3ForCausalLM",),
    "mistral": ("MistralForCausalLM",),
    "phi3": ("Phi3ForCausalLM",),
    "qwen2_moe": ("Qwen2MoeForCausalLM",),
    "qwen3_moe": ("Qwen3MoeForCausalLM",),
    "mixtral": ("MixtralForCausalLM",),
    "gpt_oss": ("GptOssForCausalLM",),
    "deepseek_v2": ("DeepseekV2ForCausalLM",),
    "deepseek_v3": ("DeepseekV3ForCausalLM",),
    "kimi_k2": ("DeepseekV3ForCausalLM",),
    "glm4_moe_lite": ("Glm4MoeLiteForCausalLM",),
    "deepseek_v4": ("DeepseekV4ForCausalLM",),
    "glm4_moe": ("Glm4MoeForCausalLM",),
    "nemotron_h": ("NemotronHForCausalLM",),
    "qwen3_next": ("Qwen3NextForCausalLM",),
    "qwen3_5_moe": ("Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"),
    "qwen3_5": ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
}


def class_refusal(architectures: Any, model_type: str) -> str | None:
    """What to say where config.json's `architectures` names a class that is not one of model_type's (None: every
    class is model_type's, or the config names none). `architectures` is a list of strings (hf_task.head_refusal)."""
    if not isinstance(architectures, list) or model_type not in MODEL_CLASSES:
        return None
    own = MODEL_CLASSES[model_type]
    for name in architectures:
        if name in own:
            continue
        others = sorted(t for t, classes in MODEL_CLASSES.items() if name in classes)
        whose = (f"the class of model_type {' / '.join(map(repr, others))}" if others else
                 "another model's, which the planner does not read")
        return (f"architectures={architectures!r} is not modelled for model_type={model_type!r}: {name} is not a "
                f"class of model_type {model_type!r} (which has {', '.join(own)}) but {whose}, so planning it as model_type "
                f"{model_type!r} would plan another model; give the model_type and class of one model")
    return None
