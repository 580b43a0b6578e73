"""What selective recompute frees: one table that the Megatron emitter (emit/megatron.py writes --recompute-modules
from it), the memory model (step/memory.py drops the saved tensors it names) and calibration (a log's module set is
compared by what it frees) all read, so the modules a launch runs and the memory the plan credits cannot drift.

The saved tensors are the ones step/memory.py counts that a recompute mode can drop (the rest are kept by every mode
but full). Megatron-LM (megatron-core 0.16.1, transformer_config.py recompute_modules: core_attn, moe_act, layernorm,
mla_up_proj, mlp, moe, shared_experts) frees them per module and per layer spec, the Transformer Engine specs
pretrain_gpt.py / pretrain_mamba.py build (models/gpt/gpt_layer_specs.py, models/mamba/mamba_layer_specs.py,
models/gpt/experimental_attention_variant_module_specs.py):
- core_attn checkpoints the attention core (transformer/attention.py); its inputs q, k, v are what flash attention
  keeps anyway and its output is the output projection's input, so it frees nothing the memory model counts (no
  s^2 term: flash attention). transformer_config.py itself warns "For fused attention, you have no need to set
  'core_attn' to recompute".
- layernorm discards input_layernorm's and pre_mlp_layernorm's outputs only where the norm is a module of its own
  (transformer_layer.py 383-435: `not isinstance(self.input_layernorm, IdentityOp)`, the same for
  pre_mlp_layernorm): input_layernorm under MLA (gpt_layer_specs.py: input_layernorm=backend.layer_norm()),
  pre_mlp_layernorm in an MoE layer (`backend.layer_norm() if num_experts else IdentityOp`; mamba_layer_specs.py
  moe_layer: TENorm). Everywhere else the norm is fused into the next linear, a TELayerNormColumnParallelLinear that
  keeps its normalized input for wgrad: a non-MLA layer's linear_qkv (no input_layernorm, the default IdentityOp),
  a dense MLP's linear_fc1, a hybrid model's attention and MLP layers, Gated DeltaNet's in_proj
  (fuse_input_layernorm True) and Mamba's in_proj (MambaLayer reads no recompute_modules). With the MoE router in a
  per-layer CUDA graph the pre-MLP norm is kept too, unless moe_preprocess is captured with the alltoall
  dispatcher or latent MoE (transformer_layer.py can_recompute_pre_mlp_layernorm_for_cudagraph; graph_kept_moe_norm).
- moe_act: the routed experts' activation output (transformer/moe/experts.py TEGroupedMLP activation_recompute); a
  shared expert is an MLP (shared_experts.py), which reads no moe_act.
- mla_up_proj: MLA's up-projected q, k, v (multi_latent_attention.py recompute_up_proj).
- mlp checkpoints a dense MLP block whole (transformer_layer.py: recompute_mlp only where the layer is not an MoE
  layer; mlp under tensor_parallel.checkpoint), so the block keeps only its input: its normalized input (the norm
  is fused into linear_fc1 in a dense layer's spec), its FC1 output and its activation output are freed, and its
  forward runs again (step/evaluate.py). On an MoE model that is its few dense layers (DeepSeek-V3: 3 of 61), as
  the DeepSeek-V3 recipes run it (["mla_up_proj", "mlp"], Megatron-Bridge 25.11 on).
- moe and shared_experts checkpoint whole MoE blocks, which the step model does not price: no recipe in
  recipes.json runs them and no plan emits them. So no module frees a shared expert's activation output alone.
DeepSeek-V4's attention (not in megatron-core 0.16.1: emit/megatron.py says the launch is not buildable there) is
taken as MLA's spec: a norm of its own before its low-rank query, and the query up-projection under mla_up_proj.

TorchTitan's selective activation checkpointing is op-level (its activation_checkpoint mode "selective",
selective_ac_option "op", emit/torchtitan.py): inside each checkpointed block only the save-listed ops' outputs
(matmuls, attention) are kept, so every norm's and activation function's output is recomputed; its light modes
(mla_up_proj, moe_act) are stood in for by that mode and charged as the layout names them.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.graph_scope import BIT, resolved_masks
from commbench.planner.layout.spec import CUDA_GRAPHS, DISPATCHERS, RECOMPUTE
from commbench.planner.models.spec import ModelSpec

# The saved tensors a recompute mode can free, as step/memory.py (and step/mamba.py, step/gdn.py) count them
ATTN_NORM = "attention_norm_output"            # an attention block's input norm output (its first GEMM's input)
MLP_NORM = "dense_mlp_norm_output"             # a dense MLP's pre-MLP norm output (FC1's input)
MLP_FC1 = "dense_mlp_fc1_output"              # a dense MLP's FC1 output (the activation function's input)
MLP_ACT = "dense_mlp_activation_output"        # a dense MLP's activation output (FC2's input)
MOE_NORM = "moe_norm_output"                   # an MoE block's pre-MLP norm output (router and shared-expert input)
EXPERT_ACT = "expert_activation_output"        # the routed experts' activation output (their FC2 input)
SHARED_ACT = "shared_expert_activation_output" # a shared expert's activation output
MLA_UP = "mla_up_projections"                  # MLA's up-projected q, k, v (DeepSeek-V4: its query)
LINEAR_NORM = "linear_attention_norm_output"   # a Gated DeltaNet block's input norm output
MAMBA_NORM = "mamba_norm_output"               # a Mamba block's input norm output
SAVED = (ATTN_NORM, MLP_NORM, MLP_FC1, MLP_ACT, MOE_NORM, EXPERT_ACT, SHARED_ACT, MLA_UP, LINEAR_NORM, MAMBA_NORM)

# Layer specs a module's effect depends on (see the docstring): "mla", the attention's input norm and up-projections
# are modules of their own; "moe", an MoE layer's pre-MLP norm is a module and its experts are grouped GEMMs;
# "dense", a dense MLP block (a model without one has no such block to free: step/memory.py block_counts).
MLA_LIKE = ("mla", "dsv4")


def _spec_has(model: ModelSpec, spec: str) -> bool:
    if spec == "dense":
        return True
    return model.attention in MLA_LIKE if spec == "mla" else model.is_moe


# megatron-core 0.16.1 --recompute-modules entry -> (saved tensor it frees, the layer spec where it does)
MEGATRON_FREES: dict[str, tuple[tuple[str, str], ...]] = {
    "core_attn": (),
    "layernorm": ((ATTN_NORM, "mla"), (MOE_NORM, "moe")),
    "moe_act": ((EXPERT_ACT, "moe"),),
    "mla_up_proj": ((MLA_UP, "mla"),),
    "mlp": ((MLP_NORM, "dense"), (MLP_FC1, "dense"), (MLP_ACT, "dense")),
}
LIGHT_MODULES = ("layernorm", "moe_act", "mla_up_proj")   # in the order emitted after core_attn
ALONE = ("mla_up_proj", "moe_act")                        # recompute modes of their own (layout RECOMPUTE)
# --recompute-modules the step model prices (MEGATRON_FREES; step/evaluate.py their time): a recipe's set of them is
# a layout RECOMPUTE mode (spec.py RECIPE_MODULE_SETS), "+"-joined in sorted order
PRICED_MODULES = tuple(sorted(MEGATRON_FREES))

# TorchTitan's op-level selective AC frees every norm's and activation function's output (see the docstring); it
# keeps the matmuls' outputs, a dense MLP's FC1 output among them
TORCHTITAN_FREES: dict[str, frozenset[str]] = {
    "selective": frozenset(SAVED) - {MLP_FC1}, "mla_up_proj": frozenset({MLA_UP}), "moe_act": frozenset({EXPERT_ACT})}


def frees(model: ModelSpec, modules) -> frozenset[str]:
    """The saved tensors megatron-core 0.16.1 frees for `modules` (--recompute-modules) on this model's layer specs."""
    return frozenset(tensor for module in modules for tensor, spec in MEGATRON_FREES.get(module, ())
                     if _spec_has(model, spec))


def recompute_modules(model: ModelSpec) -> list[str]:
    """Megatron --recompute-modules for the step model's selective recompute: core_attn (megatron-core's default
    selective module), then each light module that frees something on this model's layer specs (MEGATRON_FREES);
    emit/megatron.py emits them, calibration reads a log's set against what they free."""
    return ["core_attn"] + [m for m in LIGHT_MODULES if frees(model, [m])]


def mode_modules(model: ModelSpec, mode: str) -> list[str]:
    """The --recompute-modules a selective-granularity recompute mode (layout RECOMPUTE) runs; [] for none / full.
    A recipe's module set ("layernorm+moe_act") runs exactly its modules, whatever they free on the model."""
    if mode == "selective":
        return recompute_modules(model)
    if mode in ("none", "full"):
        return []
    return mode.split("+")


def module_set_mode(modules) -> str:
    """The layout RECOMPUTE mode that runs exactly `modules` (a --recompute-modules list, order and repeats aside):
    "none" for none, a module alone by its name, else the names "+"-joined in sorted order (spec.py
    RECIPE_MODULE_SETS). Raises ValueError for a module the step model does not price (PRICED_MODULES) or a set
    RECOMPUTE does not hold (add it to RECIPE_MODULE_SETS, which the recipe table's sets are)."""
    names = sorted(set(modules))
    unpriced = [m for m in names if m not in PRICED_MODULES]
    if unpriced:
        raise ValueError(f"recompute_modules {list(modules)}: {', '.join(unpriced)} is not priced by the step model "
                         f"(priced: {', '.join(PRICED_MODULES)})")
    mode = "+".join(names) if names else "none"
    if mode not in RECOMPUTE:
        raise ValueError(f"recompute_modules {list(modules)}: the set {mode} is no layout recompute mode "
                         f"({', '.join(RECOMPUTE)}); add it to layout/spec.py RECIPE_MODULE_SETS")
    return mode


def search_mode(mode: str) -> str:
    """The search's own mode (RECOMPUTE's first five) a recipe's module set stands for in a release's features
    (layout/recipes.py release_features; the search enumerates these only): the mode recipes.json recorded before it
    held sets, core_attn -> selective, else mla_up_proj where the set has it, else moe_act, else none."""
    if mode in RECOMPUTE[:5]:
        return mode
    modules = mode.split("+")
    if "core_attn" in modules:
        return "selective"
    return next((m for m in ("mla_up_proj", "moe_act") if m in modules), "none")


def codes_running(model: ModelSpec, module: str) -> list[int]:
    """The layout RECOMPUTE codes whose --recompute-modules hold `module` (mode_modules) on this model."""
    return [code for code, mode in enumerate(RECOMPUTE) if module in mode_modules(model, mode)]


def mode_frees(model: ModelSpec, mode: str, framework: str = "megatron") -> frozenset[str]:
    """The saved tensors a recompute mode frees (full recompute is counted apart: it keeps each layer's input)."""
    if framework == "torchtitan":
        return TORCHTITAN_FREES.get(mode, frozenset())
    return frees(model, mode_modules(model, mode))


def graph_kept_moe_norm(model: ModelSpec, arr) -> np.ndarray:
    """Per layout, whether megatron-core 0.16.1 keeps the MoE layer's pre-MLP norm whatever 'layernorm' says: a
    per-layer CUDA graph captures the router, and not moe_preprocess with the alltoall dispatcher (or latent MoE)
    (transformer_layer.py can_recompute_pre_mlp_layernorm_for_cudagraph: "Disabling pre_mlp_layernorm recompute").
    The dispatcher is alltoall only where the launch writes it (EP > 1, emit/megatron.py); megatron-core's default is
    allgather. No plan emits --moe-shared-expert-overlap, the other case there."""
    scope = resolved_masks(model, arr.cuda_graph_scope)
    router = (arr.cuda_graph == CUDA_GRAPHS.index("layer")) & ((scope & BIT["moe_router"]) != 0)
    alltoall = (arr.dispatcher == DISPATCHERS.index("alltoall")) & (arr.ep > 1)
    preprocess = ((scope & BIT["moe_preprocess"]) != 0) & (alltoall | bool(model.moe_latent_size))
    return router & ~preprocess


def graph_kept_permuted_tokens(model: ModelSpec, arr) -> np.ndarray:
    """Per layout, whether a per-layer CUDA graph holds each MoE layer's permuted tokens (top-k x the rank's tokens,
    hidden wide, bf16) from the layer's forward to its backward, in the graph's pool: the graph captures
    moe_router + moe_preprocess and the dispatcher is alltoall (EP > 1), whose preprocess permutes the tokens before
    the all-to-all (megatron-core 0.16.1 token_dispatcher.py MoEAlltoAllTokenDispatcher.dispatch_preprocess), so the
    permuted tokens are a static output of the captured region, and megatron-core says they cannot be freed
    (models/gpt/fine_grained_callables.py should_free_input: "If moe_preprocess is in cuda graph scope, tokens and
    probs are fixed size tensors, so they cannot be freed"). Transformer Engine holds a forward graph's static
    outputs until its backward graph is captured, then makes them weak references (v2.9 to v2.18 pytorch/graph.py
    _make_graphed_callables under _reuse_graph_input_output_buffers, which megatron-core sets from TE 2.7): graph-pool
    memory, reserved but not allocated in training, so step/memory.py charges them with the reserve
    (graph_pool_permuted_bytes), not the activations torch.cuda.max_memory_allocated counts. Published: Qwen3-30B-A3B
    BF16 on 16 H100, EP16 mbs 1, alltoall, graphs over moe_router + moe_preprocess, 61.351 GB (decimal: Megatron-
    Bridge's log) peak allocated (docs/training/moe-optimization.md, "Short-run H100 sanity check"), consistent
    with that: the same layout's HybridEP run published 62.166 GB. The flex
    dispatcher's preprocess does not permute (its tokens are the norm output the router keeps)."""
    scope = resolved_masks(model, arr.cuda_graph_scope)
    captured = (arr.cuda_graph == CUDA_GRAPHS.index("layer")) & ((scope & BIT["moe_router"]) != 0) \
        & ((scope & BIT["moe_preprocess"]) != 0)
    alltoall = (arr.dispatcher == DISPATCHERS.index("alltoall")) & (arr.ep > 1)
    return captured & alltoall & bool(model.is_moe)


def keep_factors(model: ModelSpec, arr, recompute, framework: str = "megatron", *,
                 graph_kept=None) -> dict[str, np.ndarray]:
    """Per saved tensor (SAVED), 1.0 per layout where its recompute mode (codes into RECOMPUTE) keeps it, 0.0 where
    it frees it. `arr` (LayoutArrays) gives the CUDA-graph rule of Megatron's MoE norm; None: no layout's graph
    captures the router. `graph_kept`: that rule's graph_kept_moe_norm(model, arr) where the caller has it (rows
    grouped by it: step/memory.py), read from it instead of `arr`."""
    recompute = np.asarray(recompute)
    out = {}
    for tensor in SAVED:
        codes = [i for i, mode in enumerate(RECOMPUTE) if tensor in mode_frees(model, mode, framework)]
        out[tensor] = np.where(np.isin(recompute, codes), 0.0, 1.0)
    if framework == "megatron" and model.is_moe and arr is not None:
        kept = graph_kept_moe_norm(model, arr) if graph_kept is None else graph_kept
        out[MOE_NORM] = np.where(kept, 1.0, out[MOE_NORM])
    return out
