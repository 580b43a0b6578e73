"""What each pipeline rank holds, for the memory of the busiest one (the one that runs out first).

A rank's weights, gradients and optimizer state are those of the layers its virtual stages build (the split
Megatron builds: layout/split.py best_split), and of the vocabulary-sized matrices on it: the embedding on the
first stage, the output layer on the loss stage (a copy of the embedding when it is tied and pp > 1, whose
gradients are all-reduced with the first stage's), and an embedding copy on an MTP stage without the embedding
(megatron-core 0.16.1 models/gpt/gpt_model.py: `if self.pre_process or self.mtp_process: self.embedding = ...`;
language_module.py setup_embeddings_and_output_layer: "we also need to maintain duplicated embedding weights in
mtp process stage"). Its activations are those of its own blocks (dense layers first, the hybrid pattern, the
Gated DeltaNet / full attention order, MTP on the stage that holds it) for the micro-batches it keeps in flight:
1F1B's rank r holds pp - r; interleaved 1F1B's holds (pp - r - 1) x 2 + (vp - 1) x pp + 1 model-chunk
micro-batches (megatron-core pipeline_parallel/schedules.py get_pp_rank_microbatches: num_warmup_microbatches,
plus the one in its steady state); the loss stage also holds the logits.

Ranks with the same contents differ only in micro-batches in flight, which fall with the rank, so the lowest rank
of each distinct content is the only candidate for the largest memory (`candidate_ranks`); memory.py charges the
largest of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from commbench.row_groups import RowGroups

from commbench.planner.layout.split import best_split
from commbench.planner.models.counts import param_counts, step_vocab
from commbench.planner.models.spec import ModelSpec
from commbench.planner.step.mamba import BlockCounts


@dataclass(frozen=True)
class RankLoad:
    """One pipeline rank's share of the model (parameters without the vocabulary matrices, those counted apart)."""

    rank: int
    vocab_matrices: int        # embedding / output-layer copies of vocab x hidden on this rank
    non_expert_params: float   # sharded over TP, replicated over DP x CP
    expert_params: float       # routed experts, sharded over EP x ETP
    counts: BlockCounts        # blocks by kind (activations)
    chunks_in_flight: int      # model-chunk micro-batches kept for backward (vp chunks make one micro-batch)
    loss: bool                 # holds the output layer and the logits
    mtp_layers: int = 0        # MTP layers it builds (their non-unit parts under Megatron-FSDP: step/fsdp.py)


def _layer_kinds(model: ModelSpec) -> list[dict[str, int]]:
    """Each decoder layer's blocks by kind, in order."""
    out = []
    for i in range(model.num_layers):
        if model.is_hybrid:
            c = model.layer_pattern[i]
            out.append({"mamba": int(c == "M"), "attention": int(c == "*"), "dense": int(c == "-"),
                        "moe": int(c == "E"), "linear": 0})
            continue
        linear = bool(model.linear_attention_freq) and (i + 1) % model.linear_attention_freq != 0
        moe = model.is_moe and i >= model.num_dense_layers
        out.append({"mamba": 0, "attention": int(not linear), "linear": int(linear), "dense": int(not moe),
                    "moe": int(moe)})
    return out


def _per_kind_params(model: ModelSpec, kinds: list[dict[str, int]]) -> tuple[dict[str, float], float, float,
                                                                              tuple[float, float]]:
    """(non-expert parameters per block of each kind, per-layer shared parameters (norms, hyper-connections),
    routed-expert parameters per MoE layer, all MTP layers' (non-expert, expert) parameters) from param_counts
    without the vocabulary matrices; `kinds`: _layer_kinds."""
    pc = param_counts(model, vocab=0)
    n = {name: max(sum(k[name] for k in kinds), 1) for name in kinds[0]} if kinds else {}
    per_kind = {
        "attention": pc.attention / n["attention"],
        "linear": pc.linear_attention / n["linear"],
        "mamba": pc.mamba / n["mamba"],
        "dense": pc.dense_mlp / n["dense"],
        "moe": (pc.shared_experts + pc.router + pc.moe_latent_proj) / n["moe"],
    }
    per_layer = (pc.norms + pc.hyper_connections) / model.num_layers
    return per_kind, per_layer, pc.routed_experts / n["moe"], (pc.mtp - pc.mtp_routed_experts, pc.mtp_routed_experts)


@lru_cache(maxsize=1024)
def rank_loads(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> tuple[RankLoad, ...]:
    """Every pipeline rank's load under `best_split(model, pp, vp, vocab)` (pp = 1, or no buildable split: the whole
    model on one rank, which layout_violations marks invalid where it is not)."""
    split = best_split(model, pp, vp, vocab) if pp > 1 else None
    stages = split.stages if split is not None else ("E" + "t" * model.num_layers + "m" * model.num_mtp_layers + "L",)
    pp_eff = split.pp if split is not None else 1
    vp_eff = split.vp if split is not None else 1
    kinds = _layer_kinds(model)
    per_kind, per_layer, expert_per_moe, (mtp_dense, mtp_expert) = _per_kind_params(model, kinds)
    mtp_total = max(model.num_mtp_layers, 1)
    mtp_kind = {"attention": 1, "mamba": 0, "linear": 0, "dense": int(not model.is_moe), "moe": int(model.is_moe)}
    tied_single = model.tied_embeddings and pp_eff == 1
    layer = 0
    ranks: list[dict] = [{"E": 0, "L": 0, "m": 0, "dense": 0.0, "expert": 0.0,
                          "kinds": dict.fromkeys(("attention", "mamba", "dense", "moe", "linear"), 0), "layers": 0}
                         for _ in range(pp_eff)]
    for s, text in enumerate(stages):
        r = ranks[s % pp_eff]
        for ch in text:
            if ch in "EL":
                r[ch] += 1
            elif ch == "t":
                k = kinds[layer]
                layer += 1
                r["layers"] += 1
                r["dense"] += per_layer + sum(per_kind[name] * n for name, n in k.items())
                r["expert"] += expert_per_moe * k["moe"]
                for name, n in k.items():
                    r["kinds"][name] += n
            elif ch == "m":
                r["m"] += 1
                r["layers"] += 1
                r["dense"] += mtp_dense / mtp_total
                r["expert"] += mtp_expert / mtp_total
                for name, n in mtp_kind.items():
                    r["kinds"][name] += n
    return tuple(_rank_load(rank, r, pp_eff, vp_eff, tied_single) for rank, r in enumerate(ranks))


def _rank_load(rank: int, r: dict, pp: int, vp: int, tied_single: bool) -> RankLoad:
    vocab_matrices = r["E"] + (r["L"] if not tied_single else 0) + (1 if r["m"] and not r["E"] else 0)
    k = r["kinds"]
    counts = BlockCounts(attention=k["attention"], mamba=k["mamba"], dense=k["dense"], moe=k["moe"],
                         layers=r["layers"], linear=k["linear"])
    in_flight = (pp - rank - 1) * 2 + (vp - 1) * pp + 1 if vp > 1 else pp - rank
    return RankLoad(rank=rank, vocab_matrices=vocab_matrices, non_expert_params=r["dense"],
                    expert_params=r["expert"], counts=counts, chunks_in_flight=in_flight, loss=bool(r["L"]),
                    mtp_layers=r["m"])


@lru_cache(maxsize=4096)
def candidate_ranks(model: ModelSpec, pp: int, vp: int, vocab: float | None = None) -> tuple[RankLoad, ...]:
    """The lowest pipeline rank of each distinct content among rank_loads (memory falls with the rank among equal
    contents: fewer micro-batches in flight)."""
    seen: dict[tuple, RankLoad] = {}
    for load in rank_loads(model, pp, vp, vocab):
        key = (load.vocab_matrices, round(load.non_expert_params), round(load.expert_params), load.counts, load.loss)
        seen.setdefault(key, load)
    return tuple(seen.values())


@dataclass(frozen=True)
class RankArrays:
    """One candidate rank per layout (RankLoad's fields as arrays); `counts` holds arrays too."""

    rank: np.ndarray
    vocab_matrices: np.ndarray
    non_expert_params: np.ndarray
    expert_params: np.ndarray
    counts: BlockCounts
    chunks_in_flight: np.ndarray
    loss: np.ndarray
    mtp_layers: np.ndarray


def candidate_arrays(model: ModelSpec, pp, vp, tp, framework: str = "megatron") -> list[RankArrays]:
    """Per layout, its candidate ranks (candidate_ranks of its (pp, vp) with the loss at the vocabulary rows
    `framework` builds at its TP, models/counts.step_vocab, as the step model charges) as arrays: entry k is each
    layout's k-th candidate, or its first where it has fewer (a repeat changes no maximum). Computed once per
    distinct (pp, vp, tp) (commbench.row_groups: its groups of rows, then the distinct keys among them)."""
    pp, vp, tp = np.broadcast_arrays(np.asarray(pp, dtype=np.int64), np.asarray(vp, dtype=np.int64),
                                     np.asarray(tp, dtype=np.int64))
    grouped = RowGroups(pp, vp, tp)
    keyed = RowGroups(grouped.of(pp), grouped.of(vp), grouped.of(tp))   # the distinct keys among the groups
    keys = list(zip(keyed.of(grouped.of(pp)).tolist(), keyed.of(grouped.of(vp)).tolist(),
                    keyed.of(grouped.of(tp)).tolist()))
    vocab = {t: float(step_vocab(model, t, framework)) for t in {t for _, _, t in keys}}
    tables = [_candidate_table(model, p, v, vocab[t]) for p, v, t in keys] or [_candidate_table(model, 1, 1, None)]
    width = max(len(t) for t in tables)
    # key x candidate x field, a key with fewer candidates padded with its first
    padded = np.stack([t if len(t) == width else np.concatenate([t, np.repeat(t[:1], width - len(t), axis=0)])
                       for t in tables])
    out = []
    for k in range(width):
        table = padded[:, k, :]
        # a column the same for every group stays a scalar (no gather): most are (no Mamba, no loss on the first...)
        same = np.all(table == table[:1], axis=0)
        col = list(table[0])
        for i, values in zip(np.flatnonzero(~same).tolist(),   # key -> group -> row: one gather each
                             grouped.expand_each(keyed.expand_each(np.ascontiguousarray(table.T[~same])))):
            col[i] = values
        out.append(RankArrays(rank=np.asarray(col[0]).astype(np.int64), vocab_matrices=col[1], non_expert_params=col[2],
                              expert_params=col[3], chunks_in_flight=col[4], loss=np.asarray(col[5]) > 0,
                              mtp_layers=col[6], counts=BlockCounts(**dict(zip(_COUNT_NAMES, col[7:])))))
    return out


_COUNT_NAMES = ("attention", "mamba", "dense", "moe", "layers", "linear")


@lru_cache(maxsize=4096)
def _candidate_table(model: ModelSpec, pp: int, vp: int, vocab: float | None) -> np.ndarray:
    """candidate_ranks as a (candidate x field) table: rank, vocab_matrices, non_expert_params, expert_params,
    chunks_in_flight, loss, mtp_layers, then the block counts (_COUNT_NAMES)."""
    table = np.array([(x.rank, x.vocab_matrices, x.non_expert_params, x.expert_params, x.chunks_in_flight, x.loss,
                       x.mtp_layers, *(getattr(x.counts, n) for n in _COUNT_NAMES))
                      for x in candidate_ranks(model, pp, vp, vocab)], dtype=np.float64)
    table.flags.writeable = False
    return table
