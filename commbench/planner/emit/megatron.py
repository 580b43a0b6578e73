"""A layout as Megatron-LM arguments (pretrain_gpt.py) and the environment its launch needs.

Flag names are Megatron-LM's (megatron/training/arguments.py; in current Megatron-LM the
TransformerConfig flags are generated from megatron-core's dataclass fields, e.g.
`--moe-flex-dispatcher-backend` from `moe_flex_dispatcher_backend`). What the emitter guarantees,
mirroring Megatron's own checks (arguments.py `validate_args`, transformer_config.py `__post_init__`,
megatron-core 0.16):
- the layer split is one Megatron builds (split.py): even, `--account-for-*-in-pipeline-split`,
  `--decoder-first/last-pipeline-num-layers` or `--pipeline-model-parallel-layout`;
- the model's whole architecture (megatron_arch.py), so nothing architectural is left to the user;
- `--overlap-moe-expert-parallel-comm` only with EP > 1, no full recompute, VP when PP > 1, MTP <= 1
  and PP > 1 with MTP; `--delay-wgrad-compute` only with it, and not under a per-layer graph over a biased attention
  where the release's validate_args refuses that (search/wgrad_graph.py, from megatron-core 0.17); no CUDA graph over a
  module the release recomputes (search/graph_recompute.py: 25.11's block); `--tp-comm-overlap` only with sequence
  parallel; `--overlap-param-gather` only with the distributed optimizer and `--overlap-grad-reduce`;
- precision as Megatron-Bridge's recipes set it: fp8 = `--fp8-format hybrid --fp8-recipe tensorwise`
  (current scaling); mxfp8 = `--fp8-format e4m3 --fp8-recipe mxfp8` plus `--fp8-param-gather
  --reuse-grad-buf-for-mxfp8-param-ag` with the distributed optimizer (without them megatron-core's
  OptimizerConfig warns that mxfp8 "will use significant amount additional GPU memory"), but no
  `--reuse-grad-buf-for-mxfp8-param-ag` under Megatron-FSDP (MEGATRON_FSDP_NO_GRAD_BUF_REUSE);
  nvfp4 = `--fp4-format e2m1 --fp4-recipe nvfp4`; always `--bf16` params and `--grad-reduce-in-bf16` (bf16 gradient
  buffers, as the recipes' grad_reduce_in_fp32 = False; Megatron-LM's default under --bf16 is fp32); fp8 also gathers its
  params in fp8 (`--fp8-param-gather` with the distributed optimizer, as bf16_with_fp8_current_scaling_mixed);
  the step model's memory counts fp8 weights for both (step/memory.py);
- the fused cross entropy as the release's recipes run it (`--cross-entropy-loss-fusion --cross-entropy-fusion-impl
  te`, Transformer Engine's, which the calibrated Megatron-Bridge runs ran and the step time prices) where its
  Megatron-LM takes it, else megatron-core's own kernels (`native`): validate_args refuses impl te from core_v0.18.2
  on (168cb15d70, "Disable TE cross entropy loss fusion (#5115)": "Transformer Engine cross entropy loss fusion is
  disabled due to stability issues"), so 26.06.01 and 26.08 (and a launch for no release) write native
  (step/loss_memory.py megatron_launch_loss). The memory charges the kernel written (native's fp32 softmax, te's
  in-place bf16 gradient), the step time its HBM traffic (native's over te's: step/loss_time.py), and the plan says so
  (cross_entropy_note).
Launch environment: CUDA_DEVICE_MAX_CONNECTIONS as Megatron's rules set it (layout/connections.py, which cites
them): 1 on Hopper and earlier with TP/CP > 1 and neither EP overlap nor Megatron-FSDP (validate_args asserts
it); above 1 with Megatron-FSDP (asserted), with EP all-to-all overlap (megatron-core's MoE README; on Hopper
with TP/CP validate_args only warns) and on Blackwell: Megatron-Bridge's 32 (Blackwell, flex dispatcher) or 8.
"""

from __future__ import annotations

import argparse
import shlex

from commbench.errors import CommbenchError, invalid
from commbench.planner.emit.megatron_arch import MEGATRON_LM_RELEASE, architecture_args, max_positions, unbuildable
from commbench.planner.layout.connections import (TP_OVERLAP_NEEDS_ONE, device_max_connections,
                                                  tp_overlap_runs)
from commbench.planner.layout.graph_scope import (BIT, WHOLE_LAYER, WHOLE_LAYER_NAME, cuda_graph_args, default_scope,
                                                  scope_mask)
from commbench.planner.layout.recompute import mode_modules, module_set_mode, recompute_modules
from commbench.planner.layout.spec import Layout
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.split import choose_split, parse_layout_text, pipe_pattern, split_vocab
from commbench.planner.emit.hybrid import HYBRID_SCRIPT, hybrid_model_args, linear_attention_args
from commbench.planner.search.graph_recompute import release_graph_pin_refusal
from commbench.planner.search.wgrad_graph import wgrad_graph_te_note
from commbench.planner.search.frameworks import (MEGATRON_NO_FULL_GRAPH_MOE, megatron_cannot_launch,
                                                 megatron_dropout_graph_refusal, megatron_fsdp_graph_refusal,
                                                 megatron_graph_scope_refusal, megatron_hybrid_refusal,
                                                 megatron_release_name, release_core_at_least)

# Megatron-FSDP as Megatron-LM core_v0.16.1 takes it (arguments.py: --use-megatron-fsdp, ZeRO-3 sharding
# strategy optim_grads_params, and the fsdp_dtensor checkpoint format validate_args requires with it);
# HSDP adds --num-distributed-optimizer-instances (the outer, replicated DP; outer-dp-sharding no_shard, or optim with
# fsdp_outer_optim: --outer-dp-sharding-strategy optim, the optimizer state sharded across the replicas too).
MEGATRON_FSDP_ARGS = ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params",
                      "--ckpt-format", "fsdp_dtensor"]
# --fsdp-double-buffer (layout fsdp_double_buffer, every plan's): Megatron-FSDP's gathered weights and unsharded
# gradients in two persistent buffers each (param_and_grad_buffer.py FixedPoolAllocator, UB_BUFFER_NUM = 2), so the
# launch holds the two units the memory model charges (step/fsdp.py megatron_unit_buffers); without it the
# reduce-scatter queue keeps up to max(1e9 elements, 2 units) of gradients beside the unit being reduced. Every
# recipe-table release's arguments.py has it (store_true) and validate_args puts no condition on it; training.py
# passes it to DistributedDataParallelConfig by name (core_v0.16.1 lines 1292-1294). Megatron-Bridge's Llama 3 / 3.1
# FSDP recipes set it (recipes.json fsdp_double_buffer).
MEGATRON_FSDP_DOUBLE_BUFFER = "--fsdp-double-buffer"
# --keep-fp8-transpose-cache (layout keep_fp8_transpose_cache, pinned only): Megatron-FSDP keeps each unit's fp8 weight
# transposes across micro-batches (DistributedDataParallelConfig.keep_fp8_transpose_cache; step/fsdp.py "Hopper
# per-tensor fp8 weights" for what it costs and saves). Spelled so in arguments.py from core_v0.14.0 (line 2443) to
# core_v0.16.1 (line 2329) and at 25.11's 0d8e0714, store_true, no validate_args condition; training.py passes it to
# DistributedDataParallelConfig by name. core_v0.13.1 spelled it --keep-fp8-transpose-cache-when-using-custom-fsdp
# (no recipe-table release runs it).
MEGATRON_FSDP_KEEP_FP8_TRANSPOSES = "--keep-fp8-transpose-cache"

# --reuse-grad-buf-for-mxfp8-param-ag is a DistributedDataParallel feature Megatron-FSDP does not implement
# (megatron-core 0.16.1): with it and --overlap-param-gather, MixedPrecisionOptimizer.step_with_ready_grads skips
# its main-to-model weight copy (optimizer.py:579-584), which under Megatron-FSDP is the only one
# (distrib_optimizer.py:2440-2443), leaving it to the training loop (Megatron-LM core_v0.16.1 training.py:1641-1643),
# which reads model[0].remove_forward_pre_hook_handles, set only by DistributedDataParallel.__init__
# (distributed_data_parallel.py:350): the first train_step raises AttributeError. validate_args clears the flag under
# Megatron-FSDP only with --fsdp-manual-registration (arguments.py:693-698). Megatron-Bridge turns it off under
# Megatron-FSDP (v0.3.0 src/megatron/bridge/training/config.py:1485-1490: "reuse_grad_buf_for_mxfp8_param_ag is not
# supported with Megatron FSDP, setting to False"; its Nemotron-3.5 FSDP perf recipe sets it False), and so do the
# plans; the step model charges Megatron-FSDP's own MXFP8 buffers (step/fsdp.py mxfp8_transpose_bytes).
MEGATRON_FSDP_NO_GRAD_BUF_REUSE = (
    "Megatron-FSDP at mxfp8: no --reuse-grad-buf-for-mxfp8-param-ag (Megatron-FSDP does not implement it; "
    "Megatron-Bridge turns it off under Megatron-FSDP), so megatron-core's OptimizerConfig warns mxfp8 'will use "
    "significant amount additional GPU memory'; the prediction charges Megatron-FSDP's MXFP8 row-wise and transposed "
    "weight buffers")

# The training script that builds the model from these flags: pretrain_gpt.py builds a GPTModel (gpt_builders.py)
# and ignores --is-hybrid-model / --hybrid-override-pattern; a hybrid Mamba model is built by pretrain_mamba.py.
MEGATRON_SCRIPT = "pretrain_gpt.py"


def megatron_script(model: ModelSpec) -> str:
    """The Megatron-LM training script that builds `model` from the emitted flags."""
    return HYBRID_SCRIPT if model.is_hybrid else MEGATRON_SCRIPT


def needs_release_flags(model: ModelSpec) -> bool:
    """Whether the model's arguments hold flags later than core_v0.16.1's: YaRN on non-MLA attention (gpt-oss), which
    only megatron-core 0.19.0's pretrain_gpt.py builds (search/frameworks.py MEGATRON_NON_MLA_YARN_CORE), or linear
    RoPE interpolation, whose --rotary-seq-len-interpolation-factor every release parses but only 0.19.0's
    pretrain_gpt.py passes to GPTModel (MEGATRON_LINEAR_ROPE_CORE)."""
    return _yarn_non_mla(model) or _linear_rope(model)


def _yarn_non_mla(model: ModelSpec) -> bool:
    arch = model.architecture
    return arch is not None and arch.position_embedding == "yarn" and model.attention != "mla"


def _linear_rope(model: ModelSpec) -> bool:
    return model.architecture is not None and model.architecture.rope_scaling == "linear"


def _later(model: ModelSpec) -> tuple[str, str, str] | None:
    """(what, its flags, the megatron-core that has them) for the model's arguments a later megatron-core's than the
    target core_v0.16.1's: YaRN on non-MLA attention and linear RoPE interpolation (needs_release_flags: 0.19.0's), the hybrid model's MTP pattern
    (hybrid.hybrid_mtp_args) and --mtp-use-repeated-layer (MTP_REPEATED_LAYER_CORE), 0.17's, which megatron_args
    writes only for a release that has them; None where there are none."""
    if _yarn_non_mla(model):
        return "YaRN", "--position-embedding-type yarn, --yarn-*", "0.19.0"
    if _linear_rope(model):
        return "linear RoPE interpolation", "--rotary-seq-len-interpolation-factor", "0.19.0"
    mtp = ((["--mtp-hybrid-override-pattern"] if model.is_hybrid and model.num_mtp_layers else [])
           + (["--mtp-use-repeated-layer"] if model.mtp_shared_weights and model.num_mtp_layers > 1 else []))
    return ("MTP", ", ".join(mtp), "0.17") if mtp else None


def later_flags(model: ModelSpec) -> str:
    """_later as the plan's release note says it ('the YaRN ones (...), megatron-core 0.19.0's'), or ''."""
    later = _later(model)
    return f"the {later[0]} ones ({later[1]}), megatron-core {later[2]}'s" if later else ""


def megatron_target(model: ModelSpec, release: str | None = None) -> str:
    """plan.json's Megatron target: the release and the script whose flags the arguments are; for a model some of whose
    flags are a later release's (_later), the plan's release's Megatron-LM."""
    later = _later(model)
    if later and release is not None:
        from commbench.planner.search.frameworks import megatron_release_name
        name, _ = megatron_release_name(release)
        which = f"its {later[0]} flags are megatron-core {later[2]}'s" + (f" ({later[1]})" if later[0] == "MTP" else "")
        return (f"{name} ({megatron_script(model)} flags: {which}, the rest "
                f"{MEGATRON_LM_RELEASE}'s; parse_args, validate_args and TransformerConfig checks)")
    return (f"Megatron-LM {MEGATRON_LM_RELEASE} with megatron-core 0.16.1 ({megatron_script(model)} flags; parse_args, "
            "validate_args and TransformerConfig checks)")


# arguments.py lists TransformerConfig.fp8_dot_product_attention among the fields "no CLI argument exists for": its
# parse_args rejects --fp8-dot-product-attention ("unrecognized arguments"): pretrain_gpt.py cannot turn it on.
MEGATRON_NO_FP8_ATTENTION = (f"fp8_attention=true: Megatron-LM {MEGATRON_LM_RELEASE}'s arguments.py has no "
                             "--fp8-dot-product-attention (TransformerConfig.fp8_dot_product_attention has no CLI "
                             "argument there), so pretrain_gpt.py / pretrain_mamba.py cannot run FP8 attention; set it in "
                             "the model provider (e.g. Megatron-Bridge) or plan with fp8_attention=false")

def cross_entropy_args(release: str | None = None) -> list[str]:
    """The loss flags: the fused cross entropy in the implementation the launch for `release` runs (step/loss_memory.py
    megatron_launch_loss: the recipes' te where the release's validate_args takes it, else megatron-core's native
    fusions/fused_cross_entropy.py, which every release of the recipe table takes:
    tests/test_megatron_release_trees.py)."""
    from commbench.planner.step.loss_memory import megatron_launch_loss
    return ["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", megatron_launch_loss(release)]


def cross_entropy_note(model: ModelSpec, layout: Layout, seq_len: int | None = None, charged: str | None = None, *,
                       fits: bool = True, release: str | None = None) -> str:
    """What the launch's loss holds and what the plan's memory charges for it (plan.json megatron.notes). megatron-core's
    native fused cross entropy (core_v0.16.1 fusions/fused_cross_entropy.py, tensor_parallel/cross_entropy.py) casts
    the logits to fp32 (calculate_logits_max: .float()), turns them into the softmax in place and saves that fp32
    softmax for backward: 4 B per logit on the loss stage per micro-batch, 2 B more than Transformer Engine's kernel
    the calibrated Megatron-Bridge runs ran (step/loss_memory.py). `charged`: the cross entropy the plan's memory
    charges (SearchRequest.loss: native for a Megatron-LM plan, so the search's fit and a pinned layout's fit are
    the launch's own; TorchTitan's for a TorchTitan plan). The step time prices TE's kernel in its fitted terms and,
    where `charged` is native, native's HBM traffic over it (step/loss_time.py: predicted.loss_kernel_extra_s).
    `fits`: whether the layout is predicted to fit with it (a pinned layout may not), as the note says. Where the
    release's Megatron-LM takes te (`release` older than 26.06.01), the launch runs TE's kernel, as the recipes do: the
    note says that, what it holds and that the memory and the step time price it. `charged` None: the launch's."""
    from commbench.planner.step.loss_memory import loss_description, megatron_launch_loss
    from commbench.planner.step.memory import logits_bytes
    launched = megatron_launch_loss(release)
    charged = charged or launched
    tokens = layout.mbs * (seq_len or model.seq_len)
    verdict = "the layout fits with it" if fits else "the layout does not fit, predicted"
    if launched == "te":
        te = float(logits_bytes(model, tp=layout.tp, cp=layout.cp, tokens_mb=tokens, framework="megatron", loss="te"))
        head = (f"loss: --cross-entropy-fusion-impl te, as Megatron-Bridge {release}'s recipes run it (its Megatron-LM "
                "takes te; validate_args refuses it from core_v0.18.2 on, 26.06.01 and later): Transformer Engine's "
                "fused cross entropy writes the logits' gradient in place into the bf16 logits, 2 B per logit "
                f"(predicted about {te / 1e9:.2g} GB on the loss stage per micro-batch)")
        if charged == "te":
            return head + f"; the plan's predicted memory charges it ({verdict}), and the step time prices its kernel"
        return head + f"; this plan's predicted memory charges {loss_description(charged)} instead"
    native = float(logits_bytes(model, tp=layout.tp, cp=layout.cp, tokens_mb=tokens, framework="megatron",
                                loss="native"))
    head = ("loss: --cross-entropy-fusion-impl native (Megatron-LM refuses te from core_v0.18.2 on, 26.06.01 and "
            "later): megatron-core's native fused cross entropy saves its softmax in fp32 for backward, 4 B per logit "
            f"(predicted about {native / 1e9:.2g} GB on the loss stage per micro-batch, twice what Transformer "
            "Engine's kernel, which the calibrated Megatron-Bridge runs ran, holds)")
    if charged == "native":
        from commbench.planner.step.loss_time import LOSS_KERNEL_BYTES_PER_LOGIT, loss_extra_bytes_per_microbatch
        per_logit = LOSS_KERNEL_BYTES_PER_LOGIT["native"] - LOSS_KERNEL_BYTES_PER_LOGIT["te"]
        extra = float(loss_extra_bytes_per_microbatch(model, tp=layout.tp, cp=layout.cp, tokens_mb=tokens,
                                                      framework="megatron", loss="native"))
        return (head + f"; the plan's predicted memory charges it ({verdict}), and the plan's step time prices native: "
                f"its HBM traffic over Transformer Engine's kernel (whose time is in the fitted terms), "
                f"{per_logit:g} B per logit forward + backward, about {extra / 1e9:.2g} GB more on the loss stage per "
                "micro-batch at the step model's memory-bound rate (predicted.loss_kernel_extra_s, step/loss_time.py)")
    return head + f"; this plan's predicted memory charges {loss_description(charged)} instead"


PRECISION_ARGS = {
    "bf16": [],
    "fp8": ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    "mxfp8": ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"],
    "nvfp4": ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
}


def model_args(model: ModelSpec, seq_len: int | None = None, release: str | None = None, tp: int = 1) -> list[str]:
    """Architecture flags: sizes here, the rest from the model's Architecture (megatron_arch.py); `release`: the
    plan's recipe-table release (None: the target core_v0.16.1), whose Megatron-LM must build the model's YaRN where it
    is on non-MLA attention (needs_release_flags). megatron_args checks the whole launch first
    (check_megatron_layout) and takes _architecture_args."""
    reason = megatron_cannot_launch(model, release) or (unbuildable(model, release=release)
                                                        if needs_release_flags(model) else None)
    if reason:
        raise CommbenchError(reason)
    return _architecture_args(model, seq_len, release, tp)


# --mtp-use-repeated-layer (TransformerConfig.mtp_use_repeated_layer: the MTP depths run one layer's weights), first in
# megatron-core 0.17: release 26.04's d7288711 transformer_config.py:68, read by gpt_model.py:737 and
# mamba_model.py:502; core_v0.16.1 (26.02.01's 55ac7082) has no such field.
MTP_REPEATED_LAYER_CORE = (0, 17, 0)


def _architecture_args(model: ModelSpec, seq_len: int | None, release: str | None = None, tp: int = 1) -> list[str]:
    """model_args' flags, for a model whose launch is already checked; `release` as model_args'; `tp` the launch's
    (the vocabulary divisor, megatron_arch.architecture_args)."""
    s, arch = seq_len or model.seq_len, model.architecture
    out = ["--num-layers", str(model.num_layers), "--hidden-size", str(model.hidden),
           "--num-attention-heads", str(model.num_heads), "--seq-length", str(s),
           "--max-position-embeddings", str(max_positions(model, s)),
           # the model's dropout (hf: its config's, hf_arch._dropout); 0 where none is given, as LLM pre-training
           # recipes train (Megatron-LM's defaults are 0.1). check_megatron_layout refuses attention dropout with
           # graphed core_attn recompute, as megatron-core's TransformerConfig does.
           "--attention-dropout", str(arch.attention_dropout if arch else 0.0),
           "--hidden-dropout", str(arch.hidden_dropout if arch else 0.0)]
    out += architecture_args(model, s, tp)
    if model.is_hybrid:
        out += hybrid_model_args(model, release)
    out += linear_attention_args(model)
    if not model.tied_embeddings:
        out.append("--untie-embeddings-and-output-weights")
    if model.attention == "mla":
        out += ["--multi-latent-attention"]   # no --q-lora-rank: megatron-core's linear_q_proj (no query low-rank)
        out += ["--q-lora-rank", str(model.q_lora_rank)] if model.q_lora_rank else []
        out += ["--kv-lora-rank", str(model.kv_lora_rank), "--qk-head-dim", str(model.qk_nope_head_dim),
                "--qk-pos-emb-head-dim", str(model.qk_rope_head_dim), "--v-head-dim", str(model.v_head_dim)]
        if model.hidden % model.num_heads:
            # validate_args derives kv_channels = hidden / heads and asserts it divides (GLM-4.7-Flash: 2048 / 20);
            # MLA's attention takes its own k/v head dims, so any value builds the same model
            out += ["--kv-channels", str(model.v_head_dim)]
        if model.architecture is not None and model.architecture.rope_scaling != "yarn":
            out.append("--no-rope-fusion")   # MLATransformerConfig: "apply_rope_fusion for MLA only works with YARN"
    else:
        out += ["--group-query-attention", "--num-query-groups", str(model.num_kv_heads),
                "--kv-channels", str(model.head_dim)]
    if model.dense_ffn:
        out += ["--ffn-hidden-size", str(model.dense_ffn)]
    if model.is_moe:
        out += ["--num-experts", str(model.num_routed_experts), "--moe-ffn-hidden-size", str(model.expert_ffn),
                "--moe-router-topk", str(model.top_k), "--moe-grouped-gemm"]
        if model.num_shared_experts:
            out += ["--moe-shared-expert-intermediate-size", str(model.num_shared_experts * model.expert_ffn)]
        if model.moe_latent_size:
            out += ["--moe-latent-size", str(model.moe_latent_size)]
        if model.num_dense_layers and not model.is_hybrid:  # a hybrid's pattern places its MoE layers
            out += ["--moe-layer-freq", f"[0]*{model.num_dense_layers}+[1]*{model.num_moe_layers}"]
    if model.num_mtp_layers:
        out += ["--mtp-num-layers", str(model.num_mtp_layers)]
        if model.mtp_shared_weights and model.num_mtp_layers > 1:
            if not release_core_at_least(release, MTP_REPEATED_LAYER_CORE):
                raise CommbenchError(f"{megatron_release_name(release)[0]} cannot build {model.name}: its "
                                     f"{model.num_mtp_layers} MTP depths share one layer's weights and that release "
                                     "has no --mtp-use-repeated-layer")
            out.append("--mtp-use-repeated-layer")
    return out


def check_megatron_layout(layout: Layout, model: ModelSpec, release: str | None = None) -> None:
    """One-line refusal of flag combinations Megatron's validation rejects (see the module docstring), and of a model
    `release`'s Megatron-LM (None: the target core_v0.16.1) cannot build: first, where the step model still predicts it,
    why that release cannot launch it (megatron_cannot_launch), the plan's note in place of the launch."""
    a = layout
    reason = megatron_cannot_launch(model, release) or unbuildable(model, release=release)
    if reason:
        raise CommbenchError(reason)
    if a.fsdp and a.fsdp_replicas > 1 and model.is_moe:
        raise invalid("fsdp_replicas", a.fsdp_replicas, f"1 for {model.name} under Megatron-LM {MEGATRON_LM_RELEASE} "
                      "(Megatron-FSDP in megatron-core 0.16.1 builds no expert mesh for HSDP; TorchTitan 0.3 does)")
    if a.fused_mlp_offload_min:
        raise invalid("fused_mlp_offload_min", a.fused_mlp_offload_min,
                      f"0 under Megatron-LM {MEGATRON_LM_RELEASE} (megatron-core 0.16.1's --offload-modules has no "
                      "fused_group_mlp and it has no --min-offloaded-tensor-size: both first in megatron-core 0.19.0, "
                      "transformer/transformer_config.py)")
    graphs = megatron_fsdp_graph_refusal(a.fsdp, a.cuda_graph)
    if graphs:
        raise CommbenchError(graphs)
    hybrid = megatron_hybrid_refusal(model, {"moe_a2a_overlap": a.moe_a2a_overlap and a.ep > 1,
                                             "recompute": a.recompute, "recompute_layers": a.recompute_layers,
                                             "cpu_offload_layers": a.cpu_offload_layers})
    if hybrid:
        raise CommbenchError(hybrid)
    if a.cuda_graph == "layer" and a.recompute == "full":
        raise invalid("recompute", "full", "selective recompute with per-layer CUDA graphs (megatron-core: full "
                      "recompute only with the full-iteration graph)")
    dropout = megatron_dropout_graph_refusal(model, a.cuda_graph, a.recompute, a.cuda_graph_scope)
    if dropout:
        raise CommbenchError(dropout)
    scope = megatron_graph_scope_refusal(model, a.cuda_graph_scope) if a.cuda_graph == "layer" else None
    if scope:   # TransformerConfig's scope checks, and a graph over dropless MoE (the moe scope or the whole layer)
        raise CommbenchError(scope)
    graphs = release_graph_pin_refusal(model, release, {
        "moe_a2a_overlap": a.moe_a2a_overlap, "cuda_graph": a.cuda_graph, "cuda_graph_scope": a.cuda_graph_scope,
        "ep": a.ep, "dp_overlap": a.dp_overlap, "recompute": a.recompute})
    if graphs:   # the release refuses attention bias under a graph with delayed wgrad, or a recompute the graph holds
        raise CommbenchError(graphs)
    if a.moe_a2a_overlap and a.cuda_graph == "full":
        raise invalid("cuda_graph", "full", "per-layer (transformer_engine) CUDA graphs with "
                      "--overlap-moe-expert-parallel-comm (megatron-core refuses the full-iteration graph there)")
    if a.moe_a2a_overlap:
        problem = ("EP > 1" if a.ep == 1 else "no full recompute" if a.recompute == "full" else
                   "vp > 1 when pp > 1" if a.pp > 1 and a.vp == 1 else
                   "at most 1 MTP layer" if model.num_mtp_layers > 1 else
                   "pp > 1 with an MTP layer" if model.num_mtp_layers and a.pp == 1 else "")
        scope = a.cuda_graph_scope or "+".join(default_scope(model))
        if not problem and a.cuda_graph == "layer" and scope_mask(scope) & (WHOLE_LAYER | BIT["moe"] | BIT["mlp"]):
            # TransformerConfig refuses moe / mlp; an empty scope (the whole layer) passes it and
            # TransformerLayer._te_cuda_graph_replay asserts "EP overlap must be disabled when CUDA graph captures
            # the whole MLP/MoE part" at the first replay
            problem = f"no per-layer CUDA graph over moe, mlp or the whole layer (cuda_graph_scope={scope!r})"
        if problem:
            raise invalid("moe_a2a_overlap", True, f"Megatron's --overlap-moe-expert-parallel-comm needs {problem}")
    if a.cuda_graph == "full" and model.is_moe:
        raise invalid("cuda_graph", "full", f"layer or none for {model.name}: {MEGATRON_NO_FULL_GRAPH_MOE}")


def megatron_args(layout: Layout, model: ModelSpec, *, seq_len: int | None = None,
                  flex_backend: str = "deepep", release: str | None = None) -> list[str]:
    """Megatron-LM arguments for `layout`: architecture, parallelism and layer split, batch, overlap,
    recompute, precision; `release`: the plan's recipe-table release (model_args)."""
    a = layout
    check_megatron_layout(a, model, release)
    split = choose_split(model, a.pp, a.vp, split_vocab(model, a.tp, "megatron"))   # as the step model's
    out = _architecture_args(model, seq_len, release, a.tp)   # its launch checked above, once
    out += ["--tensor-model-parallel-size", str(a.tp), "--pipeline-model-parallel-size", str(a.pp)]
    segmented = pipe_pattern(model, split)
    if segmented:
        # the split as '|' segments of the pattern (release_flags.HYBRID_PIPE_SEGMENTS_CORE): validate_args derives
        # VP from them and refuses the split flags beside them; the pattern without pipes is deprecated there
        out[out.index("--hybrid-override-pattern") + 1] = segmented
    else:
        out += split.megatron_args()
    if model.is_moe:
        out += ["--expert-model-parallel-size", str(a.ep), "--expert-tensor-parallel-size", str(a.etp)]
    out += ["--context-parallel-size", str(a.cp)]
    if a.cp > 1 and model.all_to_all_cp:
        # attention with sinks (and gpt-oss's window) runs no ring: Megatron-Bridge recipes/gpt_oss/gpt_oss.py sets
        # cp_comm_type "a2a" ("only a2a cp is supported for sink attention"); Megatron-LM core_v0.16.1
        # arguments.py 2341 --cp-comm-type (default p2p). The step model prices it so (step/cp_comm.py a2a_cp_s).
        out += ["--cp-comm-type", "a2a"]
    if a.sequence_parallel and a.tp > 1:
        out.append("--sequence-parallel")
    out += ["--micro-batch-size", str(a.mbs), "--global-batch-size", str(a.gbs)]
    if a.distributed_optimizer:
        out.append("--use-distributed-optimizer")
    if a.fsdp:
        out += MEGATRON_FSDP_ARGS + ([MEGATRON_FSDP_DOUBLE_BUFFER] if a.fsdp_double_buffer else [])
        if a.keep_fp8_transpose_cache:
            out.append(MEGATRON_FSDP_KEEP_FP8_TRANSPOSES)
        if a.fsdp_replicas > 1:  # HSDP: megatron-core 0.16.1 mcore_fsdp_adapter enables it for > 1 instance
            out += ["--num-distributed-optimizer-instances", str(a.fsdp_replicas)]
            if a.fsdp_outer_optim:   # core_v0.16.1 arguments.py: optimizer state sharded across the replicas too
                out += ["--outer-dp-sharding-strategy", "optim"]
    if a.dp_overlap:
        out.append("--overlap-grad-reduce")
        if a.distributed_optimizer:
            out.append("--overlap-param-gather")
    if model.is_moe and a.ep > 1:
        out += ["--moe-token-dispatcher-type", a.dispatcher]
        if a.dispatcher == "flex":
            out += ["--moe-flex-dispatcher-backend", flex_backend]
        if a.moe_a2a_overlap:
            out += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    if a.tp_comm_overlap and a.sequence_parallel and a.tp > 1:
        out.append("--tp-comm-overlap")
    if mode_modules(model, a.recompute):   # the modules layout/recompute.py's table credits, or the recipe's set
        out += ["--recompute-granularity", "selective", "--recompute-modules", *mode_modules(model, a.recompute)]
    elif a.recompute == "full" and a.recompute_layers:   # that many layers of each model chunk, the rest stored
        out += ["--recompute-granularity", "full", "--recompute-method", "block",
                "--recompute-num-layers", str(a.recompute_layers)]
    elif a.recompute == "full":
        out += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    out += recipe_args(a, model)
    # bf16 gradient buffers and reduce-scatters, as every Megatron-Bridge performance recipe sets them (ddp and
    # mixed_precision grad_reduce_in_fp32 = False, scripts/performance/configs/* v0.3.0, perf_recipes/_common.py
    # v0.6.0) and the step model charges them (step/dp_sync.py GRAD_BYTES, step/memory.py): without the flag
    # Megatron-LM's validate_args sets accumulate_allreduce_grads_in_fp32 under --bf16 (arguments.py 722), and
    # the DDP buffer holds fp32 gradients, twice the memory and reduce-scatter bytes the plan predicted
    out += ["--bf16", "--grad-reduce-in-bf16"]
    out += PRECISION_ARGS[a.precision]
    if a.precision == "mxfp8" and a.distributed_optimizer:   # no grad-buffer reuse under Megatron-FSDP (above)
        out += ["--fp8-param-gather"] + ([] if a.fsdp else ["--reuse-grad-buf-for-mxfp8-param-ag"])
    elif a.precision == "fp8" and a.distributed_optimizer:
        out.append("--fp8-param-gather")
    out += cross_entropy_args(release)
    if a.cpu_offload_layers:   # validate_args turns cpu_offloading on when the count is > 0
        out += ["--cpu-offloading-num-layers", str(a.cpu_offload_layers)]
    return out


def recipe_args(a: Layout, model: ModelSpec) -> list[str]:
    """CUDA graphs (per-layer TE graphs or the full iteration), FP8 attention, fused MoE permutes. The
    full-iteration graph needs --no-check-for-nan-in-loss-and-grad, and with EP
    --moe-pad-experts-for-cuda-graph-inference (Megatron-LM core_v0.16.1 validate_args; megatron-core
    reads the latter only in its inference text-generation controller)."""
    out = cuda_graph_args(model, a.cuda_graph, a.cuda_graph_scope, a.ep)
    if a.fp8_attention:
        raise CommbenchError(MEGATRON_NO_FP8_ATTENTION)
    if a.fused_moe and model.is_moe:
        out.append("--moe-permute-fusion")
    return out


# Megatron-Bridge's bf16_with_nvfp4_mixed sets fp4_param_gather=True from v0.5.0 (src/megatron/bridge/training/
# mixed_precision.py; not in v0.3.0 / v0.4.0). Megatron-LM core_v0.16.1 parses --fp4-param-gather (TransformerConfig
# fp4_param), but its distributed optimizer quantizes the updated master weights only through Transformer Engine's
# cast_master_weights_to_fp8 (fp8_utils.quantize_param_shard; TE casts NVFP4 weights in a separate
# cast_master_weights_to_nvfp4) and sizes a quantized parameter's buffer at one byte per element (uint8,
# distributed_data_parallel.py): no 4-bit gather the plan could charge. The plan gathers bf16 and says so.
NVFP4_PARAM_GATHER_NOTE = ("NVFP4 here gathers parameters in bf16: Megatron-Bridge (>= 0.5.0) recipes set "
                           "fp4_param_gather=True, but megatron-core 0.16.1's distributed optimizer re-quantizes "
                           "master weights only through Transformer Engine's cast_master_weights_to_fp8, so the plan "
                           "emits no --fp4-param-gather and charges the bf16 all-gather")


def precision_notes(layout: Layout, model: ModelSpec | None = None, release: str | None = None) -> list[str]:
    """What the launch must provide or will warn about (plan.json megatron.notes, assumptions); `model` and `release`
    (the plan's): the Transformer Engine a per-layer graph with delayed wgrad needs there."""
    notes = []
    if layout.precision == "mxfp8" and not layout.distributed_optimizer:
        notes.append("mxfp8 without the distributed optimizer: Megatron cannot gather params in mxfp8 "
                     "(--fp8-param-gather needs it) and warns mxfp8 will use significant additional GPU memory")
    if layout.precision == "mxfp8" and layout.fsdp:
        notes.append(MEGATRON_FSDP_NO_GRAD_BUF_REUSE)
    if layout.precision == "nvfp4" and (layout.distributed_optimizer or layout.fsdp):
        notes.append(NVFP4_PARAM_GATHER_NOTE)
    if layout.fused_moe:
        notes.append("--moe-permute-fusion needs Transformer Engine's fused permute kernels (TE >= 2.1)")
    te = wgrad_graph_te_note(model, release, layout.cuda_graph, layout.cuda_graph_scope,
                             layout.moe_a2a_overlap and layout.ep > 1, layout.dp_overlap) if model is not None else None
    if te:   # the Transformer Engine --delay-wgrad-compute under a per-layer graph needs (search/wgrad_graph.py)
        notes.append(te)
    return notes


def launch_connections(layout: Layout, gpu_name: str) -> tuple[str | None, str]:
    """(CUDA_DEVICE_MAX_CONNECTIONS or None, why) for this layout's launch on `gpu_name` (layout/connections.py)."""
    ep = layout.ep > 1   # the emitter writes the dispatcher and the EP overlap only with EP
    return device_max_connections(gpu_name=gpu_name, tp=layout.tp, cp=layout.cp, fsdp=layout.fsdp,
                                  moe_a2a_overlap=layout.moe_a2a_overlap and ep,
                                  flex_dispatcher=layout.dispatcher == "flex" and ep)


def connections_notes(layout: Layout, gpu_name: str) -> list[str]:
    """Why a Hopper plan above one connection has no TP comm overlap (plan.json megatron.notes)."""
    if tp_overlap_runs(gpu_name, layout.tp, layout.fsdp, layout.moe_a2a_overlap and layout.ep > 1):
        return []
    value, _ = launch_connections(layout, gpu_name)
    what = "Megatron-FSDP" if layout.fsdp else "EP all-to-all overlap"
    return [f"no --tp-comm-overlap: {what} runs at CUDA_DEVICE_MAX_CONNECTIONS={value} (launch.env), and on {gpu_name} "
            f"(Hopper) TP comm overlap needs 1 ({TP_OVERLAP_NEEDS_ONE}); the prediction charges TP{layout.tp}'s "
            "communication exposed"]


def launch_env(layout: Layout, gpu_name: str) -> dict[str, str]:
    """Environment variables Megatron needs for this layout on `gpu_name` (launch.env)."""
    value, _ = launch_connections(layout, gpu_name)
    return {} if value is None else {"CUDA_DEVICE_MAX_CONNECTIONS": value}


MNNVL_SOURCE = "https://docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/nccl.html"


# the perf recipes' launch environment the step model's fitted terms come from (Megatron-Bridge v0.6.0)
RECIPE_ENV_SOURCE = ("Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py:162-188 "
                     "(NCCL_NVLS_ENABLE=0 unless --use-nccl-ub: scripts/performance/utils/overrides.py:299-301)")


def launch_env_text(env: dict[str, str], *, gpu_name: str, fabric_name: str, domain_size: int = 8,
                    script: str | None = None, connections_why: str | None = None,
                    placement_lines: tuple[str, ...] | list[str] = ()) -> str:
    """launch.env: comments (the script, why CUDA_DEVICE_MAX_CONNECTIONS is what it is, NCCL, the rack placement
    priced and the groups that leave a rack: `placement_lines`, emit/rack_placement.py) and the variables."""
    lines = ["# commbench plan: environment for the Megatron-LM launch (source it: set -a; . ./launch.env)"]
    if script == HYBRID_SCRIPT:   # pretrain_gpt.py parses these flags too and builds a GPTModel without the Mamba layers
        lines.append(f"# Megatron-LM script: {script} (megatron_args.txt holds its flags; pretrain_gpt.py would build "
                     "a transformer from them, without the hybrid pattern's Mamba layers)")
    elif script:
        lines.append(f"# Megatron-LM script: {script} (megatron_args.txt holds its flags)")
    if connections_why:
        lines.append(f"# CUDA_DEVICE_MAX_CONNECTIONS: {connections_why}")
    # the pricing lets NCCL pick NVLS where it would (costmodel/nccl_model.py allowed); the calibration's runs had
    # it off, which moved none of their rows (step/terms.py, fix-BA): so NCCL's default is what is priced and kept
    lines.append(f"# NCCL: the prediction prices the {fabric_name} fabric curves with NCCL's defaults (NVLS where "
                 "NCCL picks it), so no NCCL_* variable is written. NCCL_NVLS_ENABLE=0 is not written because the "
                 "pricing does not assume NVLS off; the Megatron-Bridge perf runs the step model's terms are fitted "
                 "to set it, with NCCL_GRAPH_REGISTER=0, TORCH_NCCL_AVOID_RECORD_STREAMS=0 and the HybridEP and "
                 f"Transformer Engine variables ({RECIPE_ENV_SOURCE}); pricing every collective with NVLS off moved "
                 "none of those runs' predictions (commbench/planner/step/terms.py); add them to launch as they ran")
    lines += [f"# {line}" for line in placement_lines]
    if domain_size > 8:
        lines.append(f"# groups inside one {domain_size}-GPU NVLink domain that span its trays run over multi-node "
                     f"NVLink: NCCL >= 2.25.2 on GB200-class racks ({MNNVL_SOURCE})")
    lines += [f"{k}={v}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="megatron", add_help=False, exit_on_error=False)
    for name in ("tensor-model-parallel-size", "pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank",
                 "expert-model-parallel-size", "expert-tensor-parallel-size", "context-parallel-size",
                 "micro-batch-size", "global-batch-size", "seq-length", "recompute-num-layers",
                 "num-distributed-optimizer-instances"):
        p.add_argument(f"--{name}", type=int)
    for name in ("sequence-parallel", "use-distributed-optimizer", "overlap-grad-reduce", "overlap-param-gather",
                 "overlap-moe-expert-parallel-comm", "delay-wgrad-compute", "tp-comm-overlap", "bf16",
                 "fp8-dot-product-attention", "moe-permute-fusion", "use-megatron-fsdp", "fsdp-double-buffer",
                 "use-nccl-ub", "keep-fp8-transpose-cache",
                 # an older release's spellings (release_flags.RELEASE_SPELLINGS)
                 "external-cuda-graph", "enable-cuda-graph", "moe-enable-deepep"):
        p.add_argument(f"--{name}", action="store_true")
    for name in ("moe-token-dispatcher-type", "moe-flex-dispatcher-backend", "recompute-granularity",
                 "recompute-method", "fp8-format", "fp8-recipe", "fp4-format", "fp4-recipe",
                 "pipeline-model-parallel-layout", "outer-dp-sharding-strategy"):
        p.add_argument(f"--{name}")
    p.add_argument("--recompute-modules", nargs="+")
    p.add_argument("--cuda-graph-impl")
    p.add_argument("--cuda-graph-scope", nargs="+")
    return p


def _recompute_of(ns, model: ModelSpec | None = None) -> str:
    """The layout recompute mode of parsed Megatron arguments: selective granularity with the modules
    megatron_args writes for "selective" on `model` (with no model: any list with core_attn, megatron-core's
    default where none is given) is "selective"; another list is the mode of exactly that set (module_set_mode)."""
    if ns.recompute_granularity != "selective":
        return ns.recompute_granularity or "none"
    modules = ns.recompute_modules or ["core_attn"]
    if (set(modules) == set(recompute_modules(model))) if model is not None else "core_attn" in modules:
        return "selective"
    try:
        return module_set_mode(modules)
    except ValueError as exc:
        raise CommbenchError(f"--recompute-modules {' '.join(modules)}: {exc}") from None


def _graph_of(ns) -> str:
    if "full_iteration" in (ns.cuda_graph_scope or []):
        return "full"
    graphed = ns.cuda_graph_impl in ("transformer_engine", "local") or ns.external_cuda_graph or ns.enable_cuda_graph
    return "layer" if graphed else "none"


def _scope_of(ns, model: ModelSpec | None) -> str:
    """--cuda-graph-scope as the layout field: '' where it is the recipes' scope for the model (or, with
    no model, for any kind of model: megatron_args writes that scope for '')."""
    if _graph_of(ns) != "layer":
        return ""
    modules = set(ns.cuda_graph_scope or [])
    if not modules or modules == {"full"}:
        return WHOLE_LAYER_NAME
    kinds = [default_scope(model)] if model is not None else [
        ("attn", "moe_router", "moe_preprocess"), ("attn", "mlp"), ("attn", "mamba"),
        ("attn", "mamba", "moe_router", "moe_preprocess")]
    return "" if any(modules == set(k) for k in kinds) else "+".join(sorted(modules))


def parse_megatron_args(args: list[str] | str, num_gpus: int, model: ModelSpec | None = None) -> Layout:
    """The layout a Megatron-LM argument list describes (the inverse of `megatron_args`; `model` tells
    the recipes' CUDA-graph scope for it from another)."""
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    try:
        ns, _ = _parser().parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise CommbenchError(f"Megatron arguments do not parse: {exc}") from None
    tp, pp, cp = ns.tensor_model_parallel_size or 1, ns.pipeline_model_parallel_size or 1, ns.context_parallel_size or 1
    if num_gpus % (tp * pp * cp):
        raise invalid("gpus", num_gpus, f"a multiple of tp*pp*cp = {tp * pp * cp}")
    vp = ns.num_virtual_stages_per_pipeline_rank or 1
    if ns.pipeline_model_parallel_layout:
        stages = parse_layout_text(ns.pipeline_model_parallel_layout)
        if len(stages) % pp:
            raise invalid("--pipeline-model-parallel-layout", ns.pipeline_model_parallel_layout,
                          f"a number of stages divisible by pp = {pp}")
        vp = len(stages) // pp
    precision = "bf16"
    if ns.fp8_recipe == "mxfp8":
        precision = "mxfp8"
    elif ns.fp8_format:
        precision = "fp8"
    elif ns.fp4_recipe == "nvfp4" and ns.fp4_format:
        precision = "nvfp4"
    return Layout(tp=tp, pp=pp, vp=vp,
                  ep=ns.expert_model_parallel_size or 1, etp=ns.expert_tensor_parallel_size or tp, cp=cp,
                  dp=num_gpus // (tp * pp * cp), mbs=ns.micro_batch_size or 1, gbs=ns.global_batch_size or 1,
                  sequence_parallel=ns.sequence_parallel or tp == 1, recompute=_recompute_of(ns, model),
                  recompute_layers=(ns.recompute_num_layers or 0) if (_recompute_of(ns, model) == "full"
                                                                       and ns.recompute_method == "block") else 0,
                  cuda_graph=_graph_of(ns), cuda_graph_scope=_scope_of(ns, model), fp8_attention=ns.fp8_dot_product_attention, fused_moe=ns.moe_permute_fusion,
                  dispatcher=ns.moe_token_dispatcher_type or "alltoall", precision=precision,
                  distributed_optimizer=ns.use_distributed_optimizer, tp_comm_overlap=ns.tp_comm_overlap,
                  moe_a2a_overlap=ns.overlap_moe_expert_parallel_comm, dp_overlap=ns.overlap_grad_reduce,
                  fsdp=ns.use_megatron_fsdp,
                  fsdp_replicas=(ns.num_distributed_optimizer_instances or 1) if ns.use_megatron_fsdp else 1,
                  fsdp_outer_optim=bool(ns.use_megatron_fsdp and (ns.num_distributed_optimizer_instances or 1) > 1
                                        and ns.outer_dp_sharding_strategy == "optim"),
                  # NCCL user buffers turn double buffering on (megatron-core param_and_grad_buffer.py; arguments.py);
                  # without Megatron-FSDP the field keeps its default (it is read with fsdp only)
                  fsdp_double_buffer=bool(ns.fsdp_double_buffer or ns.use_nccl_ub) if ns.use_megatron_fsdp else True,
                  keep_fp8_transpose_cache=bool(ns.use_megatron_fsdp and ns.keep_fp8_transpose_cache))
