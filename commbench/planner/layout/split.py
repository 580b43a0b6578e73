"""Pipeline layer split: what each of the PP x VP virtual stages holds, in a form Megatron-LM builds.

Megatron-Core (megatron/core/transformer/transformer_block.py `get_num_layers_to_build`,
transformer_layer.py `get_transformer_layer_offset`, transformer_config.py `__post_init__`,
pipeline_parallel_layer_layout.py; megatron-core 0.16) builds a split in one of four ways:
- even (no flag): num_layers % (pp*vp) == 0;
- `--account-for-embedding-in-pipeline-split` / `--account-for-loss-in-pipeline-split`: the embedding
  and/or the loss count as one layer each, (num_layers + e + l) % (pp*vp) == 0, and the first (last)
  virtual stage builds one decoder layer fewer;
- `--decoder-first-pipeline-num-layers F` / `--decoder-last-pipeline-num-layers La` (not with the
  account flags): F and La multiples of vp, the remaining layers divisible over the middle ranks and
  each middle rank's share by vp;
- `--pipeline-model-parallel-layout`: every stage spelled out, `E` embedding, `t` decoder, `m` MTP,
  `L` loss, stages split by `|` (e.g. "Et|(tt|)*30mL", Megatron-Bridge's DeepSeek-V3 recipes); all MTP
  layers in one stage, after every decoder, in the last virtual stage of its rank.
Without a layout the MTP layers run on the last stage (post-process of the last pipeline rank).
Stages are in Megatron's order: virtual stage s is model chunk s // pp of pipeline rank s % pp.
Hybrid models (Mamba/attention/MLP/MoE pattern) split as megatron-core 0.16.1's MambaStack builds
them: even or first/last-stage counts, vp = 1; each layer costs its own kind (StageWeights.layer_costs). At a release
whose MambaStack ignores the first/last counts (ModelSpec.hybrid_uneven_split False: release_flags.release_model),
even only. From 26.04 (ModelSpec.hybrid_pipe_segments) the pattern cut by '|' into pp x vp segments builds virtual
stages too, any split of at least one layer per segment (PipelineSplit.segmented_pattern writes it).
The first/last-stage counts searched are every pair TransformerConfig accepts (uneven_pairs), weighed at once
(_uneven: one prefix sum over the layers' costs, vectorised over the pairs).

Cost, in mean-decoder-layer units (FLOPs per token, models.flops_breakdown): decoder 1; loss = the
output layer's logits FLOPs; an MTP layer = its layer + projection + logits FLOPs; embedding 0 (a
lookup, no GEMM). The busiest pipeline rank (the sum of its virtual stages) sets the pace of the
schedule: `stage_imbalance` = its cost / the mean rank's, what the step model charges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from commbench.row_groups import RowGroups

from commbench.errors import CommbenchError
from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.counts import flops_breakdown, step_vocab

METHODS = ("single", "even", "account", "uneven", "layout")  # also the order of preference on ties
STAGE_CHARS = "EtmL"
_RUN = re.compile(r"(.)\1*")


@dataclass(frozen=True, kw_only=True)
class PipelineSplit:
    """One buildable split: `stages[s]` is the content of virtual stage s, e.g. "Ett", "tt", "tmL"."""

    pp: int
    vp: int
    method: str
    stages: tuple[str, ...]
    account_for_embedding: bool = False
    account_for_loss: bool = False
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"split method {self.method!r}: one of {', '.join(METHODS)}")
        if len(self.stages) != self.pp * self.vp:
            raise ValueError(f"split has {len(self.stages)} stages, pp*vp = {self.pp * self.vp}")
        if any(c not in STAGE_CHARS for s in self.stages for c in s):
            raise ValueError(f"split stages use only {STAGE_CHARS}: {self.stages}")

    def decoder_layers(self) -> list[int]:
        """Decoder layers per virtual stage, in stage order."""
        return [s.count("t") for s in self.stages]

    def rank_stages(self, rank: int) -> list[str]:
        return [self.stages[v * self.pp + rank] for v in range(self.vp)]

    @property
    def layout(self) -> str:
        """Megatron's --pipeline-model-parallel-layout string for this split (runs compressed)."""
        texts = [_stage_text(s) for s in self.stages]
        parts, i = [], 0
        while i < len(texts):
            j = i
            while j + 1 < len(texts) and texts[j + 1] == texts[i]:
                j += 1
            count = j - i + 1
            last = j == len(texts) - 1
            repeat = count - 1 if last else count
            if repeat > 1:
                parts.append(f"({texts[i]}|)*{repeat}")
            elif repeat == 1:
                parts.append(texts[i] + "|")
            if last:
                parts.append(texts[i])
            i = j + 1
        return "".join(parts)

    def segmented_pattern(self, layer_pattern: str) -> str:
        """A hybrid layer pattern cut by '|' into this split's virtual stages, in stage order (Megatron-LM 26.04 on:
        release_flags.HYBRID_PIPE_SEGMENTS_CORE), e.g. "M-M*-M-|M-M*-M-" for pp=2 vp=1."""
        cuts, first = [], 0
        for n in self.decoder_layers():
            cuts.append(layer_pattern[first:first + n])
            first += n
        return "|".join(cuts)

    def megatron_args(self) -> list[str]:
        """The Megatron-LM flags that build exactly this split (with --pipeline-model-parallel-size)."""
        if self.method == "layout":
            return ["--pipeline-model-parallel-layout", self.layout]
        out = ["--num-virtual-stages-per-pipeline-rank", str(self.vp)] if self.vp > 1 else []
        if self.account_for_embedding:
            out.append("--account-for-embedding-in-pipeline-split")
        if self.account_for_loss:
            out.append("--account-for-loss-in-pipeline-split")
        if self.first_stage_layers is not None:
            out += ["--decoder-first-pipeline-num-layers", str(self.first_stage_layers)]
        if self.last_stage_layers is not None:
            out += ["--decoder-last-pipeline-num-layers", str(self.last_stage_layers)]
        return out

    def rank_costs(self, weights: "StageWeights") -> list[float]:
        costs = weights.stage_costs(self.stages)
        return [sum(costs[v * self.pp + r] for v in range(self.vp)) for r in range(self.pp)]

    def summary(self, weights: "StageWeights", hybrid_pattern: str | None = None) -> dict:
        """`hybrid_pattern`: the '|'-segmented pattern the launch writes instead of split flags (pipe_pattern)."""
        costs = self.rank_costs(weights)
        flags = ["--hybrid-override-pattern", hybrid_pattern] if hybrid_pattern else self.megatron_args()
        return {"method": self.method, "pp": self.pp, "vp": self.vp, "layout": self.layout,
                "decoder_layers_per_stage": self.decoder_layers(), "megatron_args": flags,
                "rank_cost_layers": [round(c, 3) for c in costs],
                "imbalance": round(max(costs) * self.pp / sum(costs), 4)}


def pipe_pattern(model: ModelSpec, split: PipelineSplit) -> str | None:
    """The hybrid pattern cut by '|' into `split`'s virtual stages, which a Megatron-LM launch of a release that takes
    it (ModelSpec.hybrid_pipe_segments) writes instead of split flags when pp > 1; None where it writes the flags."""
    if model.is_hybrid and model.hybrid_pipe_segments and split.pp > 1:
        return split.segmented_pattern(model.layer_pattern)
    return None


def _stage_text(stage: str) -> str:
    return "".join(m.group(1) + (f"*{len(m.group(0))}" if len(m.group(0)) > 2 else m.group(0)[1:])
                   for m in _RUN.finditer(stage))


@dataclass(frozen=True, kw_only=True)
class StageWeights:
    """Cost of each stage item in mean-decoder-layer units (FLOPs per token)."""

    embedding: float
    decoder: float
    mtp: float
    loss: float
    # Hybrid models: the cost of each decoder layer in order (its pattern character's kind); the
    # virtual stages take the layers in stage order, as MambaStack slices its pattern.
    layer_costs: tuple[float, ...] = ()

    def of(self, stage: str) -> float:
        return (self.embedding * stage.count("E") + self.decoder * stage.count("t")
                + self.mtp * stage.count("m") + self.loss * stage.count("L"))

    def stage_costs(self, stages: tuple[str, ...]) -> list[float]:
        if not self.layer_costs:
            return [self.of(x) for x in stages]
        out, first = [], 0
        for x in stages:
            n = x.count("t")
            out.append(self.of(x) - self.decoder * n + sum(self.layer_costs[first:first + n]))
            first += n
        return out


def split_vocab(model: ModelSpec, tp: int = 1, framework: str = "megatron") -> float:
    """The output layer's rows the step model charges at this TP (models/counts.step_vocab: Megatron-LM's padded
    vocabulary, TorchTitan's own): the loss stage is weighed with the same rows."""
    return float(step_vocab(model, int(tp), framework))


@lru_cache(maxsize=256)
def stage_weights(model: ModelSpec, vocab: float | None = None) -> StageWeights:
    """Each stage item's FLOPs per token in mean-decoder-layer units; the loss (logits: 6 x hidden x vocab) and MTP
    heads at `vocab` output rows (split_vocab: what the step model charges; default the model's own)."""
    vocab = float(model.vocab if vocab is None else vocab)
    main = flops_breakdown(model, include_mtp=False, vocab=vocab)
    logits = 6.0 * model.hidden * vocab
    per_layer = (main.total - logits) / model.num_layers
    mtp_total = flops_breakdown(model, vocab=vocab).total - main.total
    layer_costs: tuple[float, ...] = ()
    if model.is_hybrid:  # one block's FLOPs per token by kind (the layer's own, not Megatron's count)
        n = {k: max(model.layer_pattern.count(k), 1) for k in "M*-E"}
        kind = {"M": main.mamba / n["M"], "*": (main.attention_proj + main.attention_core) / n["*"],
                "-": main.dense_mlp / n["-"],
                "E": (main.routed_experts + main.shared_experts + main.moe_latent_proj) / n["E"]}
        per_layer = sum(kind[c] for c in model.layer_pattern) / model.num_layers
        layer_costs = tuple(kind[c] / per_layer for c in model.layer_pattern)
    elif model.linear_attention_freq:  # Gated DeltaNet layers, full attention every N-th (models/gdn.py)
        mlp = (main.dense_mlp + main.routed_experts + main.shared_experts + main.moe_latent_proj) / model.num_layers
        full = (main.attention_proj + main.attention_core) / max(model.num_attention_layers, 1)
        linear = main.linear_attention / max(model.num_linear_attention_layers, 1)
        costs = [(full if (i + 1) % model.linear_attention_freq == 0 else linear) + mlp for i in range(model.num_layers)]
        per_layer = sum(costs) / model.num_layers
        layer_costs = tuple(c / per_layer for c in costs)
    mtp = mtp_total / model.num_mtp_layers / per_layer if model.num_mtp_layers else 0.0
    return StageWeights(embedding=0.0, decoder=1.0, mtp=mtp, loss=logits / per_layer, layer_costs=layer_costs)


def _with_ends(counts: list[int], mtp: int, mtp_stage: int | None = None) -> tuple[str, ...]:
    stages = ["t" * n for n in counts]
    stages[0] = "E" + stages[0]
    where = len(stages) - 1 if mtp_stage is None else mtp_stage
    stages[where] += "m" * mtp
    stages[-1] += "L"
    return tuple(stages)


def _even_like(model: ModelSpec, pp: int, vp: int) -> list[PipelineSplit]:
    L, S, M = model.num_layers, pp * vp, model.num_mtp_layers
    out = []
    for emb, loss in ((False, False), (True, False), (False, True), (True, True)):
        slots = L + emb + loss
        if slots % S:
            continue
        counts = [slots // S] * S
        counts[0] -= emb
        counts[-1] -= loss
        out.append(PipelineSplit(pp=pp, vp=vp, method="account" if emb or loss else "even",
                                 stages=_with_ends(counts, M), account_for_embedding=emb, account_for_loss=loss))
    return out


@lru_cache(maxsize=1024)
def uneven_pairs(num_layers: int, pp: int, vp: int) -> tuple[tuple[int | None, int | None], ...]:
    """Every (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers) pair megatron-core 0.16.1
    accepts for `num_layers` over pp x vp, None for a flag left unset (not both): TransformerConfig.__post_init__
    ("Uneven PP": each set count > 0 and a multiple of vp; the middle ranks' layers, num_layers less the set counts,
    non-zero exactly when there are middle ranks, divisible over them, each rank's share a multiple of vp). The GPT
    path (transformer_block.get_num_layers_to_build) and MambaStack (ssm/mamba_block.py
    _select_layers_for_pipeline_parallel, vp = 1) build from the same counts: first, then equal middle ranks, then
    last (e.g. 52 layers over pp=8: 5 + 6 x 7 + 5)."""
    first, last = uneven_pair_arrays(num_layers, pp, vp)
    return tuple((f or None, la or None) for f, la in zip(first.tolist(), last.tolist()))


@lru_cache(maxsize=1024)
def uneven_pair_arrays(num_layers: int, pp: int, vp: int) -> tuple[np.ndarray, np.ndarray]:
    """uneven_pairs as two arrays, 0 for a flag left unset, in its order (first's, then last's count ascending):
    computed at once over the grid of counts, not pair by pair (quadratic in the layers either way; 1,024 layers
    took seconds per (pp, vp) in a Python loop)."""
    ends = np.arange(0, num_layers + 1, vp, dtype=np.int64)   # 0: unset; a set count is a multiple of vp, >= vp
    first, last = (grid.ravel() for grid in np.meshgrid(ends, ends, indexing="ij"))
    middle = pp - (first > 0).astype(np.int64) - (last > 0).astype(np.int64)
    rest = num_layers - first - last
    per_middle = np.maximum(middle, 1)
    ok = ((first > 0) | (last > 0)) & (middle >= 0) & (rest >= 0) & ((rest > 0) == (middle > 0))
    ok &= (middle == 0) | ((rest % per_middle == 0) & ((rest // per_middle) % vp == 0))
    first, last = first[ok], last[ok]
    first.flags.writeable = last.flags.writeable = False   # cached: shared by every caller
    return first, last


def _uneven(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> list[PipelineSplit]:
    """The uneven split (uneven_pairs) whose busiest rank, then busiest stage, is lightest: every pair Megatron
    accepts is weighed (vectorised over the pairs; best_split weighs only the winner again, so it needs no other)."""
    L, M, S = model.num_layers, model.num_mtp_layers, pp * vp
    firsts, lasts = uneven_pair_arrays(L, pp, vp)
    if not len(firsts):
        return []
    w = stage_weights(model, vocab)
    middle = pp - (firsts > 0).astype(np.int64) - (lasts > 0).astype(np.int64)
    share = np.where(middle > 0, (L - firsts - lasts) // np.maximum(middle, 1), 0)
    per_rank = np.repeat(share[:, None], pp, axis=1)
    per_rank[:, 0] = np.where(firsts > 0, firsts, per_rank[:, 0])
    per_rank[:, -1] = np.where(lasts > 0, lasts, per_rank[:, -1])
    counts = np.tile(per_rank // vp, (1, vp))                  # virtual stage s = chunk s // pp of rank s % pp
    layer = np.asarray(w.layer_costs if w.layer_costs else np.full(L, w.decoder), dtype=np.float64)
    prefix = np.concatenate([[0.0], np.cumsum(layer)])
    ends = np.cumsum(counts, axis=1)
    stage = prefix[ends] - prefix[ends - counts]
    stage[:, 0] += w.embedding
    stage[:, -1] += M * w.mtp + w.loss
    rank = stage.reshape(len(firsts), vp, pp).sum(axis=1)
    key = np.lexsort((np.round((rank * rank).sum(axis=1), 6), np.round(stage.max(axis=1), 6),
                      np.round(rank.max(axis=1), 6)))
    first, last = int(firsts[int(key[0])]) or None, int(lasts[int(key[0])]) or None
    return [PipelineSplit(pp=pp, vp=vp, method="uneven", stages=_with_ends(list(counts[int(key[0])]), M),
                          first_stage_layers=first, last_stage_layers=last)]


def _water_fill(extras: list[float], allowed: list[bool], layers: int) -> list[int] | None:
    """Decoder counts per stage minimising the busiest stage (cost extras[s] + count)."""
    if not any(allowed):
        return None if layers else [0] * len(extras)
    candidates = sorted({k + e for e in set(x for x, ok in zip(extras, allowed) if ok) for k in range(layers + 1)})

    def counts_at(t: float) -> list[int]:
        return [max(0, int(np.floor(t - e + 1e-9))) if ok else 0 for e, ok in zip(extras, allowed)]

    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if sum(counts_at(candidates[mid])) >= layers else (mid + 1, hi)
    counts = counts_at(candidates[lo])
    surplus = sum(counts) - layers
    for s in sorted(range(len(counts)), key=lambda s: -(extras[s] + counts[s])):
        if surplus <= 0:
            break
        if counts[s] > 0:
            counts[s] -= 1
            surplus -= 1
    return counts


def _custom_layouts(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> list[PipelineSplit]:
    L, M, S = model.num_layers, model.num_mtp_layers, pp * vp
    w = stage_weights(model, vocab)
    out = []
    tail_options = [(S - 1, [True] * S)]
    if M and S >= 2 and pp >= 2:  # MTP alone-ish on the last chunk of rank pp-2, loss alone on the last stage
        tail_options.append((S - 2, [True] * (S - 1) + [False]))
    for mtp_stage, allowed in tail_options:
        extras = [0.0] * S
        extras[0] += w.embedding
        extras[mtp_stage] += M * w.mtp
        extras[-1] += w.loss
        if mtp_stage != S - 1:
            allowed = [ok and s <= mtp_stage for s, ok in enumerate(allowed)]
        counts = _water_fill(extras, allowed, L)
        if counts is None:
            continue
        split = PipelineSplit(pp=pp, vp=vp, method="layout", stages=_with_ends(counts, M, mtp_stage))
        if all(split.stages):
            out.append(split)
    return out


_GROUP = re.compile(r"\(([^()]+)\)\*(\d+)")
_REPEAT = re.compile(r"(.)\*(\d+)")


def parse_layout_text(text: str) -> tuple[str, ...]:
    """Stages of a Megatron --pipeline-model-parallel-layout string: commas are cosmetic, `(...)*n`
    and `x*n` repeat, `|` separates stages ("Et|(tt|)*2L" -> ("Et", "tt", "tt", "L"))."""
    flat = text.replace(",", "").replace(" ", "")
    flat = _GROUP.sub(lambda m: m.group(1) * int(m.group(2)), flat)
    flat = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), flat)
    bad = sorted(set(flat) - set(STAGE_CHARS) - {"|"})
    if bad:
        raise CommbenchError(f"pipeline layout {text!r}: unknown layer character {bad[0]!r} "
                             f"(E embedding, t decoder, m MTP, L loss, | between stages)")
    return tuple(flat.split("|"))


def split_from_layout(model: ModelSpec, pp: int, text: str) -> PipelineSplit:
    """A user's --pipeline-model-parallel-layout, checked as Megatron's PipelineParallelLayerLayout
    validates it (one-line CommbenchError naming what is wrong)."""
    stages = parse_layout_text(text)
    flat = "".join(stages)

    def refuse(why: str) -> CommbenchError:
        return CommbenchError(f"pipeline layout {text!r} for {model.name} "
                              f"({model.num_layers} layers, {model.num_mtp_layers} MTP, pp={pp}): {why}")

    if len(stages) % pp:
        raise refuse(f"{len(stages)} stages are not a multiple of pp")
    vp = len(stages) // pp
    if not flat.startswith("E") or flat.count("E") != 1:
        raise refuse("the embedding E must come first, once")
    if not flat.endswith("L") or flat.count("L") != 1:
        raise refuse("the loss L must come last, once")
    if flat.count("t") != model.num_layers or flat.count("m") != model.num_mtp_layers:
        raise refuse(f"it holds {flat.count('t')} decoder and {flat.count('m')} MTP layers")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise refuse("decoder layers must come before the MTP layers")
    mtp_stages = [i for i, s in enumerate(stages) if "m" in s]
    if len(mtp_stages) > 1 or (mtp_stages and mtp_stages[0] // pp != vp - 1):
        raise refuse("all MTP layers must sit in one stage, the last virtual stage of its rank")
    return PipelineSplit(pp=pp, vp=vp, method="layout", stages=stages)


def split_options(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> list[PipelineSplit]:
    """Every split of `model` over pp x vp that Megatron builds (each virtual stage non-empty); `vocab`: the
    output rows the layout-string splits are balanced with (stage_weights)."""
    if pp < 1 or vp < 1 or (pp == 1 and vp > 1):
        return []
    if pp == 1:
        return [PipelineSplit(pp=1, vp=1, method="single",
                              stages=("E" + "t" * model.num_layers + "m" * model.num_mtp_layers + "L",))]
    if model.is_hybrid:
        # MambaStack (megatron-core 0.16 ssm/mamba_block.py) slices its pattern num_layers // pp per
        # rank, or first/last-stage counts with even middle ranks; no interleaving, no layout string.
        # A release whose MambaStack takes num_layers // pp per rank whatever the flags say (hybrid_uneven_split
        # False: release_flags.release_model) builds the even split only. From megatron-core 0.17 on
        # (hybrid_pipe_segments) the pattern cut by '|' builds any split into pp x vp segments of at least one layer
        # (segment s is virtual stage s: hybrid_layer_allocation.select_pipeline_segment), so virtual stages too,
        # with the balanced split (_custom_layouts, its MTP on the last stage, where the hybrid model builds it).
        if vp > 1 and not model.hybrid_pipe_segments:
            return []
        found = [s for s in _even_like(model, pp, vp) if s.method == "even"] + \
            (_uneven(model, pp, vp, vocab) if model.hybrid_uneven_split else [])
        if model.hybrid_pipe_segments and vp > 1:
            found += [s for s in _custom_layouts(model, pp, vp, vocab) if "m" not in "".join(s.stages[:-1])]
        return [s for s in found if all("t" in x for x in s.stages)]
    else:
        found = _even_like(model, pp, vp) + _uneven(model, pp, vp, vocab) + _custom_layouts(model, pp, vp, vocab)
    return [s for s in found if all(s.stages)]


@lru_cache(maxsize=4096)
def best_split(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> PipelineSplit | None:
    """The buildable split whose busiest rank is lightest (then busiest stage; then the evenest ranks, least sum of
    squared rank costs; then simplest flags), its loss
    stage weighed at `vocab` output rows (split_vocab; default the model's own). A model whose pinned_split (a measured
    run's: calibrate rows) has pp x vp stages gets that split, as it ran."""
    pinned = _pinned(model, pp, vp)
    if pinned is not None:
        return pinned
    w = stage_weights(model, vocab)

    def key(s: PipelineSplit):
        ranks = s.rank_costs(w)
        return (round(max(ranks), 6), round(max(w.stage_costs(s.stages)), 6), round(sum(c * c for c in ranks), 6),
                METHODS.index(s.method))

    options = split_options(model, pp, vp, vocab)
    return min(options, key=key) if options else None


def _pinned(model: ModelSpec, pp: int, vp: int) -> PipelineSplit | None:
    """model.pinned_split at pp x vp (pp > 1; its stages pp * vp), or None."""
    if not model.pinned_split or pp < 2:
        return None
    stages = parse_layout_text(model.pinned_split)
    return PipelineSplit(pp=pp, vp=vp, method="layout", stages=stages) if len(stages) == pp * vp else None


def choose_split(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> PipelineSplit:
    """`best_split`, or a one-line CommbenchError naming the layer count and PP when there is none."""
    split = best_split(model, pp, vp, vocab)
    if split is None:
        mtp = f" + {model.num_mtp_layers} MTP" if model.num_mtp_layers else ""
        why = "vp>1 needs pp>1" if pp == 1 and vp > 1 else \
            ("hybrid models: this release's Megatron-LM builds no virtual pipeline stages for a hybrid stack "
             "(its MambaStack asserts none; megatron-core 0.17 on, release 26.04 and newer, builds them from a "
             "'|'-segmented pattern), vp must be 1") \
            if model.is_hybrid and vp > 1 and not model.hybrid_pipe_segments else \
            (f"a hybrid stack's {pp * vp} '|' segments each need a layer of the {model.num_layers}") \
            if model.is_hybrid and vp > 1 else \
            (f"this release's Megatron-LM builds a hybrid stack only evenly, num_layers // pp layers per rank, and "
             f"{model.num_layers} layers do not divide by {pp}: release_flags.HYBRID_EVEN_SPLIT_ONLY") \
            if model.is_hybrid and not model.hybrid_uneven_split else \
            (f"Megatron's MambaStack gives each of the {pp} pipeline ranks at least one of the {model.num_layers} "
             "layers: an even split, or --decoder-first/last-pipeline-num-layers > 0 with the middle ranks' share "
             "non-zero, megatron-core 0.16.1 ssm/mamba_block.py and TransformerConfig") if model.is_hybrid else \
            f"{pp * vp} virtual stages cannot each hold a layer, the embedding, the MTP or the loss"
        raise CommbenchError(f"{model.name}: no pipeline split of {model.num_layers} layers{mtp} over "
                             f"pp={pp} x vp={vp} that Megatron builds ({why})")
    return split


def buildable(model: ModelSpec, pp: np.ndarray, vp: np.ndarray) -> np.ndarray:
    """Per layout: True where `best_split` finds a split (computed once per group of equal (pp, vp))."""
    groups = RowGroups(np.asarray(pp, dtype=np.int64), np.asarray(vp, dtype=np.int64))
    ok = [best_split(model, p, v) is not None for p, v in zip(groups.of(pp).tolist(), groups.of(vp).tolist())]
    return groups.expand(np.array(ok, dtype=bool))


def most_chunk_layers(model: ModelSpec, pp: np.ndarray, vp: np.ndarray) -> np.ndarray:
    """Per layout: the most decoder layers one virtual stage (model chunk) of `best_split` holds, the upper end of
    megatron-core's block recompute count (TransformerConfig.recompute_num_layers: "between 1 and
    num_layers_per_pipeline_rank"; TransformerBlock recomputes the first N layers of each chunk); the model's layers
    where no split is buildable (rule pipeline marks those). Computed once per group of equal (pp, vp)."""
    groups = RowGroups(np.asarray(pp, dtype=np.int64), np.asarray(vp, dtype=np.int64))
    most = []
    for p, v in zip(groups.of(pp).tolist(), groups.of(vp).tolist()):
        split = best_split(model, p, v)
        most.append(max(split.decoder_layers()) if split is not None else model.num_layers)
    return groups.expand(np.array(most, dtype=np.int64))


def stage_imbalance(model: ModelSpec, pp: np.ndarray, vp: np.ndarray, vocab=None) -> np.ndarray:
    """Busiest pipeline rank's cost / the mean rank's under `best_split` (1.0 without PP or without a
    buildable split, which layout_violations marks invalid). `vocab`: per layout, the output rows the step model
    charges (split_vocab / models.counts.step_vocab, an array like pp); default the model's own. Computed once per
    group of equal (pp, vp, vocab) (commbench.row_groups)."""
    return _per_stage_group(_imbalance, model, pp, vp, vocab)


def loss_stage_share(model: ModelSpec, pp: np.ndarray, vp: np.ndarray, vocab=None) -> np.ndarray:
    """The loss's pipeline rank's cost (the last: its last virtual stage holds the loss, _with_ends) / the mean rank's
    under `best_split`, as stage_imbalance (<= it; 1.0 without PP or without a buildable split)."""
    return _per_stage_group(_loss_share, model, pp, vp, vocab)


def _per_stage_group(per_split, model: ModelSpec, pp, vp, vocab) -> np.ndarray:
    """per_split(model, pp, vp, vocab) once per group of equal (pp, vp, vocab) rows, expanded back to the rows."""
    pp, vp = np.asarray(pp, dtype=np.int64), np.asarray(vp, dtype=np.int64)
    columns = (pp, vp) if vocab is None else (pp, vp, np.asarray(vocab, dtype=np.float64))
    groups = RowGroups(*columns)
    rows = zip(groups.of(pp).tolist(), groups.of(vp).tolist(),
               [None] * len(groups) if vocab is None else groups.of(columns[2]).tolist())
    return groups.expand(np.array([per_split(model, p, v, n) for p, v, n in rows], dtype=np.float64))


@lru_cache(maxsize=4096)
def _loss_share(model: ModelSpec, pp: int, vp: int, vocab: float | None) -> float:
    split = best_split(model, pp, vp, vocab)
    costs = split.rank_costs(stage_weights(model, vocab)) if split is not None else [1.0]
    return costs[-1] * len(costs) / sum(costs)


@lru_cache(maxsize=4096)
def _imbalance(model: ModelSpec, pp: int, vp: int, vocab: float | None) -> float:
    """stage_imbalance of one (pp, vp, vocab), once per search rather than once per evaluated chunk."""
    split = best_split(model, pp, vp, vocab)
    costs = split.rank_costs(stage_weights(model, vocab)) if split is not None else [1.0]
    return max(costs) * len(costs) / sum(costs)
