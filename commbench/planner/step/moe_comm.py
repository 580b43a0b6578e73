"""MoE communication per micro-batch on the busiest pipeline stage, vectorised over layouts: the
expert-parallel dispatch and combine (4 all-to-alls per MoE layer: dispatch + combine forward, their
gradients backward) and the expert-tensor-parallel gather/scatter around the expert GEMMs.

Bytes: tokens per rank x copies x hidden (the latent size for latent MoE) x element size, copies = top-k with the alltoall dispatcher,
distinct destination ranks with the deduplicating flex dispatcher, and across scale-up domains
distinct destination domains (ep_traffic.py). Times come from the fabric cost model passed in (the
step model's `collective_time_s` and `moe_all_to_all_time_s`), divided by the fitted
`all_to_all_efficiency`; what overlap hides is the step model's business.

Expert tensor parallel (ETP > 1) as megatron-core 0.16.1 runs it (transformer/moe/token_dispatcher.py):
- alltoall dispatcher (MoEAlltoAllTokenDispatcher): the all-to-all over the EP group, then an all-gather over the
  ETP group of the tokens received before the expert GEMMs (dispatch_postprocess) and a reduce-scatter of the
  expert outputs after (combine_preprocess);
- flex dispatcher (MoEFlexTokenDispatcher): ONE fused all-to-all over the ETP x EP group (`tp_ep_group`), the
  routing map replicated over the ETP ranks of every destination (`_initialize_metadata`; DeepEP's
  router_topk = ETP x top-k), so each token reaches every ETP rank of each EP rank it routes to, and no ETP
  all-gather or reduce-scatter runs. Charged so here: the flex all-to-all on etp x ep ranks moving etp x the
  distinct destination EP ranks per token, and no ETP term.

TorchTitan 0.3.0 runs ETP only as etp = tp with ep = 1 (search/frameworks.py TITAN_ETP), and around the whole MoE
block rather than after a dispatch (models/common/moe_sharding.py _moe_sharding_config /
_routed_experts_sharding_configs: the block's input x_BLD is redistributed from the sequence-parallel layout to
Replicate over TP before the router, every rank routes all tokens through its TP shard of every expert, and the
Partial output is reduce-scattered back): an all-gather and a reduce-scatter of tokens x hidden in the activations'
bf16, forward and backward, not top-k copies.

Full recompute re-runs a recomputed layer's forward in its backward (tp_comm.py's docstring gives the source), its
token dispatcher with it: the forward's dispatch and combine all-to-alls (and, with the alltoall dispatcher and
ETP > 1, the forward's ETP all-gather and reduce-scatter) run again for that share of the MoE layers (`rerun`).

Checked (session 40, fix-DG): the alltoall dispatcher's all-to-all across 8-GPU nodes, where the planner ranks the
published Qwen3-235B-A22B 256x H100 layouts (TP2 PP8 VP4 EP32 over 4 nodes) 954th-2136th. Per rank per MoE layer per
micro-batch: 2048 tokens (4096 / TP2, sequence parallel) x top-8 copies x hidden 4096 x 2 B = 134.2 MB per
all-to-all, bf16 and undeduplicated (megatron-core 0d8e0714 = 25.11, token_dispatcher.py MoEAlltoAllTokenDispatcher:
permute() makes top-k copies, token_dispatch() all_to_all()s them over the EP group, no 8-bit path; the probs travel in
a second, 64 KB all-to-all, not charged), x4 (dispatch, combine, their gradients), no recompute; 24/32 of it leaves
the node: 2.234 ms each on h100-hgx (2.142 ms at 47 GB/s per ConnectX-7, nccl-tests #267/#290: 46-49 GB/s per 400
Gb/s NIC, + 92 us latency), 1.11x the 400 Gb/s line-rate floor (2.013 ms). Qwen3 has no node-limited routing and the
dispatcher no deduplication. The published rows confirm that price where nothing hides it: 25.09 (no EP overlap,
Megatron-Bridge bf71eba) is predicted -1.6% with 13.9 s of its 27.7 s step in the all-to-all (exact at 0.96x the
price), and gpt-oss-120b 64x B200 at EP64 over 8 nodes (same dispatcher, the all-to-all half the step) +0.8% / +2.1%
(25.11 / 26.02). The rows with EP overlap (25.11 on: workload_base_configs.py moe_a2a_overlap=True at 7af9601) are
-10% to -16% (26.04, 26.04.01 in benchmarks/newer_releases.py): what they lack is hiding (ep_overlap_efficiency, a
compromise with the in-node rows, terms.py), not a cheaper all-to-all. Predicted exactly, they would still trail the
planner's best (EP8 in a node, or Megatron-FSDP at EP1) by +19% to +61% (25.09, measured 1,204 against 1,880
predicted at EP8, 74.2 of 79.1 GiB): the cross-node all-to-all is at the NIC's floor, so the gap is a find or a
feasibility question (memory), not this module's price. Nothing changed; tests/test_ep_cross_node_a2a_floor.py pins it.

Checked again (session 43, fix-G6), the published EP32 against the EP8 the planner puts first (25.11 flags, per step):
the term that separates them is this one, 13.9 s of all-to-all at EP32 (9.3 s exposed under EP overlap) against 2.1 s
inside a node; the expert GEMMs go the other way (4.5 s at 4 local experts x 4096 tokens, 6.7 s at 16 x 1024), and so
does the host time (1.9 s against 1.2 s: less compute per layer hides less of it). Memory by hand (busiest rank: 12
layers + the embedding): EP8 holds 4x EP32's experts, 12 x 128 x 3 x 4096 x 1536 / 8 = 3.62e9 parameters at 2 B
(fp8_param_gather + the Hopper transpose) + 2 B of bf16 gradients (recipes' grad_reduce_in_fp32 = False), and the
optimizer's 12 B over an expert-DP group of 4 (EDP 1 at EP32): +10.9 GB against EP32, 75.2 of 79.1 GiB usable, the
activations (40.6 GiB, 39 chunk-micro-batches in flight) unchanged; it fits, so memory does not rule EP8 out. What
says the gain is a find-class one: NVIDIA's own MoE playbook gave this shape "low-300s TFLOPS/GPU, around 30% MFU" with
DeepEP (Megatron-Bridge e43a7468f skills/perf-techniques/moe-hardware-configs/SKILL.md:31, "TP2, EP32, PP8, DeepEP";
"historical low-300s snapshots" since 302976773), against the 233-242 of the published alltoall rows; the planner
prices that EP32 + flex layout (EP overlap on) at 1,865-1,886 tokens/s/GPU (~277 TFLOPS/GPU) and its EP8 at 1,950-1,984
(~290): a gain of +26% over the recipe is what NVIDIA measured on the shape, not a model error, and the playbook's first rule is "Keep EP x TP
within the fast interconnect domain" (docs/training/moe-optimization.md @067f987df). Tried, not kept (step/terms.py
layer_overhead_s): host time hidden behind the exposed communication too.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.step import ep_traffic
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.layout.placement import domains_touched, fewest_in_one_domain

ACT_BYTES = 2                         # bf16 activations and gradients on the wire
FP8_DISPATCH_BYTES = 1.0 + 1.0 / 32  # 8-bit MoE dispatch: 1 B per element + block scales (DeepEP/HybridEP)
ROUTER_BYTES = {"fp32": 4.0, "fp64": 8.0}   # --moe-router-dtype: the routing probabilities' element size


def etp_combine_bytes(model) -> float:
    """Bytes per element of the alltoall dispatcher's ETP reduce-scatter (and of its backward all-gather): the
    routing probabilities' dtype, which is the router's --moe-router-dtype (fp32 in every zoo model's launch), else
    the activations' bf16 (megatron-core 0.16.1 MoEAlltoAllTokenDispatcher.combine_preprocess:
    `reduce_scatter_to_sequence_parallel_region(hidden_states.to(self.probs.dtype), ...)`; router.py gating in
    router_dtype, moe_utils.topk_routing_with_score_function `.type_as(logits)`)."""
    arch = model.architecture
    return ROUTER_BYTES.get(arch.router_dtype, float(ACT_BYTES)) if arch is not None else float(ACT_BYTES)


def rank_fanout(model, ep, flex) -> np.ndarray:
    """Copies of a token a rank's dispatch sends inside one domain: top-k with the alltoall dispatcher, the
    expected distinct destination ranks with the deduplicating flex one: the token's k distinct experts (Megatron's
    torch.topk) over `ep` ranks of E/ep experts each, uniform routing (ep_traffic.expected_distinct_bins: hypergeometric,
    ep x (1 - C(E - E/ep, k) / C(E, k))), at most the ranks holding the token's groups with group-limited routing
    (ep_traffic.distinct_bins_per_token)."""
    k = float(model.top_k)
    distinct = ep_traffic.distinct_bins_per_token(model, ep)
    # min: an ep that does not divide the experts (refused, layout/spec.py) still gets a figure no worse than top-k
    return np.where(flex, np.minimum(distinct, k), k)


def flex_etp_fanout(etp, flex) -> np.ndarray:
    """ETP copies of every (token, destination EP rank) a dispatch sends: `etp` with the flex dispatcher, whose one
    all-to-all over the ETP x EP group reaches each ETP rank of the destination (megatron-core 0.16.1
    MoEFlexTokenDispatcher._initialize_metadata); 1 with the alltoall dispatcher (its ETP all-gather is apart)."""
    return np.where(flex, np.asarray(etp, dtype=float), 1.0)


def dispatch_elements(model, *, tokens_rank, ep, ep_dom, flex, etp=1) -> np.ndarray:
    """Elements per rank one dispatch (or combine) moves: tokens x copies (ep_traffic.dispatch_copies: across
    domains the flex kernels send one copy per destination domain; inside a domain, with flex, x the ETP copies)
    x the expert width."""
    fanout = rank_fanout(model, ep, flex) * flex_etp_fanout(etp, flex)
    return tokens_rank * ep_traffic.dispatch_copies(model, ep, ep_dom, fanout, flex) * model.expert_width


def dispatch_bytes_per_element(quantised) -> np.ndarray:
    """Bytes per element on the wire of a dispatch: 8-bit + block scales where quantised, else bf16."""
    return np.where(quantised, FP8_DISPATCH_BYTES, float(ACT_BYTES))


def ep_phases_s(model, system, *, tokens_rank, ep, ep_dom, flex, quantised, moe_imbalance, collective_time_s,
                moe_all_to_all_time_s, ep_fewest=None, etp=1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dispatch, bf16 dispatch, combine) seconds of one MoE layer's EP all-to-alls for one micro-batch, before the
    all-to-all efficiency: the dispatch 8-bit where `quantised`, the bf16 one its backward twin. `ep_fewest`: ranks
    of the all-to-all's group in its least-populated domain (placement.fewest_in_one_domain) where some group
    straddles domains unevenly; its NICs set the pace. With flex the group is the ETP x EP group (`etp` x `ep`
    ranks) and every destination's `etp` ranks get a copy (module docstring); `ep_dom` the domains that group
    spans."""
    fanout = rank_fanout(model, ep, flex) * flex_etp_fanout(etp, flex)
    group_ranks = ep * flex_etp_fanout(etp, flex)   # the all-to-all's group: EP, or ETP x EP with flex
    elems_rank = dispatch_elements(model, tokens_rank=tokens_rank, ep=ep, ep_dom=ep_dom, flex=flex, etp=etp)
    # Which kernel moves the tokens: the alltoall dispatcher is NCCL all-to-all (pairwise, the
    # fabric's all_to_all curve: on NVLink ~370/450 of the per-GPU link rate, nccl-tests #212);
    # the flex dispatcher is DeepEP / HybridEP, whose dispatch and combine have their own measured
    # curves (moe_all_to_all, hardware.toml). HybridEP on NVL72 moves tokens with TMA over the same
    # NVLink at a fraction of the SMs and is documented as the fastest choice there (Megatron-Bridge
    # MoE dispatcher guide), so flex is taken as the faster of its measured curve and NCCL's on the
    # same (deduplicated) bytes.

    def phase_times(elems, group, domains, flex, quantised, fewest=None):
        """(8-bit-where-quantised dispatch, bf16 dispatch, combine) seconds of one kernel moving
        `elems` elements per rank over `group` ranks in `domains` domains (arrays of equal length)."""
        thin = {} if fewest is None else {"fewest_per_domain": fewest}   # only where a split is uneven
        # Across domains the flex kernels' RDMA leg is theirs alone: NCCL's all-to-all cannot move their
        # deduplicated, node-forwarded bytes, so its curve is no floor there (inside a domain it stands for
        # HybridEP's TMA path, above).
        own = flex & (np.asarray(domains) > 1)

        def flex_or_nccl(kernel_s, nccl_s):
            return np.where(flex, np.where(own, kernel_s, np.minimum(kernel_s, nccl_s)), nccl_s)

        bf16_bytes = elems * ACT_BYTES
        nccl_bf16_s = collective_time_s(system, "all_to_all", bf16_bytes, group, domains, imbalance=moe_imbalance,
                                        **thin)
        dispatch_bf16_s = flex_or_nccl(moe_all_to_all_time_s(system, bf16_bytes, group, domains, moe_imbalance,
                                                             phase="dispatch", **thin), nccl_bf16_s)
        combine_s = flex_or_nccl(moe_all_to_all_time_s(system, bf16_bytes, group, domains, moe_imbalance,
                                                       phase="combine", **thin), nccl_bf16_s)
        if not np.any(quantised):
            return dispatch_bf16_s, dispatch_bf16_s, combine_s
        q_bytes = elems * dispatch_bytes_per_element(quantised)
        q_s = flex_or_nccl(moe_all_to_all_time_s(system, q_bytes, group, domains, moe_imbalance, phase="dispatch",
                                                 **thin),
                           collective_time_s(system, "all_to_all", q_bytes, group, domains, imbalance=moe_imbalance,
                                             **thin))
        return np.where(quantised, q_s, dispatch_bf16_s), dispatch_bf16_s, combine_s

    uneven = ep_fewest is not None and np.any((ep_dom > 1)
                                              & (ep_fewest < np.ceil(group_ranks / np.maximum(ep_dom, 1))))
    dispatch_s, dispatch_bf16_s, combine_s = phase_times(elems_rank, group_ranks, ep_dom, flex, quantised,
                                                         ep_fewest if uneven else None)
    # The flex kernels' hierarchical forwarding across domains runs two legs at once (DeepEP's
    # internode kernels pipeline the RDMA sends and the NVLink forwarding in chunks): the RDMA leg
    # above (one copy per destination domain) and, inside every domain, the NVLink fan-out of each
    # token to its distinct destination ranks there - as many copies as a dispatch inside one domain
    # moves. The slower leg sets the time, so spreading EP over more domains never makes the
    # NVLink traffic free.
    # Only the forwarded rows pay the second leg's cost-model calls (the search's hot path).
    rows = np.flatnonzero(flex & (ep_dom > 1) & (group_ranks > 1))
    if rows.size:
        fan_elems = np.broadcast_to(tokens_rank * fanout * model.expert_width, flex.shape)[rows]
        fan = phase_times(fan_elems, np.ceil(group_ranks / ep_dom)[rows], np.ones(rows.size), flex[rows],
                          quantised[rows])
        legs = [leg.copy() for leg in (dispatch_s, dispatch_bf16_s, combine_s)]  # two may be one array
        for leg, fan_leg in zip(legs, fan):
            leg[rows] = np.maximum(leg[rows], fan_leg)
        dispatch_s, dispatch_bf16_s, combine_s = legs
    return dispatch_s, dispatch_bf16_s, combine_s


def ep_etp_totals_s(model, system, a, *, tokens_mb, tp, cp, ep, etp, moe_stage, rack_gpus, max_domains,
                    moe_imbalance, cal, collective_time_s, moe_all_to_all_time_s,
                    framework: str = "megatron", rerun=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(EP all-to-all seconds, ETP gather/scatter seconds) per micro-batch; zeros for dense models. Under TorchTitan
    the ETP gather and scatter move the MoE block's tokens once, in bf16 (module docstring). `rerun`: the share of
    the MoE layers full recompute re-runs, whose forward dispatch, combine and ETP gather/scatter run again."""
    (out,) = ep_etp_totals_each_s(model, system, a, tokens_mb=tokens_mb, tp=tp, cp=cp, ep=ep, etp=etp,
                                  moe_stage=moe_stage, rack_gpus=rack_gpus, max_domains=max_domains,
                                  moe_imbalance=moe_imbalance, cal=cal, collective_time_s=collective_time_s,
                                  moe_all_to_all_time_s=moe_all_to_all_time_s, framework=framework, reruns=(rerun,))
    return out


def ep_etp_totals_each_s(model, system, a, *, tokens_mb, tp, cp, ep, etp, moe_stage, rack_gpus, max_domains,
                         moe_imbalance, cal, collective_time_s, moe_all_to_all_time_s,
                         framework: str = "megatron", reruns=(0.0,)) -> list[tuple[np.ndarray, np.ndarray]]:
    """ep_etp_totals_s at each re-run share of `reruns`, the collectives priced once (they do not depend on it)."""
    if not model.is_moe:
        return [(np.zeros(len(a)), np.zeros(len(a))) for _ in reruns]
    tokens_rank = tokens_mb / (tp * cp)
    flex = a.dispatcher == CODE_FIELDS["dispatcher"].index("flex")
    fanout = rank_fanout(model, ep, flex)
    # Dispatch element size: the flex backends (DeepEP / HybridEP) quantise the tokens before
    # sending them when the expert GEMMs run in an 8-bit (or 4-bit) recipe — 1 B per element plus
    # one scale per block (fp32 per 128 or E8M0 per 32: ~1/32 B) — the "FP8 dispatch / BF16
    # combine" of DeepEP's published figures (hardware.toml). The alltoall dispatcher sends bf16.
    # Combine always returns bf16 expert outputs (they are summed in higher precision).
    quantised = flex & (a.precision != CODE_FIELDS["precision"].index("bf16"))
    ep_dom = domains_touched(etp * ep, ep, rack_gpus, max_domains)   # the ETP x EP group spans the same racks
    # the all-to-all's group: EP (strided over ETP) with alltoall, the whole ETP x EP block with flex
    ep_fewest = np.where(flex, fewest_in_one_domain(etp * ep, etp * ep, rack_gpus, max_domains),
                         fewest_in_one_domain(etp * ep, ep, rack_gpus, max_domains))
    dispatch_s, dispatch_bf16_s, combine_s = ep_phases_s(
        model, system, tokens_rank=tokens_rank, ep=ep, ep_dom=ep_dom, flex=flex, quantised=quantised,
        moe_imbalance=moe_imbalance, collective_time_s=collective_time_s, moe_all_to_all_time_s=moe_all_to_all_time_s,
        ep_fewest=ep_fewest, etp=etp)
    # Forward: dispatch (8-bit where quantised) + combine. Backward: the gradient of the combine is
    # a dispatch of bf16 gradients, the gradient of the dispatch a combine — both bf16.
    # A re-run forward (full recompute) dispatches and combines again.
    a2a_ranks = ep * flex_etp_fanout(etp, flex)   # flex with EP1 and ETP > 1 still exchanges over ETP
    # Expert tensor parallel with the alltoall dispatcher (MoE parallel folding): after dispatch each
    # rank all-gathers the ETP group's received tokens (bf16) before the expert GEMMs and reduce-scatters
    # the expert outputs after, cast to the probabilities' dtype (etp_combine_bytes); backward mirrors
    # them: a reduce-scatter of bf16 gradients and an all-gather in the probabilities' dtype. Elements =
    # etp x tokens received per rank (tokens per rank x fan-out) x hidden, over the ETP group (innermost).
    # The flex dispatcher runs none: its all-to-all above already delivers to every ETP rank.
    titan = framework == "torchtitan"
    etp_elems = etp * tokens_rank * (1.0 if titan else fanout) * (model.hidden if titan else model.expert_width)
    etp_dom = domains_touched(etp, etp, rack_gpus, max_domains)
    any_etp = bool(np.any(etp > 1))
    if any_etp:
        wide = etp_elems * (float(ACT_BYTES) if titan else etp_combine_bytes(model))
        gather_bf16, gather_wide, scatter_bf16, scatter_wide = (
            collective_time_s(system, name, size, etp, etp_dom)
            for name in ("all_gather", "reduce_scatter") for size in (etp_elems * ACT_BYTES, wide))
    # TorchTitan with shared experts: the one gather / scatter at the MoE boundary is the shared experts' TP pair,
    # which the step model's TP term already charges (evaluate.py tp_pairs_stage)
    shared_pair = titan and model.num_shared_experts > 0
    out = []
    for rerun in reruns:
        rerun = np.asarray(rerun, dtype=float)
        ep_pairs = dispatch_s + dispatch_bf16_s + 2.0 * combine_s + rerun * (dispatch_s + combine_s)
        ep_total_mb = np.where(a2a_ranks > 1, moe_stage * ep_pairs / cal.all_to_all_efficiency, 0.0)
        if any_etp:
            # forward: the bf16 gather (TorchTitan: of the block's input) and the wide scatter; backward the other two
            etp_fwd_bwd = gather_bf16 + gather_wide + scatter_bf16 + scatter_wide + rerun * (gather_bf16 + scatter_wide)
        else:
            etp_fwd_bwd = np.zeros(len(a))
        etp_total_mb = np.where((etp > 1) & ~flex & (not shared_pair), moe_stage * etp_fwd_bwd, 0.0)
        out.append((ep_total_mb, etp_total_mb))
    return out
