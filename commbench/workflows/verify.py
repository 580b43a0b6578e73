"""`commbench verify-plan`: run a plan's own communication here and put it beside the prediction.

The plan's collectives, with its sizes (planner/step/evaluate.py's accounting):
- EP all-to-all (dispatch + combine): the `moe_all_to_all` workload with the plan's tokens per
  rank (mbs x seq / (tp x cp)), hidden, top-k, experts and routing, per-expert or per-rank
  (deduplicated, the flex dispatcher) on its EP groups;
- TP: all-reduce of the layer activation (mbs x seq / cp x hidden x 2 B), or reduce-scatter +
  all-gather with sequence parallel, on its TP groups;
- DP: one gradient bucket's reduce-scatter (Megatron's bucket, 40M params x 2 B, or the local
  params if fewer) on its DP x CP groups.
Measured figures are measured (the harness, median of the timed loop); predicted figures come
from the plan's fabric (its system preset) at the measured size and group. Where this machine
cannot match the plan (other backend or devices, fewer ranks, smaller sizes), it runs what it
can and flags each unmet assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from commbench.planner.step.terms import CALIBRATED
from commbench.planner.emit.plan import plan_layout, plan_model
from commbench.planner.models.counts import param_counts
from commbench.planner.layout.placement import place

ACT_BYTES = 2


@dataclass(frozen=True, kw_only=True)
class CommItem:
    """One collective of the plan, as measured here."""

    label: str
    kind: str                      # tp | ep | dp (which groups)
    collective: str                # workload name in collectives.REGISTRY
    size_bytes: int                # measured size (nccl-tests' meaning; per rank for all-to-all)
    plan_size_bytes: int           # the plan's size
    groups: tuple[tuple[int, ...], ...]
    plan_group_size: int
    params: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class VerifyJob:
    items: tuple[CommItem, ...]
    backend: str
    iters: int = 5
    warmup_iters: int = 2
    timeout_s: float = 120.0


def _groups(kind_groups: list[list[int]], size: int, nproc: int, exact: bool) -> tuple[tuple[int, ...], ...]:
    if exact:
        return tuple(tuple(g) for g in kind_groups)
    m = max(d for d in range(1, nproc + 1) if nproc % d == 0 and d <= size)
    return tuple(tuple(range(s, s + m)) for s in range(0, nproc, m))


def plan_items(doc: dict, nproc: int, max_bytes: int) -> tuple[list[CommItem], list[str]]:
    """The plan's collectives scaled to `nproc` ranks and at most `max_bytes` per buffer, and the flags."""
    lay, model = plan_layout(doc), plan_model(doc)
    seq = int(doc["inputs"]["seq_len"])
    gpus = int(doc["inputs"]["gpus"])
    exact = gpus == nproc
    flags = [] if exact else [f"the plan has {gpus} ranks, this run {nproc}: groups are cut to consecutive ranks of at "
                              "most the plan's size (placement across racks is not reproduced)"]
    placement = place(lay, gpus, int(doc["placement"]["gpus_per_rack"])) if exact else None
    def groups_of(kind: str, size: int):
        return _groups(placement.groups[kind] if placement else [], size, nproc, exact)
    tokens_mb = lay.mbs * seq
    items: list[CommItem] = []
    act = int(tokens_mb / lay.cp * model.hidden * ACT_BYTES)
    def scaled(plan_bytes: int, label: str) -> int:
        if plan_bytes > max_bytes:
            flags.append(f"{label}: {plan_bytes:,} B in the plan, measured at {max_bytes:,} B (--max-bytes); "
                         "the prediction is given at the measured size")
        return int(min(plan_bytes, max_bytes))
    if lay.tp > 1:
        names = ("reduce_scatter", "all_gather") if lay.sequence_parallel else ("all_reduce",)
        for name in names:
            items.append(CommItem(label=f"TP {name}", kind="tp", collective=name, size_bytes=scaled(act, f"TP {name}"),
                                  plan_size_bytes=act, groups=groups_of("tp", lay.tp), plan_group_size=lay.tp))
    if model.is_moe and lay.ep > 1:
        tokens_rank = tokens_mb // (lay.tp * lay.cp)
        plan_bytes = tokens_rank * model.top_k * model.hidden * ACT_BYTES
        row_bytes = model.top_k * model.hidden * ACT_BYTES
        if row_bytes > max_bytes:  # one token is the least the all-to-all can move: checked before ranks start
            from commbench.errors import CommbenchError

            raise CommbenchError(f"the plan's model (hidden={model.hidden}, top_k={model.top_k}) moves {row_bytes:,} "
                                 f"bytes per token in its EP all-to-all, more than --max-bytes={max_bytes:,}: "
                                 "raise --max-bytes, or check the plan's model")
        cap = max(1, min(tokens_rank, max_bytes // row_bytes))
        if cap < tokens_rank:
            flags.append(f"EP all-to-all: {tokens_rank} tokens per rank in the plan, measured with {cap} (--max-bytes)")
        g = groups_of("ep", lay.ep)
        params = {"tokens_per_rank": int(cap), "hidden": model.hidden, "top_k": model.top_k,
                  "num_experts": model.num_routed_experts, "routing": "uniform",
                  "dispatch_mode": "per-rank" if lay.dispatcher == "flex" else "per-expert",
                  "dispatch_dtype": "bf16", "combine_dtype": "bf16", "seed": 0}
        items.append(CommItem(label="EP all-to-all (dispatch + combine)", kind="ep", collective="moe_all_to_all",
                              size_bytes=int(cap * model.top_k * model.hidden * ACT_BYTES), plan_size_bytes=plan_bytes,
                              groups=g, plan_group_size=lay.ep, params=params))
        imbalance = float(doc["inputs"].get("moe_imbalance", 1.0))
        flags.append(f"routing: the plan assumes the busiest EP rank gets {imbalance:g}x the mean; measured with "
                     "uniform random routing (the workload records its own imbalance)")
    dense_group = lay.dp * lay.cp
    if dense_group > 1:
        local = param_counts(model).non_expert / (lay.tp * lay.pp)
        bucket = int(min(CALIBRATED.dp_bucket_params, local) * 2)
        items.append(CommItem(label="DP grad bucket reduce-scatter", kind="dp", collective="reduce_scatter",
                              size_bytes=scaled(bucket, "DP bucket"), plan_size_bytes=bucket,
                              groups=groups_of("dp_cp", dense_group), plan_group_size=dense_group))
    return [i for i in items if len(i.groups[0]) > 1], flags


def predicted_s(fabric, item: CommItem, per_rack: int, plan_imbalance: float = 1.0) -> float:
    """The cost model's time for `item` at its measured size on the plan's group size and racks."""
    from commbench.costmodel import collective_time_s, moe_all_to_all_time_s
    from commbench.planner.layout.placement import racks_spanned
    n = item.plan_group_size
    domains = int(racks_spanned(n, per_rack)) if item.kind != "tp" else 1
    if item.collective == "moe_all_to_all":
        one = moe_all_to_all_time_s(fabric, np.array([float(item.size_bytes)]), np.array([n]), np.array([domains]),
                                    plan_imbalance)
        return float(2.0 * one[0] / CALIBRATED.all_to_all_efficiency)
    return float(collective_time_s(fabric, item.collective, np.array([float(item.size_bytes)]), np.array([n]),
                                   np.array([domains]))[0])


def verify_rank(rank_env, job: VerifyJob) -> list[dict]:
    """Every rank: measure each item on its groups; returns rows (rank 0's are reported)."""
    from collectives import get_collective
    from collectives.base import PointSpec
    from commbench.measure.bench import GroupCache
    from commbench.comm.backends import create_backend
    from commbench.dtypes import get_dtype
    from commbench.measure.harness import GroupInfo, LoopOptions, measure_point
    from commbench.results.records import new_run_id

    backend = create_backend(job.backend, rank_env, job.timeout_s)
    comms, rows, run_id = GroupCache(backend), [], new_run_id()
    loop = LoopOptions(iters=job.iters, warmup_iters=job.warmup_iters, check=True)
    try:
        for item in job.items:
            collective = get_collective(item.collective)
            dtype = get_dtype("bfloat16" if item.collective == "moe_all_to_all" else "float32")
            spec = PointSpec(size_bytes=item.size_bytes, dtype=dtype, params=dict(item.params))
            if item.collective == "moe_all_to_all":
                spec = collective.plan_specs(dict(item.params) | {"tokens_per_rank": [item.params["tokens_per_rank"]]},
                                             len(item.groups[0]))[0][0]
            comm = comms.get(item.groups)
            rec = measure_point(backend, comm, collective, spec, loop, run_id=run_id,
                                group=GroupInfo(layout=item.kind, num_groups=len(item.groups)))
            rows.append({"label": item.label, "time_us_median": rec.time_us_median, "num_wrong": rec.num_wrong,
                         "size_bytes": rec.size_bytes, "group_size": comm.size, "metrics": dict(rec.metrics)})
    finally:
        backend.shutdown()
    return rows
