"""Step-time model of one training step for many layouts at once (numpy, one row per layout).

Per micro-batch on the busiest pipeline stage (layers split evenly over PP, as Megatron's
embedding/loss stage accounting arranges), forward + backward:
- GEMMs: model FLOPs (FLOPS.md) / (TP CP PP) at the precision's peak x the fitted GEMM
  efficiency (MXFP8's block-scaled kernels at kernels.MXFP8_GEMM_RATIO of per-tensor fp8's rate); expert
  GEMMs at the grouped-GEMM efficiency of their precision; the modules the framework keeps in bf16 whatever the
  precision (Megatron's output layer, its MTP layers under nvfp4: step/module_precision.py) at the bf16 rates;
  plus each GEMM's compulsory
  operand traffic at HBM bandwidth for its shape (gemm_shape.py: narrow TP/ETP shards and few
  tokens per expert run below peak). Attention core in bf16.
- memory-bound kernels: bytes touched per token per layer (memory.py) at HBM bandwidth, with CP the
  ring attention's per-step merges of partial outputs and dq (memory.cp_merge_bytes_per_token).
- fixed per-layer (and per-MoE-layer) host/launch overhead; recompute's extra forward; CPU
  offloading's copies to host memory and back where they outlast the pass beside them.
- TP: per layer 2 all-reduces fwd + 2 bwd, or with sequence parallel 2 all-gathers + 2
  reduce-scatters each way (Korthikanti et al., arXiv 2205.05198); in MoE layers only the shared
  experts use TP; routed experts use ETP.
- ETP: per MoE layer an all-gather of the dispatched tokens over the ETP group before the expert
  GEMMs and a reduce-scatter after, forward and mirrored backward (Megatron-Core alltoall
  dispatcher with expert TP; MoE parallel folding, arXiv 2504.14960).
- EP: dispatch + combine, forward and backward (4 all-to-alls) per MoE layer, and ETP's gather/
  scatter around the expert GEMMs (moe_comm.py); overlapped with another micro-batch's compute
  (--overlap-moe-expert-parallel-comm) it hides ep_overlap_efficiency of that window and costs the
  SMs the dispatcher holds.
- Tensor-core rates are the datasheet's x the power-limited fraction (kernels.sustained_tensor_fraction).
- Expert GEMM kernels: a fixed time per local expert GEMM kernel unless fused (kernels.py).
- CP: ring attention passes K,V (cp-1) times forward and K,V + dK,dV backward; hidden behind the
  attention core (Liu et al., Ring Attention, arXiv 2310.01889).
- PP: send/recv of one activation per virtual stage, forward and backward.
Step = micro-batches x per-micro-batch time + bubble (PP-1)/VP x per-micro-batch time
(interleaved 1F1B, Narayanan et al., arXiv 2104.04473) + exposed DP traffic + optimizer step.
DP: gradient reduce-scatter (all-reduce without the distributed optimizer) and parameter
all-gather, dense (over DP x CP) and expert (over EDP) groups apart; with overlap, the RS hides
behind the last micro-batch's backward and the AG behind the first forward; exposed = what
does not fit in the window + the last bucket. Every overlapped term reports total and exposed.
Communication times come from the fabric cost model (commbench.costmodel).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from commbench.planner.step import cp_comm, fsdp, gdn, gemm_shape, kernels, loss_time, mamba, memory, module_precision, \
    moe_comm, tp_comm
from commbench.planner.step.mamba import block_counts
from commbench.planner.step.stage_memory import candidate_arrays
from commbench.planner.step.dp_sync import ddp_param_gather_bytes, dp_sync_s, grad_bytes, hidden as _hidden, \
    megatron_bucket_params, mxfp8_param_recast_bytes, param_gather_bytes
from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.planner.layout.spec import CODE_FIELDS, LayoutArrays, layout_violations
# Issue 14 hook: the busiest pipeline rank of the layer split Megatron builds (split.py) sets the pace.
from commbench.planner.layout.recompute import codes_running, graph_kept_moe_norm, mode_modules
from commbench.planner.layout.split import loss_stage_share, stage_imbalance
from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.counts import (flops_breakdown, framework_flops_per_token, framework_model,
                                             param_counts, step_vocab, up_projection_flops)
from commbench.planner.layout.connections import tp_overlap_runs
from commbench.planner.layout.placement import domains_touched, gpus_per_rack, pair_domains
from commbench.row_groups import RowGroups

FP8_CODES = (CODE_FIELDS["precision"].index("fp8"), CODE_FIELDS["precision"].index("mxfp8"))
ACT_BYTES = 2      # bf16 activations on the wire (TP, EP, PP, CP)
OPTIMIZER_BYTES_PER_PARAM = 32  # Adam: read grad, master, m, v (16 B); write master, m, v (12 B); bf16 param (2 B)


def _costmodel():
    from commbench.costmodel import collective_time_s, moe_all_to_all_time_s
    return collective_time_s, moe_all_to_all_time_s


def _hierarchical():
    from commbench.costmodel import hierarchical_reduce_scatter_time_s
    return hierarchical_reduce_scatter_time_s


@dataclass(frozen=True, kw_only=True)
class StepBreakdown:
    """Predicted per-step figures, one array entry per layout (seconds, bytes, rates)."""

    valid: np.ndarray
    violations: np.ndarray
    num_microbatches: np.ndarray
    compute_s: np.ndarray
    gemm_s: np.ndarray
    attention_s: np.ndarray
    memory_bound_s: np.ndarray
    overhead_s: np.ndarray
    recompute_s: np.ndarray
    loss_kernel_extra_s: np.ndarray      # in compute_s: the native cross entropy's time over TE's (loss_time.py)
    offload_exposed_s: np.ndarray
    tp_total_s: np.ndarray
    tp_exposed_s: np.ndarray
    ep_total_s: np.ndarray
    ep_exposed_s: np.ndarray
    etp_total_s: np.ndarray
    etp_exposed_s: np.ndarray
    cp_total_s: np.ndarray
    cp_exposed_s: np.ndarray
    pp_total_s: np.ndarray
    pp_exposed_s: np.ndarray
    dp_dense_rs_total_s: np.ndarray
    dp_dense_rs_exposed_s: np.ndarray
    dp_dense_ag_total_s: np.ndarray
    dp_dense_ag_exposed_s: np.ndarray
    dp_expert_rs_total_s: np.ndarray
    dp_expert_rs_exposed_s: np.ndarray
    dp_expert_ag_total_s: np.ndarray
    dp_expert_ag_exposed_s: np.ndarray
    optimizer_s: np.ndarray
    bubble_s: np.ndarray
    step_s: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    model_tflops_per_gpu: np.ndarray
    peak_tflops: np.ndarray
    mfu: np.ndarray
    mem_weights_bytes: np.ndarray
    mem_grads_bytes: np.ndarray
    mem_optimizer_bytes: np.ndarray
    mem_activations_bytes: np.ndarray
    mem_optimizer_step_bytes: np.ndarray  # the optimizer step's fp32 gradient copy: the total holds max(it, activations)
    mem_reserve_bytes: np.ndarray
    mem_total_bytes: np.ndarray
    mem_capacity_bytes: np.ndarray
    mem_host_offload_bytes: np.ndarray   # host memory CPU offloading fills (fits needs it within the host's share)
    mem_pipeline_rank: np.ndarray        # the pipeline rank the mem_* bytes are of: the one that holds the most
    fits: np.ndarray

    def row(self, index: int) -> dict[str, float | bool | int]:
        """One layout's figures as plain Python values (for tables and JSON)."""
        out: dict[str, float | bool | int] = {}
        for f in fields(self):
            value = getattr(self, f.name)[index]
            out[f.name] = value.item() if hasattr(value, "item") else value
        return out

    def take(self, index) -> StepBreakdown:
        """The rows at `index` (indices or a slice). The step model works row by row, so this is the breakdown of
        the same layouts evaluated on their own."""
        return StepBreakdown(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def where(self, mask: np.ndarray, other: StepBreakdown) -> StepBreakdown:
        """`other`'s rows where `mask`, this one's elsewhere (both of the same number of layouts)."""
        return StepBreakdown(**{f.name: np.where(mask, getattr(other, f.name), getattr(self, f.name))
                                for f in fields(self)})

    def exposed_comm_s(self) -> np.ndarray:
        return (self.tp_exposed_s + self.ep_exposed_s + self.etp_exposed_s + self.cp_exposed_s + self.pp_exposed_s
                + self.dp_dense_rs_exposed_s + self.dp_dense_ag_exposed_s
                + self.dp_expert_rs_exposed_s + self.dp_expert_ag_exposed_s)


def dense_peak_tflops(gpu, precision: str) -> float:
    """The GPU's dense datasheet peak in `precision`, the figure a plan's MFU is of (nan where it lacks the format)."""
    fp4 = gpu.fp4_tflops if gpu.fp4_tflops else np.nan
    return {"bf16": gpu.bf16_tflops, "fp8": gpu.fp8_tflops, "mxfp8": gpu.fp8_tflops, "nvfp4": fp4}[precision]


def _fsdp_fp8_transpose_bytes(model, a, *, tp, ep, etp, gpu, framework, mamba_units, vocab) -> np.ndarray:
    """HBM bytes of one Megatron-FSDP fp8 transpose pass (step/fsdp.py fp8_transpose_bytes_per_param) on one GPU:
    every parameter of its units (FSDP rows run at pp = 1: memory.fsdp_units_per_gpu of the one rank, as the memory
    charges), read and written once."""
    per_param = fsdp.fp8_transpose_bytes_per_param(
        a.precision == CODE_FIELDS["precision"].index("fp8"),
        param_gather_bytes(a.precision, a.distributed_optimizer, FP8_CODES, framework),
        memory.fp8_transpose_needed(gpu), framework)
    if not np.any(per_param > 0):
        return np.zeros(len(a))
    load = candidate_arrays(model, 1, 1, tp, framework)[0]   # pp = 1: the one rank, the whole model
    vocab_params = vocab * model.hidden
    _, dense_local, expert_local = memory.rank_params_per_gpu(load, vocab_params=vocab_params, dense_share=1.0 / tp,
                                                              expert_share=1.0 / (etp * ep))
    units = memory.fsdp_units_per_gpu(model, load, dense_local, expert_local, vocab_params=vocab_params,
                                      dense_share=1.0 / tp, framework=framework, mamba_units=mamba_units)[2]
    return fsdp.FP8_TRANSPOSE_PASS_BYTES * per_param * units


def _mtp_gemm_flops(model: ModelSpec, seq_len: int, vocab) -> tuple[float, float]:
    """(dense, routed-expert) GEMM FLOPs per token of the MTP layers beside their output heads: the projection and
    the transformer layer each adds (flops_breakdown with and without them; the heads' logits are the output
    layer's, counted there). 0 without MTP."""
    if not model.num_mtp_layers:
        return 0.0, 0.0
    with_mtp, without = flops_breakdown(model, seq_len, vocab=vocab), flops_breakdown(model, seq_len, False, vocab)
    dense = (with_mtp.gemm - with_mtp.routed_experts - with_mtp.logits) \
        - (without.gemm - without.routed_experts - without.logits)
    return float(np.max(dense)), float(with_mtp.routed_experts - without.routed_experts)


def peak_tflops(gpu, precision_codes: np.ndarray) -> np.ndarray:
    """Dense datasheet peak per precision code (nan where the GPU lacks the format)."""
    return np.array([dense_peak_tflops(gpu, p) for p in CODE_FIELDS["precision"]], dtype=np.float64)[precision_codes]


def evaluate_layouts(model: ModelSpec, system, layouts: LayoutArrays, *, seq_len: int | None = None,
                     calibration: Calibration = CALIBRATED, moe_imbalance: float = 1.0,
                     moe_capacity_factor: float | None = None, framework: str = "megatron",
                     megatron_core: tuple[int, int] | None = None, loss: str | None = None) -> StepBreakdown:
    """Predict one training step for every layout in `layouts` on `system` (a commbench.costmodel
    Fabric: `.gpu` datasheet, `.domain_size`, `.num_gpus`). Invalid layouts get valid=False,
    step_s=inf and fits=False; their other figures are meaningless. `framework` (megatron, torchtitan)
    sets what the layout fields do not: the loss's logits, the parameter all-gather's dtype and the layers trained
    (models/counts.framework_model: TorchTitan's launch trains no MTP layer). `megatron_core` (MAJOR, MINOR): the
    megatron-core the run uses where it is not the plans' 0.16.1 (a published run's release: Megatron-FSDP's unit set,
    step/fsdp.py mamba_units). `loss`: the cross entropy the run runs, whose logits the loss stage holds
    (step/loss_memory.py: None, the framework's emitted launch's; run_loss for a published run or a recipe); the step
    time prices TE's kernel in the fitted terms and native's traffic over it explicitly (step/loss_time.py,
    loss_kernel_extra_s)."""
    model = framework_model(model, framework)   # what the emitted launch trains (TorchTitan: no MTP)
    mamba_units = fsdp.mamba_units(framework, megatron_core)
    collective_time_s, moe_all_to_all_time_s = _costmodel()
    hierarchical_reduce_scatter_time_s = _hierarchical()
    cal = calibration
    gpu = system.gpu
    # Ranks per rack as placement.py lays the job out (e.g. 256 GPUs of NVL72 racks as 4 x 64), so
    # every "does this group cross a rack" test agrees with the placement the plan prints.
    dom = gpus_per_rack(int(system.num_gpus), int(system.domain_size))
    max_dom = int(getattr(system, "num_domains", 0) or 0) or None
    s = seq_len or model.seq_len
    a = layouts
    violations = layout_violations(model, a, system.num_gpus, s, framework)
    peak = peak_tflops(gpu, a.precision)
    valid = (violations == 0) & np.isfinite(peak)
    one = np.ones(len(a), dtype=np.int64)
    # Invalid rows are computed on a harmless stand-in layout so no cost-model call can fail.
    tp, cp, pp, vp = (np.where(valid, x, one) for x in (a.tp, a.cp, a.pp, a.vp))
    ep, etp, mbs = (np.where(valid, x, one) for x in (a.ep, a.etp, a.mbs))
    dp = np.where(valid, a.dp, system.num_gpus)
    gbs = np.where(valid, a.gbs, dp)
    peak = np.where(valid, peak, gpu.bf16_tflops)
    world = tp * cp * dp * pp
    edp = tp * cp * dp // (etp * ep)
    n_mb = gbs // (mbs * dp)
    sp = a.sequence_parallel | (tp == 1)
    # The communication terms a structure fixes are computed once per group of rows that share it (a search crosses
    # each structure with several flag choices; commbench.row_groups): `structure` fixes the TP and MoE ones,
    # `dp_key` the DP ones (their bytes, groups and domains; not the overlap windows, applied per row).
    # (dp: the world rule fixes it by tp, cp and pp, the stand-in rows' too; keyed all the same, so the PP and DP terms'
    # domains are the groups' own by construction)
    structure = RowGroups(tp, cp, pp, vp, ep, etp, mbs, a.precision, a.dispatcher, sp, dp)
    dp_key = RowGroups(tp, cp, pp, dp, ep, etp, a.precision, a.distributed_optimizer, a.fsdp)

    # The output layer's rows as the framework builds them (Megatron-LM pads to make_vocab_size_divisible_by x TP:
    # models/counts.step_vocab): its GEMM, weights, gradients, optimizer state and logits are charged at these rows.
    vocab = step_vocab(model, tp, framework)
    fl = flops_breakdown(model, s, vocab=vocab)
    tokens_mb = (mbs * s).astype(np.float64)          # tokens of one micro-batch (one DP replica)
    tokens_gpu = tokens_mb / (tp * cp * pp)           # its share of FLOPs per GPU (balanced stages)
    fp4_ratio = np.where(a.precision == CODE_FIELDS["precision"].index("nvfp4"), cal.fp4_gemm_ratio, 1.0)
    # MXFP8's block-scaled dense GEMMs run below per-tensor fp8's at the same peak (kernels.MXFP8_GEMM_RATIO, a
    # published kernel benchmark); its grouped GEMMs are the published MXFP8 anchor itself (grouped_gemm_8bit_...)
    mx_ratio = np.where(a.precision == CODE_FIELDS["precision"].index("mxfp8"), kernels.MXFP8_GEMM_RATIO, 1.0)
    # Tensor-core rates at the power limit (kernels.sustained_tensor_fraction); MFU stays on the datasheet.
    sustained = kernels.sustained_tensor_fraction(gpu)
    dense_rate = peak * 1e12 * sustained * cal.gemm_efficiency(gpu.name) * fp4_ratio * mx_ratio
    # Grouped (expert) GEMMs per precision: 8/4-bit at the published MXFP8 kernel anchor
    # (terms.Calibration.grouped_gemm_8bit_efficiency, not fitted), bf16 at the fitted fraction.
    low_bit = a.precision != CODE_FIELDS["precision"].index("bf16")
    grouped_eff = np.where(low_bit, cal.grouped_gemm_8bit_efficiency, cal.grouped_gemm_efficiency)
    grouped_rate = peak * 1e12 * sustained * grouped_eff * fp4_ratio
    other_gemm = fl.gemm - fl.routed_experts - mamba.counted_scan_flops_per_token(model)  # SSD: below
    # The GEMMs that stay bf16 whatever the precision (step/module_precision.py): Megatron's output layer (every
    # head's logits), and its MTP layers under nvfp4; at the bf16 rates (dense, grouped) of the same fitted terms.
    out_q = module_precision.output_layer_quantized(a.precision, framework, model.is_moe)
    mtp_q = module_precision.mtp_quantized(a.precision, framework)
    mtp_dense, mtp_routed = _mtp_gemm_flops(model, s, vocab)
    bf16_dense = np.where(out_q, 0.0, fl.logits) + np.where(mtp_q, 0.0, mtp_dense)
    bf16_routed = np.where(mtp_q, 0.0, mtp_routed)
    bf16_dense_rate = gpu.bf16_tflops * 1e12 * sustained * cal.gemm_efficiency(gpu.name)
    bf16_grouped_rate = gpu.bf16_tflops * 1e12 * sustained * cal.grouped_gemm_efficiency
    imbalance = stage_imbalance(model, pp, vp, vocab)   # the loss stage at the rows charged here
    tokens_gpu = tokens_gpu * imbalance
    # Roofline per GEMM kind (kernels.smooth_max): compute at the fitted efficiency vs the compulsory
    # operand traffic of its shape (gemm_shape.py) at HBM bandwidth.
    dense_traffic, routed_traffic = gemm_shape.traffic_bytes_per_token(
        model, fl, tokens_mb=tokens_mb, tp=tp, cp=cp, ep=ep, etp=etp, precision=a.precision, vocab=vocab,
        output_layer_quantized=out_q)
    hbm = gpu.hbm_tbps * 1e12
    dense_gemm_s = kernels.smooth_max(tokens_gpu * ((other_gemm - bf16_dense) / dense_rate
                                                    + bf16_dense / bf16_dense_rate),
                                      tokens_gpu * cal.gemm_traffic_factor * dense_traffic / hbm)
    # Expert GEMMs on the busiest EP rank: dropless routing computes the tokens it receives
    # (moe_imbalance x the mean); a full-iteration CUDA graph needs static shapes, so every expert's
    # input is padded to its capacity (moe_capacity_factor x the mean, at least the busiest rank's:
    # Megatron --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity).
    capacity = max(moe_capacity_factor if moe_capacity_factor is not None else moe_imbalance, 1.0)
    expert_load = np.where(a.cuda_graph == CODE_FIELDS["cuda_graph"].index("full"),
                           np.maximum(capacity, np.where(ep > 1, moe_imbalance, 1.0)),
                           np.where(ep > 1, moe_imbalance, 1.0))
    routed_gemm_s = kernels.smooth_max(tokens_gpu * expert_load * ((fl.routed_experts - bf16_routed) / grouped_rate
                                                                   + bf16_routed / bf16_grouped_rate),
                                       tokens_gpu * expert_load * cal.gemm_traffic_factor * routed_traffic / hbm)
    gemm_s = dense_gemm_s + routed_gemm_s
    # Mamba-2's SSD scan: bf16 chunk matmuls at the kernels' measured throughput (step/mamba.py SSD_TENSOR_FRACTION).
    gemm_s = gemm_s + mamba.ssd_scan_s(model, tokens_gpu * model.num_mamba_layers,
                                       gpu.bf16_tflops * 1e12 * sustained * mamba.SSD_TENSOR_FRACTION)
    # Attention core: tensor cores (bf16, or fp8 with fp8_attention in an 8/4-bit recipe) vs exp units.
    fp8_attn = a.fp8_attention & (a.precision != CODE_FIELDS["precision"].index("bf16"))
    attn_peak = np.where(fp8_attn, gpu.fp8_tflops, gpu.bf16_tflops) * 1e12 * sustained
    attention_s = kernels.attention_time_s(tokens_gpu * fl.attention_core,
                                           tokens_gpu * kernels.attention_exps_per_token(model, s),
                                           tc_rate_flops=attn_peak * cal.attention_efficiency,
                                           sfu_rate_exps=kernels.sfu_rate_exps(gpu))
    # Layers of the busiest pipeline stage: the one place the layer split enters the step model.
    layers_per_stage_max = (model.num_layers + model.num_mtp_layers) / pp * imbalance
    moe_layers_per_stage_max = ((model.num_moe_layers + model.num_mtp_layers) if model.is_moe else 0) / pp * imbalance
    layers_stage, moe_stage = layers_per_stage_max, moe_layers_per_stage_max
    local_experts = model.num_routed_experts / ep if model.is_moe else np.zeros(len(a))
    fused_mlp = kernels.fused_grouped_mlp(a.fused_moe, a.precision, gpu)
    gemm_s = gemm_s + kernels.expert_kernel_time_s(moe_stage, local_experts, fused_mlp, cal)
    mem_bytes = memory.elementwise_bytes_per_microbatch(model, a, tp, cp, pp, sp, tokens_mb, fused_mlp,
                                                       framework) * imbalance
    # Memory-bound kernels (here, the optimizer step and MXFP8's parameter re-cast below) at hbm_efficiency of the HBM
    # peak x the SMs' power-limited rate (kernels.sustained_sm_rate: they run at the SMs' clock, far below the HBM peak)
    memory_rate = hbm * cal.hbm_efficiency * kernels.sustained_sm_rate(gpu)
    memory_bound_s = mem_bytes / memory_rate
    recompute = a.recompute
    # Recompute repeats forward work: full = a third of everything; otherwise per module the layout's mode runs
    # (layout/recompute.mode_modules: "selective" = core_attn with the light modules that free something on the
    # model; mla_up_proj, moe_act alone; a recipe's module set, e.g. layernorm+moe_act, exactly its modules):
    # - core_attn: the attention core's forward on the attention layers (attention_s counts only those; a third of
    #   its fwd + bwd) and CP's forward merges (memory.selective_recompute_bytes_...);
    # - layernorm: the norms it frees (the same function);
    # - mla_up_proj: the forward of MLA's up-projections (q_b, kv_b: about half the attention projection FLOPs);
    # - moe_act: the experts' activation function, its forward pass once more (memory-bound:
    #   memory.moe_act_recompute_bytes_...);
    # - mlp: the dense MLP blocks' forward (their GEMMs and activation: memory.mlp_recompute_bytes_...).
    # (Until STEP_MODEL 2026-12-06.14 selective was attention_s / 3 + memory_bound_s / 6: a sixth of every layer's
    # memory-bound work, a hybrid's Mamba and MoE layers' included, which no module re-runs.)
    up_proj_s = tokens_gpu * up_projection_flops(model, fl) / dense_rate / 3.0
    moe_act_s = (memory.moe_act_recompute_bytes_per_microbatch(model, tp, cp, tokens_mb, moe_stage, fused_mlp)
                 / memory_rate) if model.is_moe else np.zeros(len(a))
    recompute_s = np.where(recompute == 2, (gemm_s + attention_s + memory_bound_s) / 3.0
                           * memory.full_recompute_share(model, a), 0.0)
    kept_norm = None
    for code in np.unique(recompute):
        modules = mode_modules(model, CODE_FIELDS["recompute"][code])
        if not modules:
            continue
        if kept_norm is None and model.is_moe and framework == "megatron" and "layernorm" in modules:
            kept_norm = graph_kept_moe_norm(model, a)
        module_s = memory.selective_recompute_bytes_per_microbatch(
            model, a, tp, cp, pp, sp, tokens_mb, kept_norm, modules) * imbalance / memory_rate
        if "core_attn" in modules:
            module_s = module_s + attention_s / 3.0
        if "moe_act" in modules:
            module_s = module_s + moe_act_s
        if "mla_up_proj" in modules:
            module_s = module_s + up_proj_s
        if "mlp" in modules:
            module_s = module_s + tokens_gpu * fl.dense_mlp / dense_rate / 3.0 \
                + memory.mlp_recompute_bytes_per_microbatch(model, tp, cp, pp, tokens_mb) * imbalance / memory_rate
        recompute_s = np.where(recompute == code, module_s, recompute_s)
    # Megatron-FSDP on Hopper with per-tensor fp8 weights: each unit's fp8 transposes made every micro-batch, or once a
    # step where the launch keeps them and its megatron-core makes them only on use (step/fsdp.py "Hopper per-tensor
    # fp8 weights"): memory-bound, after the recompute (it re-runs no transpose); per micro-batch, the step's share
    if np.any(a.fsdp):
        passes_per_mb = fsdp.fp8_transpose_passes_per_step(a.keep_fp8_transpose_cache, n_mb, megatron_core) \
            / np.maximum(n_mb, 1)
        memory_bound_s = memory_bound_s + np.where(a.fsdp, _fsdp_fp8_transpose_bytes(
            model, a, tp=tp, ep=ep, etp=etp, gpu=gpu, framework=framework, mamba_units=mamba_units,
            vocab=vocab) * passes_per_mb, 0.0) / memory_rate
    # Host launches run ahead of the GPU: a layer exposes only what its host time exceeds its GPU time by.
    # The share of the stage's layers whose forward full recompute re-runs, collectives included (tp_comm.py,
    # moe_comm.py); selective recompute re-runs the attention core (core_attn), which communicates only under CP.
    rerun_full = np.where(recompute == 2, memory.full_recompute_share(model, a), 0.0)
    core_attn_rerun = np.isin(recompute, codes_running(model, "core_attn"))
    gpu_layer_s = (gemm_s + attention_s + memory_bound_s + recompute_s) / np.maximum(layers_stage, 1e-9)
    overhead_s = kernels.host_time_s(layers_stage, moe_stage, a.cuda_graph, cal, gpu_layer_s, model=model,
                                     graph_scope=a.cuda_graph_scope)
    compute_mb = gemm_s + attention_s + memory_bound_s + overhead_s + recompute_s
    # The loss's cross entropy where the run launches megatron-core's native kernel: the HBM time it takes over
    # Transformer Engine's, which the fitted terms price (step/loss_time.py), on the loss's pipeline rank (the last: its
    # compute is loss_stage_share of the mean rank's, as the busiest's is imbalance of it). It adds what that rank, with
    # it, then takes beyond the busiest's compute (all of it without PP, or where the loss's rank is the busiest).
    loss_extra_mb = loss_time.loss_extra_bytes_per_microbatch(model, tp=tp, cp=cp, tokens_mb=tokens_mb,
                                                              framework=framework, loss=loss) / memory_rate
    if np.any(loss_extra_mb > 0):
        loss_rank_mb = compute_mb * loss_stage_share(model, pp, vp, vocab) / imbalance + loss_extra_mb
        loss_extra_mb = np.maximum(loss_rank_mb - compute_mb, 0.0)
        compute_mb = compute_mb + loss_extra_mb
    # CPU offloading: the offloaded layers' activations cross the host link out and back (kernels.py).
    offload_mb, moved = np.zeros(len(a)), None
    if np.any(a.cpu_offload_layers > 0):
        moved = memory.offloaded_bytes_per_microbatch(model, a, tp=tp, cp=cp, pp=pp, etp=etp, tokens_mb=tokens_mb,
                                                      sp=sp, framework=framework)
    # Module-level offload of the fused grouped MLP's large saved tensors (memory.fused_mlp_offload_elements): the
    # stage's MoE layers but the kept margin send them out after their forward and read them back before their
    # backward, on their own copy streams (fine_grained_activation_offload.py: d2h_stream / h2d_stream, "asynchronously
    # transferring activations"): the same copies as layer offloading, charged by kernels.offload_exposed_s.
    if model.is_moe and np.any(a.fused_mlp_offload_min > 0):
        fused = memory.fused_mlp_offload_elements(model, a, tp=tp, cp=cp, etp=etp, tokens_mb=tokens_mb,
                                                  framework=framework)
        fused_moved = tokens_mb * fused * memory.fused_mlp_offloaded_layers(block_counts(model).moe / pp) * memory.BF16
        moved = fused_moved if moved is None else moved + fused_moved
    if moved is not None:
        offload_mb = kernels.offload_exposed_s(moved / kernels.host_link_bytes_per_s(gpu), compute_mb)

    # Tensor parallel: per (column, row) linear pair the forward and backward collectives (tp_comm.py).
    if np.any(tp > 1):
        g = structure
        tp_dom = domains_touched(g.of(tp), g.of(tp), dom, max_dom)

        # linear in the re-run share, which the structure does not fix: priced per group at 0 and 1 (the collectives
        # once), mixed per row
        shares = (0.0, 1.0) if np.any(rerun_full > 0) else (0.0,)
        pairs = [g.expand(x) for x in tp_comm.pair_times_s(
            system, collective_time_s, elements=g.of(tokens_mb / cp * model.hidden), precision=g.of(a.precision),
            sp=g.of(sp), tp=g.of(tp), domains=tp_dom, framework=framework, reruns=shares)]
        per_pair = pairs[0]
        if len(pairs) > 1:
            per_pair = per_pair + rerun_full * (pairs[1] - per_pair)
    else:
        per_pair = np.zeros(len(a))
    # attention block + dense MLP (+ the shared experts' MLP of MoE layers, TP-sharded like a dense
    # MLP): one linear pair each. Routed experts use the ETP group (below), not TP.
    # A Mamba block is TP-sharded like attention: one pair (step/mamba.py).
    blocks = block_counts(model)
    shared_moe = blocks.moe if (model.is_moe and model.num_shared_experts > 0) else 0
    tp_pairs_stage = (blocks.attention + blocks.linear + blocks.mamba + blocks.dense + shared_moe) / pp * imbalance
    tp_total_mb = per_pair * tp_pairs_stage
    # On Hopper TP comm overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron-FSDP and EP overlap rule out
    # (layout/connections.py): there the TP communication is charged exposed, --tp-comm-overlap or not.
    tp_overlapped = a.tp_comm_overlap & tp_overlap_runs(gpu.name, tp, a.fsdp, a.moe_a2a_overlap & (ep > 1))
    tp_exposed_mb = np.where(tp_overlapped, _hidden(tp_total_mb, gemm_s, cal.overlap_efficiency), tp_total_mb)

    # Expert parallel dispatch/combine and the expert-TP gather/scatter (moe_comm.py).
    g = structure

    # linear in the re-run share, as the TP pairs above
    totals = [tuple(g.expand(x) for x in pair) for pair in moe_comm.ep_etp_totals_each_s(
        model, system, g.columns(a, ("dispatcher", "precision")), tokens_mb=g.of(tokens_mb), tp=g.of(tp),
        cp=g.of(cp), ep=g.of(ep), etp=g.of(etp), moe_stage=g.of(moe_stage), rack_gpus=dom, max_domains=max_dom,
        moe_imbalance=moe_imbalance, cal=cal, collective_time_s=collective_time_s,
        moe_all_to_all_time_s=moe_all_to_all_time_s, framework=framework,
        reruns=(0.0, 1.0) if model.is_moe and np.any(rerun_full > 0) else (0.0,))]
    ep_total_mb, etp_total_mb = totals[0]
    if len(totals) > 1:
        ep_rerun, etp_rerun = totals[1]
        ep_total_mb = ep_total_mb + rerun_full * (ep_rerun - ep_total_mb)
        etp_total_mb = etp_total_mb + rerun_full * (etp_rerun - etp_total_mb)
    # The other micro-batch's wall time hides it, launch-bound stretches included; the syncs stall both.
    ep_window = compute_mb - kernels.moe_sync_time_s(moe_stage, a.cuda_graph, cal)
    ep_exposed_mb = np.where(a.moe_a2a_overlap, _hidden(ep_total_mb, ep_window, cal.ep_overlap_efficiency), ep_total_mb)
    # Overlapped dispatch/combine kernels hold SMs while compute runs beside them (kernels.py).
    ep_exposed_mb = ep_exposed_mb + np.where(a.moe_a2a_overlap, kernels.dispatcher_sm_fraction(gpu)
                                             * np.minimum(ep_total_mb, ep_window), 0.0)
    # The ETP gather/scatter sits in the dispatcher beside the all-to-all: hidden only when the
    # EP communication is overlapped with the other micro-batch (what is left of the window).
    etp_window = np.maximum(ep_window - ep_total_mb, 0.0)
    etp_exposed_mb = np.where(a.moe_a2a_overlap, _hidden(etp_total_mb, etp_window, cal.ep_overlap_efficiency),
                              etp_total_mb)

    # Context parallel ring: (cp-1) K,V passes fwd, K,V + dK,dV bwd, per layer. TorchTitan: blocking all-gathers
    # of K, V and reduce-scatters of dK, dV around FlexAttention, never hidden (step/cp_comm.py). Attention with
    # sinks: Megatron's all-to-all CP (ModelSpec.all_to_all_cp), never hidden.
    titan_cp = framework == "torchtitan" and bool(np.any(cp > 1))
    a2a_cp = not titan_cp and model.all_to_all_cp and bool(np.any(cp > 1))
    if titan_cp:
        cp_total_mb = cp_comm.titan_cp_s(system, collective_time_s, model, tokens_mb=tokens_mb, tp=tp, cp=cp,
                                         cp_domains=domains_touched(tp * cp, cp, dom, max_dom),
                                         attn_layers=blocks.attention / pp * imbalance,
                                         rerun=np.isin(a.recompute, [CODE_FIELDS["recompute"].index(r)
                                                                      for r in ("selective", "full")]))
    elif a2a_cp:
        cp_total_mb = cp_comm.a2a_cp_s(system, collective_time_s, model, tokens_mb=tokens_mb, tp=tp, cp=cp,
                                       cp_domains=domains_touched(tp * cp, cp, dom, max_dom),
                                       attn_layers=blocks.attention / pp * imbalance,
                                       rerun=np.where(core_attn_rerun, 1.0, rerun_full))
    elif np.any(cp > 1):
        kv_bytes = tokens_mb / cp * model.kv_dim / tp * ACT_BYTES
        g = structure   # the ring's step per group of rows (its bytes and domains are the structure's)
        cp_dom = domains_touched(g.of(tp * cp), g.of(cp), dom, max_dom)
        one_pass = g.expand(collective_time_s(system, "sendrecv", g.of(kv_bytes), np.full(len(g), 2),
                                              pair_domains(cp_dom > 1, dom)))
        attn_stage = blocks.attention / pp * imbalance
        # A recompute that re-runs the attention core re-runs its forward ring (TE's AttnFuncWithCPAndKVP2P runs
        # the K,V passes inside the core's forward): full (its share of the layers) and selective (core_attn).
        attn_rerun = np.where(core_attn_rerun, 1.0, rerun_full)
        cp_total_mb = np.where(cp > 1, attn_stage * (3.0 + attn_rerun) * (cp - 1) * one_pass, 0.0)
    else:
        cp_total_mb = np.zeros(len(a))
    cp_exposed_mb = cp_total_mb if titan_cp or a2a_cp else _hidden(cp_total_mb, attention_s, cal.overlap_efficiency)
    if blocks.mamba and np.any(cp > 1):  # Mamba's CP all-to-alls sit between its GEMMs: never hidden
        mamba_cp = blocks.mamba / pp * imbalance * mamba.cp_all_to_all_s(
            model, system, collective_time_s, tokens_mb=tokens_mb, tp=tp, cp=cp,
            cp_domains=domains_touched(tp * cp, cp, dom, max_dom), act_bytes=ACT_BYTES, rerun=rerun_full)
        cp_total_mb, cp_exposed_mb = cp_total_mb + mamba_cp, cp_exposed_mb + mamba_cp
    if blocks.linear and np.any(cp > 1):  # so do Gated DeltaNet's (26.06 on; invalid rows before: models/gdn.py)
        gdn_cp = blocks.linear / pp * imbalance * gdn.cp_all_to_all_s(
            model, system, collective_time_s, tokens_mb=tokens_mb, tp=tp, cp=cp,
            cp_domains=domains_touched(tp * cp, cp, dom, max_dom), act_bytes=ACT_BYTES, rerun=rerun_full)
        cp_total_mb, cp_exposed_mb = cp_total_mb + gdn_cp, cp_exposed_mb + gdn_cp

    # Pipeline send/recv: one activation per virtual stage each way (scattered over TP with SP).
    if np.any(pp > 1):
        pp_bytes = tokens_mb / (cp * np.where(sp, tp, 1)) * model.hidden * ACT_BYTES
        g = structure   # one send/recv per group of rows (its bytes and domains are the structure's)
        pp_dom = pair_domains((g.of(pp) > 1) & (g.of(tp * cp * dp) >= dom), dom)
        one_p2p = g.expand(collective_time_s(system, "sendrecv", g.of(pp_bytes), np.full(len(g), 2), pp_dom))
        pp_total_mb = np.where(pp > 1, 2.0 * vp * one_p2p, 0.0)
    else:
        pp_total_mb = np.zeros(len(a))
    # Interleaved schedules overlap p2p with compute (Megatron overlap_p2p_comm); 1F1B blocks on it. Hiding more of it
    # (0.85) ranks published layouts worse, not better (benchmarks/vendor_layouts.py docstring, fix-EE).
    pp_exposed_mb = np.where(vp > 1, pp_total_mb * (1.0 - cal.overlap_efficiency), pp_total_mb)

    t_mb = (compute_mb + tp_exposed_mb + ep_exposed_mb + etp_exposed_mb + cp_exposed_mb + pp_exposed_mb
            + offload_mb)
    bubble_s = (pp - 1) / vp * t_mb

    # Data parallel: dense params over DP x CP, expert params over EDP.
    pc = param_counts(model, vocab=vocab)
    dense_local = pc.non_expert / (tp * pp)
    expert_local = pc.expert / (etp * ep * pp)
    dense_group, expert_group = dp * cp, edp
    dense_dom, expert_dom = (structure.expand(domains_touched(structure.of(world / pp), structure.of(group), dom,
                                                              max_dom)) for group in (dense_group, expert_group))
    dist = a.distributed_optimizer
    # Overlap windows: the gradients of a model chunk are final after its last micro-batch's
    # backward; with VP chunks the earlier chunks finish during the cool-down, so their reduce-
    # scatter also hides behind the later chunks' backwards: (vp-1)/vp of the up to pp-1 cool-down
    # micro-batches (Megatron interleaved 1F1B, arXiv 2104.04473); the parameter all-gather mirrors
    # it in the warm-up forwards. vp=1: one micro-batch's backward / forward.
    extra = (vp - 1) / vp * np.minimum(n_mb, pp - 1)
    rs_window = compute_mb * 2.0 / 3.0 * (1.0 + extra)
    ag_window = compute_mb / 3.0 * (1.0 + extra)

    param_bytes = param_gather_bytes(a.precision, dist, FP8_CODES, framework)
    # the distributed optimizer gathers MXFP8 parameters in bf16 through the gradient buffer (dp_sync.py)
    ddp_param_bytes = ddp_param_gather_bytes(param_bytes, a.precision, a.fsdp, framework)
    bucket_params = megatron_bucket_params(cal, dense_group)   # dense and expert buffers alike

    # Parameters kept and gathered in bf16 whatever the precision (step/module_precision.py): the embedding and output
    # layer, and under nvfp4 the MTP layers (their routed experts in the expert group)
    mtp_experts = pc.mtp_routed_experts / (etp * ep * pp)
    dense_bf16 = module_precision.bf16_params_per_gpu(vocab_params_local=pc.embeddings / (tp * pp),
                                                      mtp_params_local=(pc.mtp - pc.mtp_routed_experts) / (tp * pp),
                                                      precision=a.precision, framework=framework)
    expert_bf16 = module_precision.bf16_params_per_gpu(vocab_params_local=0.0, mtp_params_local=mtp_experts,
                                                       precision=a.precision, framework=framework)

    def dp_terms(local, group, domains, bf16):
        return dp_sync_s(system, cal, collective_time_s, hierarchical_reduce_scatter_time_s, local=local,
                         param_bytes=module_precision.mixed_bytes(local, bf16, ddp_param_bytes),
                         grad_size=grad_bytes(framework), bucket_params=bucket_params,
                         group=group, domains=domains, dist=dist, dp_overlap=a.dp_overlap,
                         rs_window=rs_window, ag_window=ag_window, groups=dp_key)

    d_rs, d_rs_x, d_ag, d_ag_x = dp_terms(dense_local, dense_group, dense_dom, dense_bf16)
    if model.is_moe:
        e_rs, e_rs_x, e_ag, e_ag_x = dp_terms(expert_local, expert_group, expert_dom, expert_bf16)
    else:
        e_rs = e_rs_x = e_ag = e_ag_x = np.zeros(len(a))

    replicas = a.fsdp_replicas  # HSDP: FSDP within dp/replicas, replicas across (1 elsewhere: rule hsdp)
    shard_group = np.maximum(dense_group // replicas, 1)
    expert_shard_group = np.maximum(expert_group // replicas, 1)  # MoE HSDP: TorchTitan's efsdp per replica
    if np.any(a.fsdp):  # FSDP rows: per-unit gathers and reduce-scatters every micro-batch (step/fsdp.py)
        sel = np.flatnonzero(a.fsdp & valid)
        shard_dom = domains_touched(world / pp / replicas, shard_group, dom, max_dom)
        expert_shard_dom = domains_touched(world / pp / replicas, expert_shard_group, dom, max_dom)
        replica_dom = domains_touched(world / pp, replicas, dom, max_dom)
        # Megatron-FSDP's non-unit parameters (embedding, output layer, final norm, Mamba layers, MTP projections)
        # are gathered once per step and kept (step/fsdp.py); FSDP rows run at pp = 1 (layout rule fsdp), so the
        # one stage holds all of them (/ pp as dense_local); the units are the TransformerLayers.
        non_unit = fsdp.megatron_non_unit_params(
            model, vocab_params=vocab * model.hidden, vocab_matrices=1 if model.tied_embeddings else 2, loss=True,
            mamba_blocks=0 if mamba_units else blocks.mamba, mtp_layers=model.num_mtp_layers, dense_share=1.0 / tp,
            framework=framework) / pp
        units = blocks.layers - (blocks.mamba if framework == "megatron" and not mamba_units else 0)
        # the non-unit vocabulary matrices are bf16 parameters (module_precision): gathered at 2 B
        vocab_kept = np.where(framework == "megatron", pc.embeddings / (tp * pp), 0.0)
        for local, kept, kept_bf16, group, domains, terms in (
                (dense_local, non_unit, vocab_kept, dense_group, shard_dom, (d_rs, d_rs_x, d_ag, d_ag_x)),
                (expert_local, 0.0, 0.0, expert_group, expert_shard_dom, (e_rs, e_rs_x, e_ag, e_ag_x))):
            if not sel.size or not np.any(np.broadcast_to(local, tp.shape)[sel] > 0):
                continue
            got = fsdp.fsdp_sync_s(system, cal, collective_time_s, local=np.broadcast_to(local, tp.shape)[sel],
                                   kept_local=np.broadcast_to(kept, tp.shape)[sel],
                                   kept_bf16=np.broadcast_to(kept_bf16, tp.shape)[sel],
                                   group=group[sel], domains=np.broadcast_to(domains, tp.shape)[sel],
                                   n_mb=n_mb[sel], units=units, compute_mb=compute_mb[sel],
                                   dp_overlap=a.dp_overlap[sel], replicas=replicas[sel],
                                   replica_domains=np.broadcast_to(replica_dom, tp.shape)[sel],
                                   param_bytes=param_bytes[sel], grad_size=grad_bytes(framework))
            for out, value in zip(terms, got):
                out[sel] = value
    # HSDP's outer "optim" sharding (memory.outer_optim_shards) is charged in memory only: its optimizer steps 1/replicas
    # of the shard, but the updated parameters then cross the replicas by an all-gather after the step (the gradients
    # by a reduce-scatter instead of the all-reduce: a ring all-reduce's two halves), and where that gather runs is
    # not read here. Charging the smaller step alone (fix-BY) moved the two Nemotron-3-Ultra 26.08 rows, the only
    # rows with it, from +4.5% / +12.3% to +7.4% / +15.0% (GB300 / GB200): not kept.
    owned = np.where(dist, dense_local / shard_group + expert_local / expert_shard_group,
                     dense_local + expert_local)
    optimizer_s = owned * OPTIMIZER_BYTES_PER_PARAM / memory_rate
    # ... and, where MXFP8 parameters are gathered in bf16, their copy into the MXFP8 weights after the gather
    # (every parameter of the rank, once per step: dp_sync.mxfp8_param_recast_bytes), counted with the optimizer step
    # it completes (where a DP group of 1 gathers nothing, megatron-core still copies the buffer out)
    recast = mxfp8_param_recast_bytes(param_bytes, a.precision, a.fsdp, framework)
    optimizer_s = optimizer_s + (dense_local - dense_bf16 + expert_local - expert_bf16) * recast \
        / memory_rate   # MXFP8 parameters only: not the bf16 ones

    step_s = n_mb * t_mb + bubble_s + d_rs_x + d_ag_x + e_rs_x + e_ag_x + optimizer_s
    step_s = np.where(valid, step_s, np.inf)
    tokens_per_s_per_gpu = np.where(valid, gbs * s / (step_s * world), 0.0)
    # in the framework's own currency (models/counts.framework_flops_per_token), so a plan's figure is what its log
    # prints at the same tokens/s: Megatron-LM's training.py (and Megatron-Bridge's flop_utils.py) count the logits at
    # the padded vocabulary (= fl.total), TorchTitan 0.3.0's get_nparams_and_flops 6 x the parameters a token uses + the
    # attention not halved for the causal mask. The step time above is the same either way (fl: the work it charges).
    model_tflops = tokens_per_s_per_gpu * framework_flops_per_token(model, s, framework, vocab=vocab) / 1e12

    mem = memory.memory_per_gpu(model, a, system.gpu, cal, tp=tp, cp=cp, pp=pp, vp=vp, ep=ep, etp=etp,
                                dense_group=shard_group, expert_group=expert_shard_group, n_mb=n_mb,
                                tokens_mb=tokens_mb, sp=sp, framework=framework,
                                offloaded_bytes=moved, mamba_units=mamba_units, loss=loss)
    return StepBreakdown(
        valid=valid, violations=violations, num_microbatches=n_mb,
        compute_s=n_mb * compute_mb, gemm_s=n_mb * gemm_s, attention_s=n_mb * attention_s,
        memory_bound_s=n_mb * memory_bound_s, overhead_s=n_mb * overhead_s, recompute_s=n_mb * recompute_s,
        loss_kernel_extra_s=n_mb * loss_extra_mb,
        offload_exposed_s=n_mb * offload_mb,
        tp_total_s=n_mb * tp_total_mb, tp_exposed_s=n_mb * tp_exposed_mb,
        ep_total_s=n_mb * ep_total_mb, ep_exposed_s=n_mb * ep_exposed_mb,
        etp_total_s=n_mb * etp_total_mb, etp_exposed_s=n_mb * etp_exposed_mb,
        cp_total_s=n_mb * cp_total_mb, cp_exposed_s=n_mb * cp_exposed_mb,
        pp_total_s=n_mb * pp_total_mb, pp_exposed_s=n_mb * pp_exposed_mb,
        dp_dense_rs_total_s=d_rs, dp_dense_rs_exposed_s=d_rs_x, dp_dense_ag_total_s=d_ag, dp_dense_ag_exposed_s=d_ag_x,
        dp_expert_rs_total_s=e_rs, dp_expert_rs_exposed_s=e_rs_x,
        dp_expert_ag_total_s=e_ag, dp_expert_ag_exposed_s=e_ag_x,
        optimizer_s=optimizer_s, bubble_s=bubble_s, step_s=step_s,
        tokens_per_s_per_gpu=tokens_per_s_per_gpu, model_tflops_per_gpu=model_tflops, peak_tflops=peak,
        mfu=model_tflops / peak,
        mem_weights_bytes=mem.weights, mem_grads_bytes=mem.grads, mem_optimizer_bytes=mem.optimizer,
        mem_activations_bytes=mem.activations, mem_optimizer_step_bytes=mem.optimizer_step,
        mem_reserve_bytes=mem.reserve, mem_total_bytes=mem.total,
        mem_capacity_bytes=mem.capacity, mem_host_offload_bytes=mem.host_offload,
        mem_pipeline_rank=np.broadcast_to(mem.rank, np.shape(mem.capacity)).astype(np.int64),
        fits=valid & (mem.total <= mem.capacity) & (mem.host_offload <= mem.host_capacity),
    )
