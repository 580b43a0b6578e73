"""Which zoo model's Megatron-Bridge recipes a model reads (layout/recipes.py is keyed by zoo name).

A zoo model reads its own. A model read elsewhere (hf:PATH, a --model-file name no recipe has) reads the recipes of
the zoo model whose network it is: equal in every ModelSpec field (layers, dense layers, hidden, heads, kv heads,
head dims, MLA ranks, experts, top-k, shared experts, expert and dense FFN, MTP layers, vocabulary, window, hybrid
pattern, ...) and every Architecture field the layers are built from (activation, norms, qk-norm, biases, position
embedding kind and rotary fraction, attention window and sinks, router score / groups / expert bias / dtype,
capacity factor, shared-expert gate, dropout). These are what the step model charges (step/,
models/counts.py) and what a recipe's parallel layout was tuned for. Ignored (MATCH_IGNORED_*): fields that change
numbers inside the same computation, not its shape or cost, and that no recipe setting depends on:
- RoPE frequencies (rotary base, scaling kind and factor, YaRN / Llama 3.1 band parameters) and max positions: a
  rotary table of the same shape (megatron-core RotaryEmbedding), and max positions only sizes it; e.g. Kimi-K2's
  own config.json (rope_theta 50000) and Qwen3-30B-A3B-Instruct-2507's (rope_theta 1e7, 262144 positions);
- norm epsilon, router top-k scaling, bias update rate: scalars of the same kernels;
- the load-balancing loss and its coefficient: a term of the training loss, not a layer, and the step model charges
  none (gpt-oss-120b's config.json, output_router_logits false, reads "none"; the zoo's, as its recipe trains,
  aux_loss);
- vocab_divisible_by (--make-vocab-size-divisible-by): a launch setting no config.json carries; the plan prices and
  emits the model's own padding;
- the model's default seq_len (a plan's --seq-len is the request's), published sizes, name, sources.
Like the TorchTitan emitter's flavor matching (search/frameworks.py titan_zoo_name), which matches on sizes too.
"""

from __future__ import annotations

import dataclasses
import functools

from commbench.planner.models.spec import ModelSpec

MATCH_IGNORED_SPEC = ("name", "seq_len", "published_params_total_b", "published_params_active_b",
                      "published_flops_per_token_gflop", "architecture", "extra", "hybrid_uneven_split",
                      "gdn_context_parallel", "pinned_split", "hybrid_pipe_segments")
MATCH_IGNORED_ARCH = ("rotary_base", "rope_scaling", "rope_scaling_factor", "rope_original_max_positions",
                      "llama3_low_freq_factor", "llama3_high_freq_factor", "llama3_original_positions",
                      "yarn_beta_fast", "yarn_beta_slow", "yarn_mscale", "yarn_mscale_all_dim",
                      "max_position_embeddings", "norm_epsilon", "router_topk_scaling", "router_bias_update_rate",
                      "load_balancing", "aux_loss_coeff", "vocab_divisible_by", "sources")


def recipe_models() -> tuple[str, ...]:
    """The zoo names the recipe table has entries for, sorted."""
    from commbench.planner.layout.recipes import _usable
    return tuple(sorted({e["model"] for e in _usable()}))


def _fields(cls, ignored: tuple[str, ...]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in ignored]


def structural_differences(model: ModelSpec, other: ModelSpec) -> list[str]:
    """'field value (other: value)' for each field the match compares where `model` is not `other` (['architecture
    not recorded'] where either has none: equality cannot be shown)."""
    if model.architecture is None or other.architecture is None:
        return ["architecture not recorded"]
    out = [f"{k} {getattr(model, k)!r} ({other.name}: {getattr(other, k)!r})"
           for k in _fields(ModelSpec, MATCH_IGNORED_SPEC) if getattr(model, k) != getattr(other, k)]
    a, b = model.architecture, other.architecture
    return out + [f"architecture.{k} {getattr(a, k)!r} ({other.name}: {getattr(b, k)!r})"
                  for k in _fields(type(a), MATCH_IGNORED_ARCH) if getattr(a, k) != getattr(b, k)]


def ignored_differences(model: ModelSpec, other: ModelSpec) -> list[str]:
    """'field value (other: value)' for each ignored Architecture field (MATCH_IGNORED_ARCH) where they differ."""
    a, b = model.architecture, other.architecture
    return [f"{k} {getattr(a, k)!r} ({other.name}: {getattr(b, k)!r})" for k in MATCH_IGNORED_ARCH
            if k != "sources" and getattr(a, k) != getattr(b, k)]


@functools.lru_cache(maxsize=64)
def recipe_match(model: ModelSpec) -> tuple[str, tuple[str, ...]]:
    """(the zoo name whose recipes `model` reads, the ignored fields in which it differs from that model). A model
    named as a recipe model reads its own (the zoo's, or a --model-file's override of it, as before); any other reads
    the recipe model it equals structurally (structural_differences empty), else its own name (no recipe)."""
    from commbench.planner.models.zoo import load_model
    names = recipe_models()
    if model.name in names:
        return model.name, ()
    for name in names:
        zoo = load_model(name)
        if not structural_differences(model, zoo):
            return name, tuple(ignored_differences(model, zoo))
    return model.name, ()


def recipe_model(model: ModelSpec) -> str:
    """The zoo name whose Megatron-Bridge recipes `model` reads (recipe_match)."""
    return recipe_match(model)[0]


def recipe_model_line(model: ModelSpec, release: str) -> str:
    """The plan's line saying whose recipes a model read elsewhere reads, and why ('' for a model that reads its
    own name's)."""
    name, ignored = recipe_match(model)
    if name == model.name:
        return ""
    also = (f"; it differs only in fields the match ignores, layout/recipe_model.py: {', '.join(ignored)}" if ignored
            else "; it differs in no architecture field")
    return (f"{model.name} has {name}'s architecture (the same in every size and layer field the step model charges "
            f"and a recipe is tuned for{also}): the plan reads Megatron-Bridge {release}'s recipes for {name} where "
            "they cover the request (the features searched, the default global batch and NVIDIA's tuned layout).")


__all__ = ["MATCH_IGNORED_ARCH", "MATCH_IGNORED_SPEC", "recipe_match", "recipe_model", "recipe_model_line",
           "recipe_models", "structural_differences"]


def recipe_seq_len(name: str) -> int | None:
    """The sequence length the zoo model `name`'s Megatron-Bridge recipes train at, or None (no recipes): its
    models.toml seq_len, which is its recipes' cfg.model.seq_length (Megatron-Bridge src/megatron/bridge/recipes:
    llama/*/llama3.py 8192; deepseek/*/deepseek_v3.py, qwen/*, gpt_oss/*/gpt_oss.py, kimi/*/kimi_k2.py 4096; and the
    published runs of those recipes in calibration-runs.json ran at it). A recipe's layout and global batch were
    tuned at that length (search/recipe_gap.py compares them only there)."""
    if name not in recipe_models():
        return None
    from commbench.planner.models.zoo import load_model
    return load_model(name).seq_len


def sequence_length(model: ModelSpec, given: int | None) -> tuple[int, str | None]:
    """(the sequence length a plan uses, None) for a --seq-len given, else (the model's default, the line saying it
    was defaulted, where the default comes from and, where the model reads recipes that train at another length,
    that length)."""
    if given is not None:
        return given, None
    seq = model.seq_len
    if model.name.lower().startswith("hf:"):
        from commbench.planner.models.hf_config import DEFAULT_SEQ_LEN
        why = (f"an hf: config.json holds the context window, not a training length, so the default is "
               f"{DEFAULT_SEQ_LEN} (models/hf_config.py)")
    else:
        why = f"{model.name}'s seq_len"
    name = recipe_model(model)
    theirs = recipe_seq_len(name)
    if theirs == seq:
        why += ", the length its Megatron-Bridge recipes train at"
    elif theirs is not None:
        whose = name if name == model.name else f"{name}, whose architecture {model.name} has,"
        why += (f"; Megatron-Bridge's recipes for {whose} train at {theirs} (their layout and global batch were "
                f"tuned there: --seq-len {theirs} plans at it)")
    return seq, f"seq_len {seq} (default; --seq-len to change): {why}"
