"""What model a Hugging Face config.json is, beyond its decoder's sizes: its head (`architectures`) and whether the
model trained has other parts than the language model (a vision or audio encoder beside a `text_config`).

The planner charges, and Megatron-LM's pretrain_gpt.py / pretrain_mamba.py and TorchTitan's decoders train, a causal
language model: the decoder, a vocabulary-wide output layer and the next-token loss. A config whose
`architectures` names another head (LlamaForSequenceClassification: a `score` layer of num_labels outputs; a
reward model; a token classifier) is another model, refused by name. A config with a vision (or audio) part is a
multimodal model: its text_config's decoder alone is not what is trained (the encoder's parameters, memory and
compute, and the projector feeding its features into the decoder, have no step-model term), so it is refused, as
Qwen3-VL is (hf_refused.py); the one exception is Qwen3.5, whose language model the README documents planning alone
(TEXT_ONLY_TYPES): planned, with a note saying what the plan leaves out.
"""

from __future__ import annotations

from typing import Any

from commbench.errors import CommbenchError

# Class-name endings of a causal language model's head (transformers: LlamaForCausalLM, Qwen3_5ForConditionalGeneration
# -- the vision-language class that holds the causal LM head -- and the older GPT2LMHeadModel form).
CAUSAL_LM_HEADS = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
# Top-level model types whose vision-language config.json the README documents planning as its language model alone
# ("qwen3_5_moe and qwen3_5 (Qwen3.5 MoE and dense; a vision-language config's text_config)").
TEXT_ONLY_TYPES = ("qwen3_5", "qwen3_5_moe")
# A top-level key naming one of these, holding an object (vision_config, audio_config, ...) or ending in _tower /
# _encoder (LLaVA's older mm_vision_tower), is another modality's part of the model.
MODALITY_WORDS = ("vision", "visual", "image", "video", "audio", "speech")


def head_refusal(raw: dict[str, Any], where: str) -> None:
    """One line where config.json's `architectures` names a head other than a causal language model's."""
    archs = raw.get("architectures")
    if archs is None:
        return
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise CommbenchError(f"{where}: architectures={archs!r} is invalid: a list of class names")
    other = [a for a in archs if not a.endswith(CAUSAL_LM_HEADS)]
    if other:
        raise CommbenchError(
            f"{where}: architectures={archs!r} is not modelled: {other[0]} is not a causal language model (its head "
            "is not the vocabulary-wide output layer and next-token loss the plan charges and pretrain_gpt.py "
            "trains); a *ForCausalLM or *ForConditionalGeneration class is read")


def modality_parts(raw: dict[str, Any]) -> list[str]:
    """The top-level keys of config.json that hold another modality's part of the model (a vision or audio encoder)."""
    return [key for key, value in raw.items() if any(word in key.lower() for word in MODALITY_WORDS)
            and (isinstance(value, dict) or (key.endswith(("_tower", "_encoder")) and value))]


def multimodal_notes(raw: dict[str, Any], where: str, name: str) -> list[str]:
    """Refuse a multimodal config (one line naming the model_type and the keys that say so) unless its type is in
    TEXT_ONLY_TYPES; for those, the plan notes saying its language model alone is planned. [] for a text model."""
    parts = modality_parts(raw)
    top = str(raw.get("model_type", ""))
    text = raw.get("text_config")
    if not parts and not (top in TEXT_ONLY_TYPES and isinstance(text, dict)):
        return []
    shown = ", ".join(parts)
    if top not in TEXT_ONLY_TYPES:
        inner = f" ({text.get('model_type')!r})" if isinstance(text, dict) and text.get("model_type") else ""
        raise CommbenchError(
            f"{where}: model_type={top!r} is not modelled: a multimodal model (config.json has {shown}): its "
            f"text_config's decoder{inner} alone is not the model trained (the encoder's parameters, memory and "
            "compute and the projector feeding its features to the decoder have no step-model term), so it is not "
            f"planned as a text model (the language model alone is planned only for model_type "
            f"{' and '.join(TEXT_ONLY_TYPES)}, as documented)")
    left_out = f" ({shown})" if parts else ""
    return [f"{name} (model_type {top!r}) is planned as its language model alone (config.json's text_config): the "
            f"vision encoder{left_out} and its features' merger into the decoder are not in this plan's predicted step "
            "time, memory or parameters, and the launch trains the language model only"]
