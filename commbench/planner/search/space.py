"""Search every valid parallel layout for a model, system and GPU count; rank by predicted tokens/s/GPU.

The space (Megatron-Core names): tp, cp, pp, vp, ep, etp, mbs (dp derived from the GPU count), and
per layout recompute (none|selective|full), dispatcher (alltoall|flex), distributed optimizer,
FSDP (pp = 1 rows with the distributed optimizer, again with parameters sharded too, and for dense
models as HSDP sharded within a scale-up domain, replicated across: step/fsdp.py) and
sequence parallel (when tp > 1). Overlap flags (tp_comm_overlap, moe_a2a_overlap, dp_overlap) are
set on wherever Megatron allows them: the step model gives them no memory cost and never a longer
step, so a layout with one off is dominated (same memory, never faster) and is evaluated only
when pinned off with --layout. Megatron's constraints on them (megatron/training/arguments.py):
--tp-comm-overlap needs --sequence-parallel (tp > 1); --overlap-moe-expert-parallel-comm needs
ep > 1, no full recompute, and an interleaved schedule when pp > 1.

Every candidate is checked by layout.RULES and placement.PLACEMENT_RULES, evaluated by the
training-step model (`evaluate_layouts`, vectorised in chunks), and kept only if the predicted
memory, including the model's own reserve, leaves `headroom_fraction` of HBM free. Everything
here is PREDICTED. Results: the top layouts by tokens/s/GPU and the Pareto front of
throughput vs memory headroom, each re-evaluated for a full breakdown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from commbench.planner.search.frameworks import (DEFAULT_FRAMEWORK, check_framework, check_precision_runs,
                                                  framework_pins, graphs_allowed, restrict_columns)
from commbench.errors import CommbenchError, invalid
from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.planner.layout.spec import (BOOL_FIELDS, CODE_FIELDS, COUNT_FIELDS, INT_FIELDS, RULE_BITS, RULES,
                                      LayoutArrays, layout_violations)
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.recipes import release_features
from commbench.planner.layout.placement import PLACEMENT_BITS, PLACEMENT_RULES, gpus_per_rack, placement_violations
from commbench.planner.step.evaluate import StepBreakdown, evaluate_layouts

CHUNK = 262_144
MBS_CHOICES = (1, 2, 4, 8)
CP_CHOICES = (1, 2, 4, 8)
MAX_TP = 8  # tp and etp above one 8-GPU baseboard's worth are searched only when pinned
STRUCTURE = ("tp", "cp", "pp", "vp", "ep", "etp", "mbs")
DEFAULT_HEADROOM = 0.05


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """What to search: the fixed inputs, and `pins` (field -> value) from --layout."""

    model: ModelSpec
    fabric: object
    num_gpus: int
    gbs: int
    precision: str = "bf16"
    seq_len: int | None = None
    headroom_fraction: float = DEFAULT_HEADROOM
    moe_imbalance: float = 1.0
    moe_capacity_factor: float | None = None  # expert padding with full-iteration graphs (None: moe_imbalance)
    pins: dict[str, object] = field(default_factory=dict)
    calibration: Calibration = CALIBRATED
    keep: int = 200
    framework: str = DEFAULT_FRAMEWORK  # what the search may propose (frameworks.py); pins gain what it fixes
    software: str | None = None  # Megatron-Bridge release whose features are searched (None: the newest)

    @property
    def gpu_name(self) -> str | None:
        """The fabric's GPU (None before a tune sweep has measured the fabric)."""
        return self.fabric.gpu.name if self.fabric is not None else None

    def __post_init__(self) -> None:
        from commbench.planner.layout.recipes import check_pins_in_release, check_release, newest_release
        object.__setattr__(self, "software", check_release(self.software) if self.software else newest_release())
        check_pins_in_release(self.pins, self.software, self.gpu_name)  # the user's pins, before the framework's
        object.__setattr__(self, "framework", check_framework(self.framework))
        object.__setattr__(self, "pins", framework_pins(self.framework, self.model, self.pins))
        check_precision_runs(self.framework, self.model, self.precision)
        if not 0 <= self.headroom_fraction < 1:
            raise invalid("--mem-headroom", self.headroom_fraction, "a fraction of HBM in [0, 1)")
        if self.num_gpus < 1:
            raise invalid("--gpus", self.num_gpus, "a positive GPU count")
        if self.gbs < 1:
            raise invalid("--gbs", self.gbs, "a positive global batch size (sequences)")
        if self.moe_capacity_factor is not None and self.moe_capacity_factor < 1:
            raise invalid("--moe-capacity-factor", self.moe_capacity_factor, ">= 1 (expert capacity / mean tokens)")


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """Kept layouts (best first) with their full predicted breakdown, and search statistics."""

    request: SearchRequest
    layouts: LayoutArrays
    breakdown: StepBreakdown
    headroom_bytes: np.ndarray
    ep_racks: np.ndarray
    pareto: np.ndarray           # indices into `layouts`, by descending throughput
    num_enumerated: int
    num_valid: int
    num_fit: int
    elapsed_s: float
    gpus_per_rack: int
    fitting_tokens_desc: np.ndarray  # predicted tokens/s/GPU of every fitting layout, best first (for ranks)

    def __len__(self) -> int:
        return len(self.layouts)

    @property
    def layouts_per_s(self) -> float:
        return self.num_enumerated / max(self.elapsed_s, 1e-9)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _grid(**axes: np.ndarray) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.ravel() for name, m in zip(axes, mesh)}


def _pinned(values, pins: dict, name: str):
    return [pins[name]] if name in pins else values


def even_vps(model: ModelSpec, pp: int) -> list[int]:
    """vp values that split the layers evenly over pp*vp virtual stages, counting the embedding and
    the loss as a layer each or not (Megatron --account-for-embedding/loss-in-pipeline-split); vp=1
    (1F1B, uneven first/last stage) always. Other vp are searched only when pinned."""
    slots = model.num_layers + model.num_mtp_layers
    if pp == 1:
        return [1]
    return sorted({1} | {v for v in range(2, (slots + 2) // pp + 1)
                         if any((slots + extra) % (pp * v) == 0 for extra in (0, 1, 2))})


def _structures(req: SearchRequest, per_rack: int) -> dict[str, np.ndarray]:
    """Structural candidates (tp, cp, pp, vp, ep, etp, mbs, dp) with the GPU count divided exactly, pins applied."""
    m, n, pins = req.model, req.num_gpus, req.pins
    slots = m.num_layers + m.num_mtp_layers + 2
    pairs = [(p, v) for p in _pinned([p for p in _divisors(n) if p <= slots], pins, "pp")
             for v in _pinned(even_vps(m, p), pins, "vp")]
    pairs_arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    tps = [d for d in _divisors(per_rack) if d <= MAX_TP]
    axes = {"tp": _pinned(tps, pins, "tp"),
            "cp": _pinned([c for c in CP_CHOICES if c <= n], pins, "cp"),
            "pair": list(range(len(pairs))),
            "ep": _pinned([e for e in _divisors(max(m.num_routed_experts, 1)) if e <= n], pins, "ep"),
            "etp": _pinned(tps if m.is_moe else [0], pins, "etp"),
            "mbs": _pinned(list(MBS_CHOICES), pins, "mbs")}
    g = _grid(**{k: np.asarray(v, dtype=np.int64) for k, v in axes.items()})
    pair = g.pop("pair")
    g["pp"], g["vp"] = pairs_arr[pair, 0], pairs_arr[pair, 1]
    if not m.is_moe:
        g["etp"] = g["tp"]
    model_parallel = g["tp"] * g["cp"] * g["pp"]
    keep = n % model_parallel == 0
    g = {k: v[keep] for k, v in g.items()}
    g["dp"] = n // (g["tp"] * g["cp"] * g["pp"])
    if "dp" in pins:
        keep = g["dp"] == pins["dp"]
        g = {k: v[keep] for k, v in g.items()}
    return g


def _with_flags(g: dict[str, np.ndarray], req: SearchRequest) -> dict[str, np.ndarray]:
    """Cross each structure with the flag choices that matter for it (pins override):
    recompute x distributed optimizer x sequence parallel (tp > 1; forced on for MoE, as Megatron
    asserts "When using MoE and tensor parallelism, sequence parallelism must be used"). The
    dispatcher is flex (DeepEP/HybridEP) unless pinned: the step model sends each token once per
    destination rank with it and never more than top-k times with alltoall, memory unchanged, so
    alltoall is dominated."""
    pins = req.pins
    has = release_features(req.software, req.gpu_name)   # what the release runs on this GPU (recipes.py)
    codes = {k: CODE_FIELDS[k].index(v) for k, v in pins.items() if k in CODE_FIELDS}
    light = [3] if req.model.attention == "mla" and "mla_up_proj" in has["recompute"] else []  # DeepSeek-V3 recipes
    rec = _pinned([0, 1, 2] + light, codes, "recompute")
    # CUDA graphs: per-layer graphs in the enumeration (where the release has them); the full-iteration
    # variant of each kept layout is tried afterwards (with_full_graphs), keeping the enumeration's time.
    graph = "layer" if "layer" in has["cuda_graph"] else "none"
    graphs = _pinned([CODE_FIELDS["cuda_graph"].index(graph)], codes, "cuda_graph")
    disp = _pinned([CODE_FIELDS["dispatcher"].index("flex" if "flex" in has["dispatcher"] else "alltoall")],
                   codes, "dispatcher")
    dist = _pinned([True, False], pins, "distributed_optimizer")
    sp = _pinned([True] if req.model.is_moe else [True, False], pins, "sequence_parallel")
    n = len(g["tp"])
    idx, r, d, o, s, cg = (x.ravel() for x in np.meshgrid(np.arange(n), rec, disp, dist, sp, graphs, indexing="ij"))
    cols = {k: v[idx] for k, v in g.items()}
    cols.update(recompute=np.asarray(r, dtype=np.int8), dispatcher=np.asarray(d, dtype=np.int8),
                distributed_optimizer=o.astype(bool), sequence_parallel=s.astype(bool),
                cuda_graph=np.asarray(cg, dtype=np.int8))
    # Drop choices that cannot differ: sequence parallel without TP.
    redundant = (cols["tp"] == 1) & (cols["sequence_parallel"] != sp[0])
    cols = {k: v[~redundant] for k, v in cols.items()}
    if "dispatcher" not in pins:  # no EP: no dispatcher to choose; keep Megatron's default
        cols["dispatcher"] = np.where(cols["ep"] == 1, np.int8(CODE_FIELDS["dispatcher"].index("alltoall")),
                                      cols["dispatcher"]).astype(np.int8)
    tp, sp_on = cols["tp"], cols["sequence_parallel"]
    cols["tp_comm_overlap"] = np.asarray(pins.get("tp_comm_overlap", True)) & sp_on & (tp > 1)
    a2a_ok = (cols["ep"] > 1) & (cols["recompute"] != 2) & ((cols["pp"] == 1) | (cols["vp"] > 1))
    # Megatron (TransformerConfig): with MTP the EP overlap needs pp > 1 and at most one MTP layer.
    a2a_ok &= (req.model.num_mtp_layers == 0) | ((cols["pp"] > 1) & (req.model.num_mtp_layers == 1))
    cols["moe_a2a_overlap"] = np.asarray(pins.get("moe_a2a_overlap", True in has["moe_a2a_overlap"])) & a2a_ok
    if "cuda_graph" not in pins:  # megatron-core: full recompute only with the full-iteration graph
        cols["cuda_graph"] = np.where(cols["recompute"] == 2, np.int8(CODE_FIELDS["cuda_graph"].index("none")),
                                      cols["cuda_graph"]).astype(np.int8)
    cols["dp_overlap"] = np.full(len(tp), bool(pins.get("dp_overlap", True)))
    # Fused permute + grouped MLP: on for MoE in MXFP8 on Blackwell (cutedsl_fused_grouped_mlp), where
    # it exists; it only removes HBM traffic. FP8 attention changes numerics: only when pinned.
    gpu = getattr(req.fabric, "gpu", None)
    fusable = req.model.is_moe and req.precision == "mxfp8" and gpu is not None and not str(gpu.name).startswith("h")
    fusable = fusable and True in has["fused_moe"]
    cols["fused_moe"] = np.full(len(tp), bool(pins.get("fused_moe", fusable)))
    cols["fp8_attention"] = np.full(len(tp), bool(pins.get("fp8_attention", False)))
    cols["cpu_offload_layers"] = np.full(len(tp), int(pins.get("cpu_offload_layers", 0)))  # only when pinned
    return restrict_columns(req.framework, _with_fsdp(cols, pins, req), "cuda_graph" in pins, req.model)


def _with_fsdp(cols: dict[str, np.ndarray], pins: dict, req: SearchRequest) -> dict[str, np.ndarray]:
    """FSDP (step/fsdp.py) beside the distributed optimizer: each pp = 1 row with the distributed
    optimizer again as FSDP (the FSDP rule needs both), and for a dense model (a MoE one under TorchTitan,
    whose expert mesh folds EP into each shard group) again as HSDP with the
    shard group of one scale-up domain (fsdp_replicas = dp*tp*cp / GPUs per domain) where that splits
    DP; pinned fsdp=true makes every row FSDP, pinned fsdp_replicas sets the replicas."""
    n = len(cols["tp"])
    replicas = int(pins.get("fsdp_replicas", 1))
    moe_hsdp = not req.model.is_moe or req.framework == "torchtitan"  # megatron-core 0.16.1: no MoE HSDP
    if replicas > 1 and (not moe_hsdp or pins.get("fsdp") is False):
        detail = (f"{req.model.name} is a MoE model and Megatron-FSDP in megatron-core 0.16.1 builds no expert mesh "
                  "for HSDP (--framework torchtitan can)") if not moe_hsdp else "fsdp is pinned false"
        raise CommbenchError(f"layout hsdp rule broken for {req.model.name}: {dict(RULES)['hsdp']} "
                             f"(fsdp_replicas = {replicas}; {detail})")
    if replicas > 1:  # pinned HSDP: keep the structures it splits (an empty search names the rule)
        shard_ranks = cols["dp"] // replicas * cols["cp"] * cols["tp"]
        ok = (cols["dp"] % replicas == 0) & ((shard_ranks % (cols["ep"] * cols["etp"]) == 0) | (not req.model.is_moe))
        if not ok.any():
            raise CommbenchError(f"layout hsdp rule broken for {req.model.name}: {dict(RULES)['hsdp']} (fsdp_replicas = "
                                 f"{replicas}; dp = {sorted(set(cols['dp'].tolist()))}, ep*etp = "
                                 f"{sorted(set((cols['ep'] * cols['etp']).tolist()))})")
        cols, n = {k: v[ok] for k, v in cols.items()}, int(ok.sum())
    cols["fsdp_replicas"] = np.full(n, replicas, dtype=np.int64)
    if "fsdp" in pins:
        cols["fsdp"] = np.full(n, bool(pins["fsdp"]))
        return cols
    cols["fsdp"] = np.zeros(n, dtype=bool)
    twin = np.flatnonzero((cols["pp"] == 1) & cols["distributed_optimizer"])
    if not twin.size:
        return cols
    parts = [{k: v[twin] for k, v in cols.items()}]
    parts[0]["fsdp"] = np.ones(twin.size, dtype=bool)
    if "fsdp_replicas" not in pins and moe_hsdp:
        per_rack = gpus_per_rack(req.num_gpus, int(req.fabric.domain_size))
        t = cols["tp"][twin] * cols["cp"][twin]
        replicas = np.maximum(cols["dp"][twin] * t // per_rack, 1)
        experts_fold = (per_rack % (cols["ep"][twin] * cols["etp"][twin]) == 0) if req.model.is_moe else True
        hsdp = np.flatnonzero((replicas > 1) & (per_rack % t == 0) & (cols["dp"][twin] % replicas == 0) & experts_fold)
        if hsdp.size:
            parts.append({k: v[hsdp] for k, v in parts[0].items()})
            parts[1]["fsdp_replicas"] = replicas[hsdp]
    return {k: np.concatenate([v] + [p[k] for p in parts]) for k, v in cols.items()}


def candidates(req: SearchRequest) -> tuple[LayoutArrays, np.ndarray, int]:
    """(enumerated layouts, their violation bits incl. placement, GPUs per rack). Structures that
    break a rule are kept once (flags at their first choice) so an empty search can say which rule."""
    per_rack = gpus_per_rack(req.num_gpus, int(req.fabric.domain_size))
    g = _structures(req, per_rack)
    probe = LayoutArrays.from_columns(gbs=req.gbs, precision=req.precision, **g)
    bits = layout_violations(req.model, probe, req.num_gpus, req.seq_len)
    bits |= placement_violations(probe.tp, probe.etp, per_rack)
    ok = bits == 0
    cols = _with_flags({k: v[ok] for k, v in g.items()}, req)
    arr = LayoutArrays.from_columns(gbs=req.gbs, precision=req.precision, **cols)
    return arr, bits, per_rack


def pareto_front(tokens: np.ndarray, headroom: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Indices of the throughput-vs-headroom Pareto front (no other point better in both), by
    tokens desc. `order`: indices by tokens desc, when already sorted."""
    if order is None:
        order = np.argsort(-tokens, kind="stable")
    room = headroom[order]
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], room[:-1]]))
    return order[room > best_before]


def _why_none(bits: np.ndarray, req: SearchRequest, per_rack: int) -> str:
    common = int(np.bitwise_and.reduce(bits)) if len(bits) else 0
    names = [f"{n} ({r})" for n, r in RULES if common & RULE_BITS[n]]
    names += [f"{n} ({r}; {per_rack} GPUs per domain)" for n, r in PLACEMENT_RULES if common & PLACEMENT_BITS[n]]
    pinned = ", ".join(f"{k}={v}" for k, v in req.pins.items()) or "nothing pinned"
    if common & RULE_BITS["pipeline"] and "pp" in req.pins:
        from commbench.planner.layout.split import choose_split

        try:  # the split chooser's own line: layer count, pp x vp and why
            choose_split(req.model, int(req.pins["pp"]), int(req.pins.get("vp", 1)))
        except CommbenchError as exc:
            return str(exc)
    if names:
        return f"every layout with {pinned} breaks rule {names[0]}"
    counts = {n: int(np.count_nonzero(bits & RULE_BITS[n])) for n, _ in RULES}
    worst = max(counts, key=counts.get)
    return f"no layout with {pinned} passes every rule (most often broken: {worst}: {dict(RULES)[worst]})"


def search(req: SearchRequest) -> SearchResult:
    """Enumerate, filter, evaluate in chunks; keep the top `req.keep` and the Pareto front."""
    start = time.perf_counter()
    arr, bits, per_rack = candidates(req)
    valid_idx = np.arange(len(arr))
    if len(valid_idx) == 0:
        raise CommbenchError(f"no valid layout for {req.model.name} on {req.num_gpus} GPUs: "
                             + _why_none(bits, req, per_rack))
    kept_idx, kept_tok, kept_room, all_tok, all_idx = [], [], [], [], []
    num_fit = 0
    for lo in range(0, len(valid_idx), CHUNK):
        idx = valid_idx[lo:lo + CHUNK]
        bd = evaluate_layouts(req.model, req.fabric, arr.take(idx), seq_len=req.seq_len,
                              calibration=req.calibration, moe_imbalance=req.moe_imbalance,
                              moe_capacity_factor=req.moe_capacity_factor, framework=req.framework)
        room = bd.mem_capacity_bytes * (1.0 - req.headroom_fraction) - bd.mem_total_bytes
        ok = bd.fits & bd.valid & (room >= 0)
        num_fit += int(ok.sum())
        all_tok.append(bd.tokens_per_s_per_gpu[ok])
        all_idx.append(idx[ok])
        tok, rm, sel = bd.tokens_per_s_per_gpu[ok], (bd.mem_capacity_bytes - bd.mem_total_bytes)[ok], idx[ok]
        order = np.argsort(-tok)
        pick = np.union1d(order[:req.keep], pareto_front(tok, rm, order))
        kept_idx.append(sel[pick]), kept_tok.append(tok[pick]), kept_room.append(rm[pick])
    sel, tok, room = (np.concatenate(x) for x in (kept_idx, kept_tok, kept_room))
    if len(sel) == 0:
        raise CommbenchError(no_fit_message(req))
    top = np.argsort(-tok, kind="stable")[:req.keep]
    pick = np.union1d(top, pareto_front(tok, room))
    pick = pick[np.argsort(-tok[pick], kind="stable")]
    final, bd = with_full_graphs(req, arr.take(sel[pick]))
    # Ranks: every fitting layout once, the kept ones with their final (graph-scope chosen) figure.
    others = ~np.isin(np.concatenate(all_idx), sel[pick])
    final_fit = bd.fits & (bd.mem_capacity_bytes * (1.0 - req.headroom_fraction) >= bd.mem_total_bytes)
    ranked = np.concatenate([np.concatenate(all_tok)[others], bd.tokens_per_s_per_gpu[final_fit]])
    headroom = bd.mem_capacity_bytes - bd.mem_total_bytes
    from commbench.planner.layout.placement import racks_spanned
    ep_racks = np.where(final.ep > 1, racks_spanned(final.etp * final.ep, per_rack), 1)
    return SearchResult(request=req, layouts=final, breakdown=bd, headroom_bytes=headroom, ep_racks=ep_racks,
                        pareto=pareto_front(bd.tokens_per_s_per_gpu, headroom), num_enumerated=len(arr) + int(np.count_nonzero(bits)),
                        num_valid=len(valid_idx), num_fit=num_fit, elapsed_s=time.perf_counter() - start,
                        gpus_per_rack=per_rack, fitting_tokens_desc=-np.sort(-ranked))


def rank_of(result: SearchResult, tokens_per_s_per_gpu: float) -> int:
    """1-based rank a layout with this predicted throughput would take among the fitting layouts."""
    return int(np.searchsorted(-result.fitting_tokens_desc, -tokens_per_s_per_gpu, side="left")) + 1


def no_fit_message(req: SearchRequest) -> str:
    """'nothing fits' with the smallest GPU count (powers of two and whole domains) where something does."""
    from dataclasses import replace
    dom = int(req.fabric.domain_size)
    counts = sorted({2 ** k for k in range(1, 17)} | {dom * k for k in range(1, 257)})
    for n in (c for c in counts if c > req.num_gpus):
        trial = replace(req, num_gpus=n, fabric=req.fabric.scaled(num_gpus=n), keep=1)
        try:
            arr, _, _ = candidates(trial)
            idx = np.arange(len(arr))
            if len(idx) == 0:
                continue
            bd = evaluate_layouts(trial.model, trial.fabric, arr.take(idx[:CHUNK * 4]), seq_len=req.seq_len,
                                  calibration=req.calibration, framework=req.framework)
        except CommbenchError:
            continue
        if np.any(bd.fits & (bd.mem_capacity_bytes * (1 - req.headroom_fraction) >= bd.mem_total_bytes)):
            return (f"no layout of {req.model.name} fits in memory on {req.num_gpus} GPUs with "
                    f"{req.headroom_fraction:.0%} HBM headroom; the smallest GPU count where one fits is {n}")
    return (f"no layout of {req.model.name} fits in memory on {req.num_gpus} GPUs with "
            f"{req.headroom_fraction:.0%} HBM headroom, nor on any count up to 65536")


def structure_key(arr: LayoutArrays, i: int) -> tuple:
    return tuple(int(getattr(arr, k)[i]) for k in STRUCTURE + ("dp",))


MAX_LAYOUT_INT = 1 << 24  # larger tp/ep/gbs/... overflow the planner's int64 arrays: a typo, not a layout


def parse_pins(text: str | None) -> dict[str, object]:
    """--layout 'ep=32,pp=2' -> {'ep': 32, 'pp': 2}; keys and values as parse_layout takes them."""
    names = set(INT_FIELDS) | set(BOOL_FIELDS) | set(CODE_FIELDS) | set(COUNT_FIELDS)
    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, raw = part.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip().lower()
        if not sep or key not in names:
            raise invalid("--layout", part, f"key=value pairs with keys {', '.join(sorted(names))}")
        if key in COUNT_FIELDS:
            if not raw.isdigit() or int(raw) > MAX_LAYOUT_INT:
                raise invalid(key, raw, f"a non-negative integer up to {MAX_LAYOUT_INT:,}")
            out[key] = int(raw)
        elif key in INT_FIELDS:
            if not raw.isdigit() or not 1 <= int(raw) <= MAX_LAYOUT_INT:
                raise invalid(key, raw, f"a positive integer up to {MAX_LAYOUT_INT:,}")
            out[key] = int(raw)
        elif key in BOOL_FIELDS:
            if raw not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise invalid(key, raw, "true/false (or on/off, 1/0)")
            out[key] = raw in ("1", "true", "on", "yes")
        else:
            if raw not in CODE_FIELDS[key]:
                raise invalid(key, raw, f"one of {', '.join(CODE_FIELDS[key])}")
            out[key] = raw
    return out


FULL_KEYS = ("tp", "pp", "vp", "ep", "mbs")


def with_full_graphs(req: SearchRequest, arr: LayoutArrays) -> tuple[LayoutArrays, StepBreakdown]:
    """Each layout with per-layer CUDA graphs or a full-iteration graph, whichever predicts faster
    while fitting the headroom (unless cuda_graph is pinned); re-sorted by throughput."""
    def score(bd):
        room = bd.mem_capacity_bytes * (1.0 - req.headroom_fraction) - bd.mem_total_bytes
        return np.where(bd.fits & bd.valid & (room >= 0), bd.tokens_per_s_per_gpu, -1.0)

    kw = dict(seq_len=req.seq_len, calibration=req.calibration, moe_imbalance=req.moe_imbalance,
              moe_capacity_factor=req.moe_capacity_factor, framework=req.framework)
    bd = evaluate_layouts(req.model, req.fabric, arr, **kw)
    if "cuda_graph" not in req.pins and "full" in release_features(req.software, req.gpu_name)["cuda_graph"]:
        full = LayoutArrays(**{**{f: getattr(arr, f) for f in arr.__dataclass_fields__},
                               "cuda_graph": np.full(len(arr), CODE_FIELDS["cuda_graph"].index("full"), dtype=np.int8)})
        bd_full = evaluate_layouts(req.model, req.fabric, full, **kw)
        # megatron-core refuses the full-iteration (local) graph with the EP all-to-all overlap.
        better = (score(bd_full) > score(bd)) & ~arr.moe_a2a_overlap & graphs_allowed(req.framework, arr.pp, arr.ep)
        arr = LayoutArrays(**{f: np.where(better, getattr(full, f), getattr(arr, f)) for f in arr.__dataclass_fields__})
        bd = evaluate_layouts(req.model, req.fabric, arr, **kw)
    order = np.argsort(-np.where(score(bd) > 0, bd.tokens_per_s_per_gpu, -1.0), kind="stable")
    arr = arr.take(order)
    return arr, evaluate_layouts(req.model, req.fabric, arr, **kw)


def best_for_pins(req: SearchRequest) -> tuple[LayoutArrays, StepBreakdown]:
    """The one layout `commbench plan --layout` shows: the search's own candidates for the pinned
    structure (flags not pinned chosen as the search chooses them), scored by the same call, the
    fastest that fits with the headroom (else the fastest). One scoring path for plan and search."""
    arr, bits, per_rack = candidates(req)
    if len(arr) == 0:
        raise CommbenchError(f"no valid layout for {req.model.name} on {req.num_gpus} GPUs: "
                             + _why_none(bits, req, per_rack))
    arr, bd = with_full_graphs(req, arr)   # sorted: fitting layouts first, fastest first
    one = arr.take(np.array([0]))
    return one, evaluate_layouts(req.model, req.fabric, one, seq_len=req.seq_len, calibration=req.calibration,
                                 moe_imbalance=req.moe_imbalance, moe_capacity_factor=req.moe_capacity_factor,
                                 framework=req.framework)


def is_complete(pins: dict[str, object]) -> bool:
    """True when --layout names tp, pp, vp, ep and mbs: `commbench plan` then evaluates that one
    layout as given (cp and flags at their defaults) instead of searching the rest."""
    return all(k in pins for k in FULL_KEYS)


__all__ = ["SearchRequest", "SearchResult", "search", "candidates", "best_for_pins", "pareto_front", "parse_pins",
           "structure_key", "is_complete", "no_fit_message", "rank_of"]
