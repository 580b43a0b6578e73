"""Rank placement of a layout: which ranks form each TP/CP/DP/PP and ETP/EP/EDP group, and which racks they use.

Rank order is Megatron-Core's (megatron/core/parallel_state.py, `RankGenerator`): attention and
dense layers order ranks tp-cp-dp-pp and experts etp-ep-edp-pp, the first name innermost (fastest
varying), with MoE parallel folding (arXiv 2504.14960) sharing PP between the two. A scale-up
domain (an NVL72 rack, an HGX node) holds `gpus_per_rack` consecutive ranks.

Placement rules the search enforces (vectorised, `placement_violations`):
- a TP group never spans scale-up domains (tp must divide the GPUs per domain), nor does ETP;
- an EP group may span racks, but the plan says where (`racks_spanned`), because its all-to-all
  then runs over the scale-out network.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from commbench.planner.layout.spec import Layout

PLACEMENT_RULES: tuple[tuple[str, str], ...] = (
    ("tp_in_rack", "a TP group must stay inside one NVLink domain (tp must divide the GPUs per domain)"),
    ("etp_in_rack", "an expert-TP group must stay inside one NVLink domain (etp must divide the GPUs per domain)"),
)
PLACEMENT_BITS = {name: 1 << (16 + i) for i, (name, _) in enumerate(PLACEMENT_RULES)}


def _spans(span) -> np.ndarray:
    return np.maximum(np.rint(np.atleast_1d(np.asarray(span, dtype=float))).astype(np.int64), 1)


def _over_straddling_spans(span_arr: np.ndarray, aligned: np.ndarray, domain_size: int, max_domains: int | None,
                           per_span) -> np.ndarray:
    """`aligned` (the value where the span divides the rack or the rack the span), with the spans that do neither
    replaced by per_span(span, rack, blocks) over the blocks the fabric holds, computed once per distinct span."""
    odd = (span_arr % domain_size != 0) & (domain_size % span_arr != 0)
    if np.any(odd):
        blocks = (int(max_domains) * domain_size) if max_domains else None
        values, inverse = np.unique(span_arr[odd], return_inverse=True)
        aligned[odd] = np.array([per_span(int(v), int(domain_size), max(1, (blocks // int(v)) if blocks else 1 << 30))
                                 for v in values], dtype=float)[inverse]
    return aligned


@functools.lru_cache(maxsize=4096)
def _worst_block_racks(span: int, per_rack: int, blocks: int) -> int:
    """The most racks of `per_rack` consecutive ranks a block of `span` consecutive ranks touches, over the first
    `blocks` blocks (block k holds ranks k*span .. (k+1)*span - 1: Megatron-Core's RankGenerator gives a group's
    ranks one such block). The racks' offsets into the blocks repeat after per_rack / gcd(span, per_rack) blocks."""
    period = per_rack // math.gcd(span, per_rack)
    return max((k * span + span - 1) // per_rack - (k * span) // per_rack + 1 for k in range(min(blocks, period)))


def domains_touched(span: np.ndarray, group: np.ndarray, domain_size: int, max_domains: int | None = None) -> np.ndarray:
    """Scale-up domains a group of `group` ranks spread over `span` consecutive ranks touches: the most any of the
    layout's groups touches, their blocks placed as Megatron-Core places them (_worst_block_racks), at most the
    fabric's domain count (racks filled below their size, e.g. 64 of 72, are still one domain each to the cost
    model, which sizes domains by the full rack). Taken as ceil(span / domain) before, the fewest: DeepSeek-V3's EP64
    groups on 1,152 GB200 (16 racks of 72), 14 of 18 of which straddle two racks, were charged NVLink only (found
    from outside)."""
    span_arr = _spans(span)
    # exact where one divides the other (every block aligned to racks); the spans that straddle: their worst block
    worst = _over_straddling_spans(span_arr, np.ceil(span_arr / domain_size), domain_size, max_domains,
                                   _worst_block_racks)
    out = np.clip(worst.reshape(np.shape(span)), 1, group)
    return np.minimum(out, max_domains) if max_domains else out


@functools.lru_cache(maxsize=4096)
def _fewest_in_one_rack(span: int, per_rack: int, blocks: int) -> int:
    """The fewest ranks a block of `span` consecutive ranks (placed as in _worst_block_racks) has in one of the racks
    it touches, over the first `blocks` blocks: the thin side of a straddling group (8 of EP64 in a rack of 72)."""
    period = per_rack // math.gcd(span, per_rack)
    fewest = span
    for k in range(min(blocks, period)):
        start, end = k * span, (k + 1) * span
        for rack in range(start // per_rack, (end - 1) // per_rack + 1):
            fewest = min(fewest, min(end, (rack + 1) * per_rack) - max(start, rack * per_rack))
    return fewest


def fewest_in_one_domain(span: np.ndarray, group: np.ndarray, domain_size: int,
                         max_domains: int | None = None) -> np.ndarray:
    """Members of a group of `group` ranks spread over `span` consecutive ranks (stride span / group) in the scale-up
    domain that holds the fewest of them, over the layout's groups placed as domains_touched places them: where a
    group straddles racks unevenly (EP64 on 72-GPU racks: 8 + 56), its thin side's NICs carry that side's ranks'
    traffic to the other 56 (formulas.collective_time_s fewest_per_domain), not an even split's."""
    span_arr = _spans(span)
    group_arr = np.broadcast_to(np.maximum(np.asarray(group, dtype=np.int64), 1), span_arr.shape)
    # aligned: every domain it touches is full; the spans that straddle: their thinnest side
    fewest = _over_straddling_spans(span_arr, np.minimum(span_arr, domain_size).astype(float), domain_size,
                                    max_domains, _fewest_in_one_rack)
    members = np.maximum(np.floor(fewest * group_arr / span_arr), 1)
    return members.reshape(np.shape(span)) if np.ndim(span) else members


FULL_ENOUGH = 0.85   # a rack filled to this share of its GPUs (64 of 72) is a deployment; fewer is a partial rack


def gpus_per_rack(num_gpus: int, domain_size: int) -> int:
    """GPUs used per scale-up domain: all of them when the count is a multiple of the domain (or
    fits in one); else the largest divisor of the count that fills a domain to FULL_ENOUGH (256 GPUs on NVL72
    racks -> 4 racks x 64, the usual deployment: every power-of-two group stays aligned to a rack); else whole
    domains with the last one partial (1,148 GB300 = 15 racks and 68 GPUs: one 4-GPU tray down). The largest
    divisor was taken whatever it was: 1,148 became 28 "racks" of 41, 1,151 (prime) one GPU per NVLink domain
    (found from outside)."""
    if num_gpus <= domain_size:
        return num_gpus
    if num_gpus % domain_size == 0:
        return domain_size
    divisor = max(d for d in range(1, domain_size + 1) if num_gpus % d == 0)
    return divisor if divisor >= FULL_ENOUGH * domain_size else domain_size


def pair_domains(crosses: np.ndarray, domain_size: int) -> np.ndarray:
    """Scale-up domains a send/recv pair touches: 2 where the pair `crosses` a domain boundary, and always 2 on a
    fabric of one GPU per domain (a 1-GPU-per-node cluster), where no two ranks share one. The CP ring's and the
    pipeline's pairs were put on 1 domain wherever the rows' own group was 1 (cp = 1, pp = 1 rows priced beside
    the others), which a 1-rank-per-domain profile refuses: `plan` stopped on every such fitted profile."""
    return np.where(np.asarray(crosses) | (domain_size < 2), 2, 1)


def racks_spanned(span: np.ndarray | int, per_rack: int, num_gpus: int | None = None) -> np.ndarray:
    """Racks touched by the blocks of `span` consecutive ranks aligned at multiples of `span`: the most any touches
    (domains_touched's count; over `num_gpus` when given, else every offset). It said ceil(span / per_rack) + 1
    wherever neither divides the other: Kimi-K2's EP96 on 288 GB300 read "across 3 racks" where every group spans 2."""
    span = np.asarray(span, dtype=np.int64)
    return domains_touched(span, np.maximum(span, 1), per_rack,
                           max(1, -(-num_gpus // per_rack)) if num_gpus else None).astype(np.int64)


def ep_domains(ep: np.ndarray | int, etp: np.ndarray | int, per_rack: int, num_gpus: int | None = None) -> np.ndarray:
    """Scale-up domains one EP x ETP group spans (1 without EP): where its all-to-all leaves NVLink."""
    ep = np.asarray(ep)
    return np.where(ep > 1, racks_spanned(np.asarray(etp) * ep, per_rack, num_gpus), 1)


def placement_violations(tp: np.ndarray, etp: np.ndarray, per_rack: int) -> np.ndarray:
    """Bitmask of PLACEMENT_RULES broken (bits above layout.RULES, so both masks can be OR-ed)."""
    bits = np.where(per_rack % tp != 0, PLACEMENT_BITS["tp_in_rack"], 0)
    bits |= np.where(per_rack % etp != 0, PLACEMENT_BITS["etp_in_rack"], 0)
    return bits.astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Groups of global ranks for one layout, and the rack of each rank."""

    num_gpus: int
    gpus_per_rack: int
    groups: dict[str, list[list[int]]]

    @property
    def num_racks(self) -> int:
        return math.ceil(self.num_gpus / self.gpus_per_rack)

    def rack_of(self, rank: int) -> int:
        return rank // self.gpus_per_rack

    def racks_of_groups(self, kind: str) -> list[list[int]]:
        return [sorted({self.rack_of(r) for r in g}) for g in self.groups[kind]]

    def max_racks(self, kind: str) -> int:
        return max((len(r) for r in self.racks_of_groups(kind)), default=0)

    def summary(self) -> dict[str, object]:
        """Per kind: group size, number of groups, racks the widest group spans, the first group."""
        return {kind: {"size": len(g[0]), "num_groups": len(g), "max_racks_per_group": self.max_racks(kind),
                       "first_group": g[0]} for kind, g in self.groups.items()}


def _groups(ranks: np.ndarray, axis: int) -> list[list[int]]:
    moved = np.moveaxis(ranks, axis, -1)
    return moved.reshape(-1, moved.shape[-1]).tolist()


def place(layout: Layout, num_gpus: int, domain_size: int) -> Placement:
    """Megatron-Core rank groups of `layout` (tp-cp-dp-pp; etp-ep-edp-pp, innermost first)."""
    assert layout.world == num_gpus, (layout.world, num_gpus)
    # C order: the last axis varies fastest, so the innermost name goes last.
    dense = np.arange(num_gpus).reshape(layout.pp, layout.dp, layout.cp, layout.tp)
    expert = np.arange(num_gpus).reshape(layout.pp, layout.edp, layout.ep, layout.etp)
    groups = {"tp": _groups(dense, 3), "cp": _groups(dense, 2), "dp": _groups(dense, 1),
              "dp_cp": dense.transpose(0, 3, 1, 2).reshape(-1, layout.dp * layout.cp).tolist(),
              "pp": _groups(dense, 0), "etp": _groups(expert, 3), "ep": _groups(expert, 2), "edp": _groups(expert, 1)}
    return Placement(num_gpus=num_gpus, gpus_per_rack=gpus_per_rack(num_gpus, domain_size), groups=groups)
