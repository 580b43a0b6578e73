"""Search every valid parallel layout for a model, system and GPU count; rank by predicted tokens/s/GPU.

The space (Megatron-Core names): tp, cp, pp, vp, ep, etp, mbs (dp derived from the GPU count), and
per layout recompute (none|selective|full), dispatcher (alltoall|flex), distributed optimizer,
FSDP (pp = 1 rows with the distributed optimizer, again with parameters sharded too, and for dense
models as HSDP sharded within a scale-up domain, replicated across: step/fsdp.py) and
sequence parallel (when tp > 1). Overlap flags (tp_comm_overlap, moe_a2a_overlap, dp_overlap) are
set on wherever Megatron allows them: the step model gives them no memory cost and never a longer
step, so a layout with one off is dominated (same memory, never faster) and is evaluated only
when pinned off with --layout. Not proposed where the published recipes say otherwise: the EP overlap
with the EP group inside one 8-GPU node (measured slower) and TP comm overlap at a precision no recipe
runs it at (NVFP4) (layout/recipes.py). Megatron's constraints on them (megatron/training/arguments.py):
--tp-comm-overlap needs --sequence-parallel (tp > 1); --overlap-moe-expert-parallel-comm needs
ep > 1, no full recompute, and an interleaved schedule when pp > 1.

Every candidate is checked by layout.RULES and placement.PLACEMENT_RULES, evaluated by the
training-step model (`evaluate_layouts`, vectorised in chunks), and kept only if the predicted
memory, including the model's own reserve, leaves `headroom_fraction` of HBM free. Everything
here is PREDICTED. Results: the top layouts by tokens/s/GPU and the Pareto front of
throughput vs memory headroom, each re-evaluated for a full breakdown.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from commbench.planner.search.frameworks import (DEFAULT_FRAMEWORK, check_framework, check_precision_runs, check_precision_tp,
                                                  check_seq_len_runs, check_window_seq_len, framework_pins,
                                                  TORCHTITAN_VERSIONS,
                                                  graphs_allowed)
from commbench.errors import CommbenchError, invalid
from commbench.limits import MAX_LAYOUT_INT, MAX_MOE_IMBALANCE
from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.planner.layout.spec import (BOOL_FIELDS, CODE_FIELDS, COUNT_FIELDS, INT_FIELDS, RULE_BITS, RULES, STRUCTURE,
                                      LayoutArrays)
from commbench.planner.models.spec import ModelSpec
from commbench.planner.layout.graph_scope import scope_mask, scope_text
from commbench.planner.layout.recipe_model import recipe_model
from commbench.planner.layout.recipes import release_features
from commbench.planner.layout.placement import PLACEMENT_BITS, PLACEMENT_RULES
from commbench.planner.step.evaluate import StepBreakdown, evaluate_layouts
from commbench.planner.step.loss_memory import TARGETS
from commbench.planner.search.candidates import candidates
from commbench.planner.search.graph_recompute import graph_recompute_refused
from commbench.planner.search.memory_floor import (OPTIMIZER_STATE_BYTES_PER_PARAM, fillable_bytes_per_gpu,
                                                  min_gpus_for_optimizer_state, trained_params)
from commbench.limits import DEFAULT_MEM_HEADROOM

CHUNK = 65_536
DEFAULT_HEADROOM = DEFAULT_MEM_HEADROOM   # commbench/limits.py says why


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """What to search: the fixed inputs, and `pins` (field -> value) from --layout."""

    model: ModelSpec
    fabric: object
    num_gpus: int
    gbs: int
    precision: str = "bf16"
    precision_asked: bool = True  # False: the CLI took the GPU's default (a refusal over it says so: quant_gap.py)
    seq_len: int | None = None
    headroom_fraction: float = DEFAULT_HEADROOM
    moe_imbalance: float = 1.0
    moe_capacity_factor: float | None = None  # expert padding with full-iteration graphs (None: moe_imbalance)
    pins: dict[str, object] = field(default_factory=dict)
    calibration: Calibration = CALIBRATED
    keep: int = 200
    framework: str = DEFAULT_FRAMEWORK  # what the search may propose (frameworks.py); pins gain what it fixes
    software: str | None = None  # Megatron-Bridge release whose features are searched (None: the newest)
    software_note: str = ""      # set here: whose recipes stand in for a release the table lacks
    software_asked: bool | None = None   # set here (None): whether `software` was given, not the newest by default
    # What the search plans (step/loss_memory.py TARGETS), the one switch both of these follow from:
    # "launch": the Megatron-LM / TorchTitan launch commbench emits (plan, tune): the memory charges the launch's cross
    #   entropy (loss_memory.launch_loss: the recipes' te where the release's Megatron-LM takes it, else native), and
    #   a feature whose flags the release's Megatron-LM parse_args takes in no spelling is not searched
    #   (searched_features);
    # "published": a published NVIDIA run or a Megatron-Bridge recipe (benchmarks/vendor_layouts.py, calibration's
    #   rows): they ran through Megatron-Bridge's Python configs, not pretrain_gpt.py flags, so the loss is the one they
    #   ran (run_loss: Transformer Engine's) and every feature the release's recipes run is searched.
    target: str = "launch"
    # the TorchTitan release a --framework torchtitan plan's launch targets (frameworks.TORCHTITAN_VERSIONS): a rule
    # one release has and the other lacks (0.3.0's RoPE bound on training.seq_len) is that release's alone
    torchtitan_version: str = "0.3"

    @property
    def loss(self) -> str:
        """The cross entropy whose logits the memory charges (step/loss_memory.py): the target's."""
        from commbench.planner.step.loss_memory import target_loss
        return target_loss(self.framework, self.target, self.software)

    def searched_features(self, has: dict, scope: str = "") -> dict:
        """`has` (recipes.release_features: field -> the values the search may pick), less, for a Megatron-LM launch
        (target "launch"), each value whose flags the release's Megatron-LM takes in no spelling
        (release_flags.release_spelled_features; `scope`: a pinned cuda_graph_scope); a published run's as it is."""
        if self.framework != "megatron" or self.target != "launch":
            return has
        from commbench.planner.layout.release_flags import release_spelled_features
        return release_spelled_features(has, self.software, self.model, self.domain_size, scope)

    @property
    def gpu_name(self) -> str | None:
        """The fabric's GPU (None before a tune sweep has measured the fabric)."""
        return self.fabric.gpu.name if self.fabric is not None else None

    @property
    def domain_size(self) -> int | None:
        """The fabric's GPUs per scale-up domain (None before a tune sweep has measured the fabric)."""
        return int(self.fabric.domain_size) if self.fabric is not None else None

    def __post_init__(self) -> None:
        from commbench.planner.layout.recipes import (check_pins_in_release, check_precision_in_release, check_release,
                                                      newest_release, release_note)
        given = self.software is not None  # '' is given (and refused), not read as the newest release
        if self.software_asked is None:   # kept through dataclasses.replace, which sees the release resolved
            object.__setattr__(self, "software_asked", given)
        object.__setattr__(self, "software_note", release_note(self.software) if given else "")
        asked = self.software
        object.__setattr__(self, "software", check_release(self.software) if given else newest_release())
        check_precision_in_release(self.precision, self.software, asked if given else None)
        from commbench.planner.search.pin_rules import pin_rule_refusal
        refusal = pin_rule_refusal(str(self.framework), self.model.is_moe, self.pins,
                                   str(self.torchtitan_version))   # a rule the pins break, first
        if refusal:
            raise CommbenchError(refusal)
        check_pins_in_release(self.pins, self.software, self.gpu_name, self.precision,  # the user's pins, first
                              self.domain_size, framework=str(self.framework))
        etp = self.pins.get("etp")
        if etp is not None and not self.model.is_moe and etp != self.pins.get("tp", etp if etp == 1 else None):
            # a dense model has no expert layer: the search set etp = tp and dropped the pin without a word
            raise invalid("etp", etp, f"only for a MoE model's experts: {self.model.name} is dense (its etp is tp; "
                          "leave etp out)")
        object.__setattr__(self, "framework", check_framework(self.framework))
        if self.target not in TARGETS:
            raise invalid("target", self.target, "what the search plans: " + " or ".join(TARGETS)
                          + " (the launch commbench emits, or a published Megatron-Bridge run)")
        if self.torchtitan_version not in TORCHTITAN_VERSIONS:
            raise invalid("--torchtitan-version", self.torchtitan_version, f"one of {', '.join(TORCHTITAN_VERSIONS)}")
        object.__setattr__(self, "pins", framework_pins(self.framework, self.model, self.pins,
                                                              release=self.software, launch=self.target == "launch",
                                                              torchtitan_version=self.torchtitan_version))
        if self.framework == "megatron" and self.target == "launch":   # a pin whose flags the release cannot parse
            from commbench.planner.layout.release_flags import release_pin_flags_refusal
            refusal = release_pin_flags_refusal(self.model, self.software, self.pins, self.domain_size)
            if refusal:
                raise CommbenchError(refusal)
        check_recompute_layers(self.model, self.pins, self.framework)
        check_precision_runs(self.framework, self.model, self.precision, self.software, self.torchtitan_version)
        check_precision_tp(self.framework, self.model, self.precision, self.pins)
        check_seq_len_runs(self.framework, self.model, self.seq_len or self.model.seq_len, self.software,
                           self.torchtitan_version)
        check_window_seq_len(self.model, self.seq_len or self.model.seq_len)
        if self.framework == "megatron":   # what the release's Megatron-LM cannot build (hybrid MoE before 26.02)
            from commbench.planner.layout.release_flags import check_model_in_release
            check_model_in_release(self.model, self.software, asked if given else None)
            from commbench.planner.layout.release_flags import gdn_cp_refusal, hybrid_pp_refusal, release_model
            # the splits the release's Megatron-LM builds (a hybrid stack: even only before 26.02.01; Gated DeltaNet
            # over CP from 26.06)
            object.__setattr__(self, "model", release_model(self.model, self.software))
            refusal = (hybrid_pp_refusal(self.model, self.software, int(self.pins.get("pp", 1) or 1))
                       or gdn_cp_refusal(self.model, self.software, int(self.pins.get("cp", 1) or 1)))
            if refusal:
                raise CommbenchError(refusal)
        if not 0 <= self.headroom_fraction < 1:
            raise invalid("--mem-headroom", self.headroom_fraction, "a fraction of HBM in [0, 1)")
        if self.num_gpus < 1:
            raise invalid("--gpus", self.num_gpus, "a positive GPU count")
        if not 1 <= self.gbs <= MAX_LAYOUT_INT:   # as --layout gbs= (larger: a typo that planned anyway)
            raise invalid("--gbs", self.gbs, f"a positive global batch size (sequences) up to {MAX_LAYOUT_INT:,}")
        if self.moe_capacity_factor is not None and not 1 <= self.moe_capacity_factor <= MAX_MOE_IMBALANCE:
            raise invalid("--moe-capacity-factor", self.moe_capacity_factor,
                          f"a number from 1 to {MAX_MOE_IMBALANCE:,} (expert capacity / mean tokens)")


def check_recompute_layers(model: ModelSpec, pins: dict[str, object], framework: str) -> None:
    """A pinned recompute_layers above the most layers a model chunk can hold, refused in one line before the search:
    megatron-core 0.16.1 documents recompute_num_layers (method block, per model chunk) as 'between 1 and
    num_layers_per_pipeline_rank' (TransformerConfig). With pp pinned the bound is that split's largest chunk
    (layout/split.py most_chunk_layers); otherwise pp=1's whole model, and each searched layout is held to its own
    largest chunk by rule recompute_layers."""
    count = int(pins.get("recompute_layers", 0) or 0)
    if count <= 0:
        return
    from commbench.planner.layout.split import most_chunk_layers
    from commbench.planner.models.counts import framework_model
    pp, vp = int(pins.get("pp", 1) or 1), int(pins.get("vp", 1) or 1)
    most = int(most_chunk_layers(framework_model(model, framework), np.array([pp]), np.array([vp]))[0])
    if count > most:
        where = f"at pp={pp} vp={vp} " if "pp" in pins else ""
        raise invalid("recompute_layers", count, f"1..{most}: block recompute counts layers per model chunk "
                      f"(megatron-core 0.16.1 TransformerConfig: 'between 1 and num_layers_per_pipeline_rank'), and "
                      f"{where}{model.name}'s largest chunk holds {most} of its {model.num_layers} layers")


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
    fitting_structures_desc: np.ndarray  # the best of each distinct structure (STRUCTURE), best first

    def __len__(self) -> int:
        return len(self.layouts)

    @property
    def layouts_per_s(self) -> float:
        return self.num_enumerated / max(self.elapsed_s, 1e-9)


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
    pinned = _pinned_text(req.pins) or "nothing pinned"
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
    if req.num_gpus < min_gpus_for_optimizer_state(req.model, req.fabric.gpu, req.calibration,
                                                   req.headroom_fraction, req.framework):
        raise CommbenchError(no_fit_message(req))   # before building layouts: a model of absurd size answers at once
    arr, bits, per_rack = candidates(req)
    valid_idx = np.arange(len(arr))
    if len(valid_idx) == 0:
        raise CommbenchError(f"no valid layout for {req.model.name} on {req.num_gpus} GPUs: "
                             + _why_none(bits, req, per_rack))
    kept_idx, kept_tok, kept_room, all_tok, all_idx = [], [], [], [], []
    num_fit = 0
    for idx, bd in _evaluated_chunks(req, arr, valid_idx):
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
    ranked_idx = np.concatenate(all_idx)[others]
    ranked_codes = structure_codes({name: np.concatenate([getattr(arr, name)[ranked_idx], getattr(final, name)[final_fit]])
                                    for name in STRUCTURE})
    headroom = bd.mem_capacity_bytes - bd.mem_total_bytes
    from commbench.planner.layout.placement import ep_domains
    ep_racks = ep_domains(final.ep, final.etp, per_rack, req.num_gpus)
    return SearchResult(request=req, layouts=final, breakdown=bd, headroom_bytes=headroom, ep_racks=ep_racks,
                        pareto=pareto_front(bd.tokens_per_s_per_gpu, headroom), num_enumerated=len(arr) + int(np.count_nonzero(bits)),
                        num_valid=len(valid_idx), num_fit=num_fit, elapsed_s=time.perf_counter() - start,
                        gpus_per_rack=per_rack, fitting_tokens_desc=-np.sort(-ranked),
                        fitting_structures_desc=best_per_structure_desc(ranked, ranked_codes))


def _evaluated_chunks(req: SearchRequest, arr: LayoutArrays, valid_idx: np.ndarray):
    """(indices, breakdown) of each CHUNK of `valid_idx` in order. A last chunk of under CHUNK // 8 rows is
    evaluated in one call with the one before it (a call's fixed cost, not its rows, would dominate), then split
    off: the step model works row by row, so each chunk's figures, and what is kept of it, are the same."""
    n = len(valid_idx)
    ends = list(range(CHUNK, n, CHUNK)) + [n]
    if len(ends) > 1 and ends[-1] - ends[-2] < CHUNK // 8:
        ends.pop(-2)
    lo = 0
    for hi in ends:
        bd = evaluate_layouts(req.model, req.fabric, arr.take(valid_idx[lo:hi]), seq_len=req.seq_len,
                              calibration=req.calibration, moe_imbalance=req.moe_imbalance,
                              moe_capacity_factor=req.moe_capacity_factor, framework=req.framework,
                              loss=req.loss)
        for start in range(lo, hi, CHUNK):
            stop = min(start + CHUNK, hi)
            yield valid_idx[start:stop], bd.take(slice(start - lo, stop - lo))
        lo = hi


def structure_codes(columns) -> np.ndarray:
    """One integer per layout, equal exactly when the STRUCTURE fields are (`columns`: LayoutArrays or a dict
    of the STRUCTURE columns; mixed radix over the columns' ranges, a column's distinct values instead where
    that would overflow)."""
    cols = [np.asarray(columns[name] if isinstance(columns, dict) else getattr(columns, name), dtype=np.int64)
            for name in STRUCTURE]
    radices = [int(c.max()) + 1 if len(c) else 1 for c in cols]
    if math.prod(radices) >= 1 << 62:
        cols = [np.unique(c, return_inverse=True)[1].reshape(-1) for c in cols]
        radices = [int(c.max()) + 1 if len(c) else 1 for c in cols]
    code = np.zeros(len(cols[0]), dtype=np.int64)
    for column, radix in zip(cols, radices):
        code = code * radix + column
    return code


def best_per_structure_desc(tokens: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The highest figure of each distinct code, best first."""
    if len(tokens) == 0:
        return np.zeros(0)
    uniq, inverse = np.unique(codes, return_inverse=True)
    best = np.full(len(uniq), -np.inf)
    np.maximum.at(best, inverse, tokens)
    return -np.sort(-best)


def rank_of(result: SearchResult, tokens_per_s_per_gpu: float) -> int:
    """1-based rank a layout with this predicted throughput would take among the fitting layouts."""
    return int(np.searchsorted(-result.fitting_tokens_desc, -tokens_per_s_per_gpu, side="left")) + 1


def structure_rank_of(result: SearchResult, tokens_per_s_per_gpu: float) -> int:
    """1-based rank among distinct structures (tp, cp, pp, vp, ep, etp, mbs), each at its best flags:
    1 + how many structures have a fitting variant predicted faster than this figure."""
    return int(np.searchsorted(-result.fitting_structures_desc, -tokens_per_s_per_gpu, side="left")) + 1


def no_fit_message(req: SearchRequest) -> str:
    """'nothing fits' with the smallest GPU count (powers of two and whole domains) where something does at this
    request's global batch, which the line names: the default --gbs scales with the GPU count (layout/recipes.py
    default_gbs), so a rerun on that count without --gbs would plan another batch than the one searched here."""
    from dataclasses import replace
    dom = int(req.fabric.domain_size)
    what = f"no layout of {req.model.name}" + (f" with {_pinned_text(req.pins)}" if req.pins else "")
    counts = sorted({2 ** k for k in range(1, 17)} | {dom * k for k in range(1, 257)})
    # counts whose HBM cannot hold the optimizer state are not tried (memory_floor.py): arithmetic, not layouts
    floor = min_gpus_for_optimizer_state(req.model, req.fabric.gpu, req.calibration, req.headroom_fraction,
                                         req.framework)
    if floor > counts[-1]:
        params = trained_params(req.model, req.framework)
        fillable = fillable_bytes_per_gpu(req.fabric.gpu, req.calibration, req.headroom_fraction)
        return (f"{what} fits in memory on {req.num_gpus} GPUs, nor on any count up to {counts[-1]:,}: its "
                f"{params:.3g} parameters' optimizer state alone ({OPTIMIZER_STATE_BYTES_PER_PARAM:g} B each: fp32 "
                f"master weights and two Adam moments) needs at least {floor:,} GPUs of "
                f"{fillable / 1e9:.1f} GB fillable HBM each ({req.fabric.gpu.name}, less the model's reserve and "
                f"{req.headroom_fraction * 100:g}% headroom)")
    for n in (c for c in counts if c > req.num_gpus and c >= floor):
        trial = replace(req, num_gpus=n, fabric=req.fabric.scaled(num_gpus=n), keep=1)
        try:
            arr, _, _ = candidates(trial)
            idx = np.arange(len(arr))
            if len(idx) == 0:
                continue
            bd = evaluate_layouts(trial.model, trial.fabric, arr.take(idx[:CHUNK * 4]), seq_len=req.seq_len,
                                  calibration=req.calibration, framework=req.framework, loss=req.loss)
        except CommbenchError:
            continue
        if np.any(bd.fits & (bd.mem_capacity_bytes * (1 - req.headroom_fraction) >= bd.mem_total_bytes)):
            return (f"{what} fits in memory on {req.num_gpus} GPUs with "
                    f"{req.headroom_fraction * 100:g}% HBM headroom; the smallest GPU count where one fits is {n} "
                    f"at gbs {req.gbs} (rerun with --gpus {n} --gbs {req.gbs})")
    # A partial --layout: the fields it fixes, not the model, are what fits nowhere; a full one is planned as given.
    free = ("; free some of --layout's fields, or give tp, pp, vp, ep and mbs to plan that one layout as given "
            "(with a WARNING that it does not fit)") if req.pins else ""
    return (f"{what} fits in memory on {req.num_gpus} GPUs with "
            f"{req.headroom_fraction * 100:g}% HBM headroom, nor on any count up to {counts[-1]} at gbs {req.gbs}{free}")


def _pinned_text(pins: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pins.items())


def structure_key(arr: LayoutArrays, i: int) -> tuple:
    return tuple(int(getattr(arr, k)[i]) for k in STRUCTURE + ("dp",))


def parse_pins(text: str | None) -> dict[str, object]:
    """--layout 'ep=32,pp=2' -> {'ep': 32, 'pp': 2}; keys and values as parse_layout takes them. A bad value is
    refused naming --layout and its key ('--layout tp='x' is invalid: ...')."""
    names = set(INT_FIELDS) | set(BOOL_FIELDS) | set(CODE_FIELDS) | set(COUNT_FIELDS) | {"cuda_graph_scope"}
    if text is not None:   # --layout '' searched every layout, as if no pin were given
        from commbench.errors import refuse_empty
        refuse_empty(text, "--layout", "key=value pins such as ep=32,pp=2, or leave --layout out")
    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, raw = part.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip().lower()
        if not sep or key not in names:
            raise invalid("--layout", part, f"key=value pairs with keys {', '.join(sorted(names))}")
        if key in out:  # tp=1,tp=2: which one was meant?
            raise invalid("--layout", text, f"each key once ({key} is given twice)")
        if key == "cuda_graph_scope":   # modules joined by '+' (layout/graph_scope.py)
            out[key] = scope_text(scope_mask(raw))
        elif key in COUNT_FIELDS:
            if not raw.isdecimal() or int(raw) > MAX_LAYOUT_INT:
                raise invalid(f"--layout {key}", raw, f"a non-negative integer up to {MAX_LAYOUT_INT:,}")
            out[key] = int(raw)
        elif key in INT_FIELDS:
            if not raw.isdecimal() or not 1 <= int(raw) <= MAX_LAYOUT_INT:
                raise invalid(f"--layout {key}", raw, f"a positive integer up to {MAX_LAYOUT_INT:,}")
            out[key] = int(raw)
        elif key in BOOL_FIELDS:
            if raw not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise invalid(f"--layout {key}", raw, "true/false (or on/off, 1/0)")
            out[key] = raw in ("1", "true", "on", "yes")
        else:
            if raw not in CODE_FIELDS[key]:
                raise invalid(f"--layout {key}", raw, f"one of {', '.join(CODE_FIELDS[key])}")
            out[key] = raw
    scope = out.get("cuda_graph_scope")
    if scope:   # what a per-layer graph captures: alone it was kept beside a searched cuda_graph=none/full, unused
        if out.setdefault("cuda_graph", "layer") != "layer":
            raise invalid("--layout cuda_graph_scope", scope, f"no scope with cuda_graph={out['cuda_graph']} (a capture "
                          "scope is the per-layer graph's: pin cuda_graph=layer, or leave the scope out)")
    if text is not None and not out:   # "," or " , ": no pin, searched as if --layout were left out
        raise invalid("--layout", text, "key=value pins such as ep=32,pp=2 (this holds none), or leave --layout out")
    return out


FULL_KEYS = ("tp", "pp", "vp", "ep", "mbs")


def with_full_graphs(req: SearchRequest, arr: LayoutArrays) -> tuple[LayoutArrays, StepBreakdown]:
    """Each layout with per-layer CUDA graphs or a full-iteration graph, whichever predicts faster
    while fitting the headroom (unless cuda_graph is pinned); re-sorted by throughput."""
    def score(bd):
        room = bd.mem_capacity_bytes * (1.0 - req.headroom_fraction) - bd.mem_total_bytes
        return np.where(bd.fits & bd.valid & (room >= 0), bd.tokens_per_s_per_gpu, -1.0)

    kw = dict(seq_len=req.seq_len, calibration=req.calibration, moe_imbalance=req.moe_imbalance,
              moe_capacity_factor=req.moe_capacity_factor, framework=req.framework, loss=req.loss)
    # what the release runs, less for a launch what its Megatron-LM takes in no spelling (SearchRequest.target)
    has = req.searched_features(release_features(req.software, req.gpu_name, req.precision, recipe_model(req.model),
                                                 req.model.is_moe))
    if "cuda_graph" not in req.pins and "full" in has["cuda_graph"]:
        full = LayoutArrays(**{**{f: getattr(arr, f) for f in arr.__dataclass_fields__},
                               "cuda_graph": np.full(len(arr), CODE_FIELDS["cuda_graph"].index("full"), dtype=np.int8)})
        # both in one call (the step model works row by row: a call's fixed cost, not its rows, dominates here)
        both = evaluate_layouts(req.model, req.fabric, LayoutArrays(**{
            f: np.concatenate([getattr(arr, f), getattr(full, f)]) for f in arr.__dataclass_fields__}), **kw)
        bd, bd_full = both.take(slice(0, len(arr))), both.take(slice(len(arr), None))
        # megatron-core refuses the full-iteration (local) graph with the EP all-to-all overlap.
        # No recipe runs activation offloading under a CUDA graph: offloading rows stay eager.
        allowed = graphs_allowed(req.framework, arr.pp, arr.ep, req.model.is_moe, arr.fsdp)   # Megatron-FSDP: none
        better = ((score(bd_full) > score(bd)) & ~arr.moe_a2a_overlap & allowed & (arr.cpu_offload_layers == 0))
        if req.framework == "megatron" and req.target == "launch":   # 25.11: no graph with full recompute
            better &= ~graph_recompute_refused(req.model, req.software, full.cuda_graph, full.cuda_graph_scope,
                                               full.recompute)[0]
        arr = LayoutArrays(**{f: np.where(better, getattr(full, f), getattr(arr, f)) for f in arr.__dataclass_fields__})
        bd = bd.where(better, bd_full)   # each row's own evaluation (the step model works row by row)
    else:
        bd = evaluate_layouts(req.model, req.fabric, arr, **kw)
    order = np.argsort(-np.where(score(bd) > 0, bd.tokens_per_s_per_gpu, -1.0), kind="stable")
    return arr.take(order), bd.take(order)


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
                                 framework=req.framework, loss=req.loss)


def is_complete(pins: dict[str, object]) -> bool:
    """True when --layout names tp, pp, vp, ep and mbs: `commbench plan` then evaluates that one
    layout as given (cp and flags at their defaults) instead of searching the rest."""
    return all(k in pins for k in FULL_KEYS)


__all__ = ["SearchRequest", "SearchResult", "search", "candidates", "best_for_pins", "pareto_front", "parse_pins",
           "structure_key", "is_complete", "no_fit_message", "rank_of", "structure_rank_of"]
