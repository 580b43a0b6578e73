"""moe_all_to_all: one MoE layer's token exchange on an expert-parallel group, driven by routing.

Swept over tokens per rank (not bytes). Outside timing (in `prepare`/`fill`): the global routing
(every rank derives it from the seed), the split sizes, the permuted send rows and the combine rows
the experts would return. Each timed iteration runs three stages, as a real layer does:
1. `count_exchange`: per-expert (Megatron) mode, as megatron-core 0.16.1's MoEAlltoAllTokenDispatcher.preprocess
   (transformer/moe/token_dispatcher.py: gather_from_sequence_parallel_region of num_local_tokens_per_expert over
   the tp_ep group): an all_gather of every rank's E per-expert token counts, int64 (each rank receives n x E);
   per-rank (DeepEP) mode: an all_to_all of the count vector (per destination rank: rows, then tokens for each of
   its experts), int64. The split sizes themselves are known on the host ahead, so no device-to-host copy of the
   counts is timed (a real layer syncs there);
2. `dispatch`: all_to_all_single of the token rows with uneven split sizes;
3. `combine`: the reverse trip, each row back to its source in the original order.
The harness's total is all three; `round_trip_us` = dispatch + combine medians.

Expert capacity (`capacity_factor`, `pad_to_capacity`; commbench.moe.capacity, after megatron-core 0.16.1
transformer/moe/moe_utils.py get_capacity / apply_router_token_dropping and token_dispatcher.py): each rank's
slots beyond an expert's capacity are dropped before the exchange (not sent, not counted); with padding
every (rank, expert) buffer holds exactly `capacity` rows, so every split is fixed and, as Megatron's
drop-and-pad dispatcher, no count exchange runs (the stage is absent). Bytes, the busbw and the data check
all follow the rows actually moved, padding included.

Expert tensor parallel (`expert_tp` = ETP > 1; megatron-core 0.16.1 MoEFlexTokenDispatcher): the n ranks are ETP x
EP, the ETP ranks of an EP rank consecutive; the router picks top-k of the experts over the EP ranks, and the
exchange sends each token to every ETP rank of each EP rank it picked (the routing replicated over ETP, DeepEP's
router_topk = ETP x top-k over ETP x experts), deduplicated per rank as the flex dispatcher does.

Wire formats: bf16 rows are bfloat16 tensors; fp8 rows are uint8 tensors of hidden + 4*ceil(hidden/128)
bytes (fp8 payload + fp32 scales, as DeepEP; all_to_all moves bytes, so uint8 is byte-for-byte the same).

Byte figures (commbench.moe.accounting): `size_bytes` = the busiest rank's dispatch bytes, max over
ranks of max(sent, received), its own chunk included (as nccl-tests' alltoall size includes it).
Per stage in metrics: algbw = busiest rank's bytes / stage time, busbw = algbw * (n-1)/n
(nccl-tests' alltoall factor); `*_remote_gbps` = the bytes that actually leave or enter the busiest
rank / time; `dispatch_logical_gbps` = per-(token, expert) bytes the busiest rank receives, local
ones included and before per-rank dedup, / dispatch time (LOGICAL: not bytes on the wire).
Measurement.algbw_gbps/busbw_gbps cover the round trip: busiest dispatch + busiest combine bytes
over the whole iteration's time (count exchange included).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from collectives.base import Collective, PointSpec, PreparedPoint
from commbench.dtypes import get_dtype
from commbench.errors import CommbenchError
from commbench.moe.accounting import expert_load, imbalance, moe_traffic, tokens_per_expert
from commbench.moe.capacity import DROP_POLICY, drop_over_capacity, padding_rows
from commbench.moe.params import DEFAULTS, MoeParams, sweep_params
from commbench.moe.payload import HEADER_CHANNELS, dispatch_rows, encode, foreign_rows
from commbench.moe.routing import load_trace, parse_routing, route, trace_replay, trace_sha256
from commbench.nccl_tests_counts import whole_buffer_count

_INT64 = get_dtype("int64")
_MOE_KEYS = tuple(f.name for f in dataclasses.fields(MoeParams))


def wire_format(dtype: str, hidden: int) -> tuple[Any, int]:
    """(element DType, elements per row) of a row in `dtype` on the wire."""
    if dtype == "fp8":
        from commbench.moe.accounting import bytes_per_token

        return get_dtype("uint8"), bytes_per_token(hidden, "fp8")
    return get_dtype({"bf16": "bfloat16", "fp32": "float32"}[dtype]), hidden


def payload(rows, width: int, dtype, salt: int = 0) -> np.ndarray:
    """The rows' wire values: `encode`'s header and filler, the filler rotated by the check's salt (so
    the first call's data fails a later check) and, for fp32 rows, widened to 24 significant bits (so
    rows that passed through bf16/fp16 fail)."""
    out = encode(rows, width).astype(np.int64)
    filler = out[:, HEADER_CHANNELS:]
    if salt:
        filler[:] = (filler - 1 + 37 * salt) % 251 + 1
    if dtype.is_float and dtype.exact_int_limit > 1 << 16:
        channel = np.arange(HEADER_CHANNELS, width, dtype=np.int64)[None, :]
        filler[:] = filler * 65536 + ((filler * 2654435761 + channel * 40503) & 0xFFFF)
    return out.ravel()


def capacity_metrics(routed: np.ndarray, kept: np.ndarray, pad, capacity: int | None, num_experts: int) -> dict[str, Any]:
    """What the expert capacity did to the layer's token copies (all ranks): the capacity (per expert, per rank),
    copies dropped and their fraction, padding copies, and the expert imbalance as routed (`imbalance_expert` is
    the load after the capacity, which moved); {} when dropless."""
    if capacity is None:
        return {}
    dropped = int(np.count_nonzero(kept < 0))
    return {"capacity_tokens": capacity, "dropped_tokens": dropped, "drop_fraction": dropped / max(1, routed.size),
            "padding_tokens": 0 if pad is None else len(pad), "token_drop_policy": DROP_POLICY,
            "imbalance_expert_routed": imbalance(expert_load(routed, num_experts))}


def replicate_over_etp(expert_ids: np.ndarray, experts_per_rank: int, etp: int) -> np.ndarray:
    """Expert ids over EP ranks (n, tokens, k) -> the ids on the ETP x EP ranks (n, tokens, k x etp): expert e of
    EP rank r = e // epr becomes local expert e % epr of each of ETP ranks r*etp .. r*etp+etp-1 (megatron-core
    0.16.1 MoEFlexTokenDispatcher._initialize_metadata: routing_map reshaped (tokens, ep, 1, epr) and expanded over
    ETP); dropped slots (-1) stay dropped in every copy."""
    if etp == 1:
        return expert_ids
    ep_rank, local = np.divmod(expert_ids, experts_per_rank)
    copies = (ep_rank[..., None] * etp + np.arange(etp)) * experts_per_rank + local[..., None]
    copies = np.where(expert_ids[..., None] >= 0, copies, -1)
    return copies.reshape(*expert_ids.shape[:-1], -1)


def _gbps(num_bytes: float, time_us: float) -> float:
    return num_bytes / time_us / 1e3 if time_us > 0 else 0.0


DRY_RUN_ROUTED_SCORES = 1 << 25   # about 2 s of routing on one core


_LISTED_ROUTED: dict[tuple[str, str, int], tuple[int, str]] = {}   # (dtype, params, group size) -> listed_size


def _trace_replay(p, n: int) -> tuple[dict[str, Any], list[str]]:
    """A trace-routed point's trace_rows / trace_recycled params and its note where the trace was recycled
    (moe/routing.trace_replay), and the digest of the trace file's bytes (trace_sha256: compare's identity of the
    trace, where the routing's path is only what was typed); nothing for the routing models."""
    routing = parse_routing(p.routing)
    if routing.kind != "trace":
        return {}, []
    trace = load_trace(routing.trace_path, num_experts=p.num_experts, top_k=p.top_k, per_rank=True)
    params, notes = trace_replay(trace, n, p.tokens_per_rank)
    return {**params, "trace_sha256": trace_sha256(routing.trace_path)}, notes


class MoeAllToAll(Collective):
    name = "moe_all_to_all"
    multi_stage = True
    in_place_mode = "never"
    takes_size = False
    param_names = ("tokens_per_rank", *DEFAULTS)
    algbw_note = ("moe_all_to_all's algbw = (dispatch + combine bytes, the busiest rank's: round_trip_bytes_max in "
                  "the JSONL) / time, not size / time as nccl-tests defines algbw (size is the dispatch bytes alone); "
                  "busbw = algbw x (n-1)/n")

    def busbw_factor(self, num_ranks: int) -> float:
        return (num_ranks - 1) / num_ranks

    def count_for(self, size_bytes: int, itemsize: int, num_ranks: int) -> tuple[int, int]:
        return whole_buffer_count(size_bytes, itemsize)

    def plan_specs(self, params: dict[str, Any], num_ranks: int) -> list[tuple[PointSpec, str]]:
        """One point per tokens-per-rank value; spec.size_bytes is the nominal tokens * top_k rows
        per rank (the measured size is the busiest rank's)."""
        specs = []
        for point in sweep_params(params, num_ranks):
            dtype, width = wire_format(point.dispatch_dtype, point.hidden)
            nominal = point.tokens_per_rank * point.top_k * width * dtype.itemsize
            specs.append((PointSpec(size_bytes=nominal, dtype=dtype, params=point.as_params()),
                          f"{point.tokens_per_rank} tok/rank"))
        return specs

    def _routed(self, spec: PointSpec, n: int):
        """(params, routed ids, kept ids (after capacity drops), ids on the wire, padding rows, capacity, traffic,
        experts per rank, experts on the wire) of the point on `n` ranks: every rank derives the same from the seed; ValueError where the EP size does
        not fit. With expert_tp > 1 the kept ids are replicated over the ETP ranks as Megatron expands its routing
        map (replicate_over_etp)."""
        given = {k: spec.params[k] for k in _MOE_KEYS if k in spec.params}
        if given.get("seed") is None:   # a trace's (MoeParams.as_params): its replay draws nothing from a seed
            given["seed"] = 0
        p = MoeParams(**given)
        try:
            p.check_ep_size(n)  # plan_specs checked the world; a sub-group may be smaller
        except CommbenchError as exc:
            raise ValueError(str(exc)) from None  # the bench runner records a failed point
        experts_per_rank = p.num_experts // (n // p.expert_tp)
        routed = route(parse_routing(p.routing), num_ranks=n, tokens_per_rank=p.tokens_per_rank,
                       num_experts=p.num_experts, top_k=p.top_k, seed=p.seed)
        capacity, kept, pad = p.capacity(), routed, None
        if capacity is not None:
            kept = drop_over_capacity(routed, p.num_experts, capacity)  # dropped slots: -1
            pad = padding_rows(kept, p.num_experts, capacity) if p.pad_to_capacity else None
        ids = replicate_over_etp(kept, experts_per_rank, p.expert_tp)   # the ids on the wire (n x epr of them)
        wire_experts = p.num_experts * p.expert_tp
        traffic = moe_traffic(ids, num_experts=wire_experts, hidden=p.hidden, mode=p.dispatch_mode,
                              dispatch_dtype=p.dispatch_dtype, combine_dtype=p.combine_dtype, pad=pad)
        return p, routed, kept, ids, pad, capacity, traffic, experts_per_rank, wire_experts

    def point_size(self, spec: PointSpec, num_ranks: int) -> tuple[int, int]:
        """The busiest rank's dispatch bytes (what `prepare` records), from the seeded routing."""
        size_bytes = self._routed(spec, num_ranks)[6].busiest_dispatch_bytes()
        return size_bytes // spec.dtype.itemsize, size_bytes

    def largest_buffer_bytes(self, spec: PointSpec, num_ranks: int) -> int:
        """The largest buffer `prepare` allocates on any rank, from the seeded routing: the busiest rank's
        dispatch (rows sent or received x dispatch row bytes) or combine (the same rows x combine row bytes)."""
        traffic = self._routed(spec, num_ranks)[6]
        return max(traffic.busiest_dispatch_bytes(), traffic.busiest_combine_bytes())

    def listed_size(self, spec: PointSpec, num_ranks: int) -> tuple[int, str]:
        """The busiest rank's routed bytes where routing the point here is cheap (at most DRY_RUN_ROUTED_SCORES
        router scores: ranks x tokens per rank x experts); past that (DeepSeek-V3's 288 experts on 288 ranks at
        4096 tokens is 340M scores, about 20 s) the nominal tokens x top-k rows, so named."""
        p = spec.params
        scores = num_ranks * int(p.get("tokens_per_rank", 0)) * int(p.get("num_experts", 0))
        if scores > DRY_RUN_ROUTED_SCORES:
            return spec.size_bytes, "nominal tokens x top-k rows per rank (the run records the busiest rank's routed bytes)"
        key = (spec.dtype.name, json.dumps(spec.params, sort_keys=True, default=str), num_ranks)
        if key not in _LISTED_ROUTED:   # once per distinct point: a sweep lists one for each group layout of a size
            _LISTED_ROUTED[key] = super().listed_size(spec, num_ranks)
        return _LISTED_ROUTED[key]

    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        n, rank = comm.size, comm.rank
        p, routed, kept, ids, pad, capacity, traffic, experts_per_rank, wire_experts = self._routed(spec, n)
        table = dispatch_rows(ids, wire_experts, p.dispatch_mode, pad)
        sent, received = table.where(table.src == rank), table.where(table.dst == rank)
        rows = traffic.rows
        assert len(sent) == rows[rank].sum() and len(received) == rows[:, rank].sum()

        replay_params, replay_notes = _trace_replay(p, n)
        d_dtype, d_width = wire_format(p.dispatch_dtype, p.hidden)
        c_dtype, c_width = wire_format(p.combine_dtype, p.hidden)
        d_in, d_out = backend.empty(len(sent) * d_width, d_dtype), backend.empty(len(received) * d_width, d_dtype)
        c_in, c_out = backend.empty(len(received) * c_width, c_dtype), backend.empty(len(sent) * c_width, c_dtype)
        d_in_splits = [int(v) * d_width for v in rows[rank]]
        d_out_splits = [int(v) * d_width for v in rows[:, rank]]
        c_in_splits = [int(v) * c_width for v in rows[:, rank]]
        c_out_splits = [int(v) * c_width for v in rows[rank]]

        per_expert = tokens_per_expert(ids, wire_experts, pad)
        if p.dispatch_mode == "per-expert":  # Megatron: all_gather of each rank's E counts, rank-major
            sent_counts, expected_counts = per_expert[rank], per_expert.ravel()
        else:  # counts[s, d] = [rows s sends d, then s's tokens for each of d's experts], all_to_all
            counts = np.concatenate([rows[:, :, None], per_expert.reshape(n, n, experts_per_rank)], axis=2)
            sent_counts, expected_counts = counts[rank].ravel(), counts[:, rank].ravel()
        count_in, count_out = backend.upload(sent_counts, _INT64), backend.empty(expected_counts.size, _INT64)
        exchange_counts = ((lambda: comm.all_gather(count_out, count_in)) if p.dispatch_mode == "per-expert"
                           else (lambda: comm.all_to_all(count_out, count_in)))

        def fill(salt: int = 0) -> None:
            backend.write(d_in, payload(sent, d_width, d_dtype, salt))
            backend.write(c_in, payload(received, c_width, c_dtype, salt))  # what the experts return
            for buf, size in ((d_out, len(received) * d_width), (c_out, len(sent) * c_width),
                              (count_out, expected_counts.size)):
                backend.write(buf, np.zeros(size, dtype=np.uint8))  # no stale rows can pass the check

        def check(salt: int = 0) -> int:
            got_dispatch = backend.download(d_out)
            wrong = 0 if p.pad_to_capacity else int(np.count_nonzero(backend.download(count_out) != expected_counts))
            wrong += int(np.count_nonzero(got_dispatch != payload(received, d_width, d_dtype, salt)))
            wrong += foreign_rows(got_dispatch, d_width, ids, rank, wire_experts, p.dispatch_mode, pad)
            wrong += int(np.count_nonzero(backend.download(c_out) != payload(sent, c_width, c_dtype, salt)))
            return wrong

        size_bytes = traffic.busiest_dispatch_bytes()
        combine_bytes = traffic.busiest_combine_bytes()
        factor = self.busbw_factor(n)

        def stage_metrics(median_us: dict[str, float]) -> dict[str, Any]:
            dispatch_us, combine_us = median_us.get("dispatch", 0.0), median_us.get("combine", 0.0)
            dispatch_algbw, combine_algbw = _gbps(size_bytes, dispatch_us), _gbps(combine_bytes, combine_us)
            counted = {} if p.pad_to_capacity else {"count_exchange_us": median_us.get("count_exchange", 0.0)}
            return {
                **counted, "dispatch_us": dispatch_us,
                "combine_us": combine_us, "round_trip_us": dispatch_us + combine_us,
                "dispatch_algbw_gbps": dispatch_algbw, "dispatch_busbw_gbps": dispatch_algbw * factor,
                "dispatch_remote_gbps": _gbps(traffic.busiest_remote_bytes(traffic.dispatch_row_bytes), dispatch_us),
                "dispatch_logical_gbps": _gbps(traffic.busiest_logical_bytes(), dispatch_us),
                "combine_algbw_gbps": combine_algbw, "combine_busbw_gbps": combine_algbw * factor,
                "combine_remote_gbps": _gbps(traffic.busiest_remote_bytes(traffic.combine_row_bytes), combine_us),
            }

        return PreparedPoint(
            size_bytes=size_bytes, count=size_bytes // d_dtype.itemsize, busbw_factor=factor,
            stages=[*([] if p.pad_to_capacity else [("count_exchange", exchange_counts)]),
                    ("dispatch", lambda: comm.all_to_all(d_out, d_in, d_out_splits, d_in_splits)),
                    ("combine", lambda: comm.all_to_all(c_out, c_in, c_out_splits, c_in_splits))],
            fill=fill, check=check, algbw_bytes=size_bytes + combine_bytes,
            params={"ep_size": n, "experts_per_rank": experts_per_rank,   # ranks of the exchange (ETP x EP)
                    **replay_params},
            notes=replay_notes,
            metrics={**traffic.metrics(), "round_trip_bytes_max": size_bytes + combine_bytes,
                     **capacity_metrics(routed, kept, pad, capacity, p.num_experts)},
            stage_metrics=stage_metrics,
        )
