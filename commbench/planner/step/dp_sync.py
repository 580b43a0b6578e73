"""Data-parallel gradient reduce-scatter (all-reduce without the distributed optimizer) and parameter
all-gather per step, vectorised over layouts: the totals from the fabric cost model and what a
compute window leaves exposed.

- Across racks the cheaper of a flat ring and the two-stage (hierarchical) reduce-scatter
  (commbench.costmodel.hierarchical_reduce_scatter_time_s: inside each rack, then across racks on
  the 1/m shard; Jia et al., arXiv 1807.11205); the all-gather mirrors the reduce-scatter.
- Exposed: the part the overlap window does not hide (`overlap_efficiency` of the window hides
  traffic) plus the last bucket (Megatron DDP buckets of `bucket_params` parameters, megatron_bucket_params),
  which can only start once the last gradients exist.
Distinct (size, group, domains, distributed optimizer) combinations are few among many layouts:
each is priced once.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.spec import CODE_FIELDS
from commbench.row_groups import RowGroups

GRAD_BYTES = 2     # gradient buffer in the param dtype (Megatron-Core DDPConfig.grad_reduce_in_fp32=False)


def grad_bytes(framework: str = "megatron") -> float:
    """Bytes per gradient element reduce-scattered and kept: bf16 (2) under Megatron, whose plans say
    --grad-reduce-in-bf16 as the Megatron-Bridge performance recipes set it (emit/megatron.py); fp32 (4) under
    TorchTitan 0.3.0, whose FSDP2 reduces in training.mixed_precision_reduce, Literal["float32"] only
    (config/configs.py; parallelize.py MixedPrecisionPolicy(reduce_dtype=...)), into its fp32 sharded parameters."""
    return 4.0 if framework == "torchtitan" else float(GRAD_BYTES)
PARAM_BYTES = 2    # bf16 parameter all-gather
BUCKET_PARAMS_PER_DP_RANK = 1e6   # Megatron-LM's bucket grows by 1M parameters per DP x CP rank


def megatron_bucket_params(cal, dp_cp) -> np.ndarray:
    """Parameters per DDP gradient bucket Megatron-LM builds with --overlap-grad-reduce and no --ddp-bucket-size:
    max(40M, 1M x DP*CP size) (megatron/training/training.py core_v0.16.1, get_model: `max(40000000, 1000000 *
    mpu.get_data_parallel_world_size(with_context_parallel=True))`; DistributedDataParallelConfig.bucket_size's
    docstring). The dense and the expert buffers share that bucket size (distributed_data_parallel.py passes
    self.bucket_size to both), so the expert-DP buckets follow DP*CP too, not the expert-DP size.
    `cal.dp_bucket_params` is the 40M floor."""
    return np.maximum(cal.dp_bucket_params, BUCKET_PARAMS_PER_DP_RANK * np.asarray(dp_cp, dtype=float))


def param_gather_bytes(precision, distributed_optimizer, fp8_codes, framework: str = "megatron") -> np.ndarray:
    """Bytes per parameter of the transformer layers the DP all-gather moves (and the sharded weights hold; the
    embedding and output layer stay bf16 whatever the recipe: step/module_precision.py): 1 where the recipe
    keeps the weights in fp8 (Megatron-Bridge's bf16_with_fp8_current_scaling_mixed and
    bf16_with_mxfp8_mixed set fp8_param_gather=True; nvfp4 does not: src/megatron/bridge/training/
    mixed_precision.py at v0.1.0rc3, v0.2.0 and v0.3.0; its fp4_param_gather=True from v0.5.0 has no 4-bit gather in
    megatron-core 0.16.1, emit/megatron.py NVFP4_PARAM_GATHER_NOTE; Megatron-LM allows it only with the distributed
    optimizer or FSDP, arguments.py; Megatron-Core DDPConfig.fp8_param_gather: "perform the param
    all-gather in fp8"), else bf16's 2. TorchTitan 0.3.0 has no fp8 all-gather (FSDP2 gathers its
    mixed-precision param_dtype, bf16): 2 there."""
    fp8 = np.isin(np.asarray(precision), fp8_codes) & (framework == "megatron")
    return np.where(fp8 & np.asarray(distributed_optimizer, dtype=bool), 1.0, float(PARAM_BYTES))


MXFP8_CODE = CODE_FIELDS["precision"].index("mxfp8")
# What megatron-core's DistributedDataParallel does with MXFP8 parameters (--fp8-recipe mxfp8 --fp8-param-gather, with
# --reuse-grad-buf-for-mxfp8-param-ag as every Megatron-Bridge MXFP8 recipe sets it: bf16_with_mxfp8_mixed in
# src/megatron/bridge/training/mixed_precision.py at bf71eba (25.09), 7af9601 (25.11), 21b02e0, 51885cf): the
# parameter buffer the distributed optimizer all-gathers is the gradient buffer, in the gradient dtype
# (megatron/core/distributed/param_and_grad_buffer.py, core_v0.14.0 to core_v0.19.0: "For MXFP8 param: Create a
# shared buffer for param AG and grad RS", param_data = shared_buffer, bf16, or half an fp32 one viewed as bf16), so
# the gather moves bf16, 2 B per parameter, not the 1 B of a per-tensor fp8 parameter's uint8 buffer; after each
# bucket's gather every parameter is copied out of it into its MXFP8 weight ("The paramaters are cast from bf16 to
# MXFP8 during copy": param.data.copy_, distributed_data_parallel.py start_param_sync, or finish_param_sync with
# --overlap-param-gather) and the slice is zeroed for the next gradients (bucket.param_data.zero_()).
MXFP8_DDP_GATHER_BYTES = 2.0
# That copy per parameter of the rank, every step: read the bf16 value (2 B), write the row-wise and the column-wise
# e4m3 copies (1 + 1 B) with one e8m0 scale per 32 each (2/32 B), zero the bf16 slice (2 B).
MXFP8_PARAM_RECAST_BYTES = 2.0 + 2.0 + 2.0 / 32 + 2.0


def ddp_param_gather_bytes(param_bytes, precision, fsdp, framework: str = "megatron") -> np.ndarray:
    """Bytes per parameter the distributed optimizer's all-gather moves outside FSDP: `param_bytes`
    (param_gather_bytes: what the weights are kept in), but MXFP8 parameters are gathered in bf16 through
    megatron-core's gradient buffer (MXFP8_DDP_GATHER_BYTES above). Megatron-FSDP gathers its own uint8 MXFP8
    buffers (step/fsdp.py), so FSDP rows keep `param_bytes`."""
    mx = (np.asarray(precision) == MXFP8_CODE) & ~np.asarray(fsdp, dtype=bool) & (framework == "megatron")
    return np.where(mx & (np.asarray(param_bytes) < PARAM_BYTES), MXFP8_DDP_GATHER_BYTES, param_bytes)


def mxfp8_param_recast_bytes(param_bytes, precision, fsdp, framework: str = "megatron") -> np.ndarray:
    """HBM bytes per parameter of the rank per step that copying the gathered bf16 parameters into their MXFP8
    weights moves (MXFP8_PARAM_RECAST_BYTES), where ddp_param_gather_bytes gathers MXFP8 parameters in bf16; 0
    elsewhere."""
    pb = np.asarray(param_bytes)
    mx = ddp_param_gather_bytes(pb, precision, fsdp, framework) != pb
    return np.where(mx, MXFP8_PARAM_RECAST_BYTES, 0.0)


def hidden(total: np.ndarray, window: np.ndarray, efficiency: float) -> np.ndarray:
    """Exposed part of `total` overlapped with a compute `window` that hides `efficiency` of itself."""
    return np.maximum(total - efficiency * np.minimum(total, window), 0.0)


def _totals(system, coll, hier_rs, local, g, domains, dist_on, param_bytes, grad_size=GRAD_BYTES):
    """(gradient RS or AR, parameter AG) seconds for distinct rows (`grad_size`: bytes per gradient, grad_bytes)."""
    flat_rs = coll(system, "reduce_scatter", local * grad_size, g, domains)
    ag_flat = coll(system, "all_gather", local * param_bytes, g, domains)
    per_dom = g // np.maximum(domains, 1)
    two_stage = (domains > 1) & (g % np.maximum(domains, 1) == 0)
    hier = np.full(len(g), np.inf)
    if np.any(two_stage):
        sel = np.flatnonzero(two_stage)
        hier[sel] = hier_rs(system, (local * grad_size)[sel], g[sel], per_dom[sel])
    rs = np.minimum(flat_rs, hier)
    ag = np.minimum(ag_flat, hier * param_bytes / grad_size)
    if np.any(~dist_on):
        rs = np.where(dist_on, rs, coll(system, "all_reduce", local * grad_size, g, domains))
    return rs, np.where(dist_on, ag, 0.0)


def grad_sync_s(system, coll, hier_rs, *, params, group, domains, dist) -> np.ndarray:
    """Seconds of one gradient reduce-scatter (all-reduce without the distributed optimizer) of `params`
    parameters over `group` ranks in `domains` domains, priced as dp_sync_s prices the step's: across domains
    the cheaper of a flat ring and the two-stage reduce-scatter (`verify-plan` prices one bucket with it)."""
    p, g, d, dist_ = np.broadcast_arrays(np.atleast_1d(np.asarray(params, float)), np.asarray(group, float),
                                         np.asarray(domains, float), np.asarray(dist, bool))
    rs, _ = _totals(system, coll, hier_rs, p, g, d, dist_, np.full(p.shape, float(PARAM_BYTES)))
    return rs


def dp_sync_s(system, cal, coll, hier_rs, *, local, group, domains, dist, dp_overlap, rs_window, ag_window,
              bucket_params, param_bytes=PARAM_BYTES, grad_size=GRAD_BYTES, groups: RowGroups | None = None):
    """(RS total, RS exposed, AG total, AG exposed) seconds per layout. `coll` and `hier_rs` are the
    cost model's collective_time_s and hierarchical_reduce_scatter_time_s (or test stand-ins);
    `param_bytes` per parameter gathered (param_gather_bytes); `bucket_params` per DDP bucket
    (megatron_bucket_params). `groups`: rows grouped by columns that fix local, group, domains, dist and
    param_bytes (the caller's integer key, cheaper than grouping by these floats); default by these."""
    active = group > 1
    g = np.maximum(group, 1)
    loc, g_, dom_, dist_, pb_ = np.broadcast_arrays(np.asarray(local, float), g, np.asarray(domains), dist,
                                                    np.asarray(param_bytes, dtype=float))
    if groups is None:
        groups = RowGroups(loc, g_, dom_, dist_, pb_)   # the totals once per group of equal inputs
    first = groups.first
    inputs = (loc.ravel()[first], g_.ravel()[first].astype(float), dom_.ravel()[first].astype(float),
              dist_.ravel()[first], pb_.ravel()[first])
    # groups whose columns differ only where the sync does not look (the dense sync and EP) price the same
    # messages: each distinct one once
    distinct = RowGroups(*inputs)
    u_rs, u_ag = (groups.expand(distinct.expand(x))
                  for x in _totals(system, coll, hier_rs, *(distinct.of(x) for x in inputs), grad_size))
    rs, ag = np.where(active, u_rs, 0.0), np.where(active, u_ag, 0.0)
    last_bucket = np.minimum(1.0, bucket_params / np.maximum(local, 1.0))
    rs_exp = np.where(dp_overlap, hidden(rs, rs_window, cal.overlap_efficiency) + rs * last_bucket, rs)
    ag_exp = np.where(dp_overlap, hidden(ag, ag_window, cal.overlap_efficiency) + ag * last_bucket, ag)
    return rs, np.minimum(rs_exp, rs), ag, np.minimum(ag_exp, ag)
