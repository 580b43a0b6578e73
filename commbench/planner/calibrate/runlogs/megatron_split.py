"""The pipeline split a Megatron-LM log ran with, against the one the step model prices.

The step model charges the busiest pipeline rank of layout/split.py best_split for the row's (pp, vp)
(step/evaluate.py stage_imbalance). A log states its split by
--pipeline-model-parallel-layout, --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-
split, or none of them (even; megatron-core transformer_block.py get_num_layers_to_build, layout/split.py docstring).
The row carries the split the log ran (pipeline_layout, ModelSpec.pinned_split), which best_split then returns: a stated
split is priced as it ran (Megatron-LM's default even split included), and one Megatron-LM would not build is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs.common import _whole

# The arguments that state a split (core_v0.16.1 arguments.py); a block that lacks one is an excerpt (or older)
SPLIT_ARGS = ("pipeline_model_parallel_layout", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
              "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
IMBALANCE_TOLERANCE = 1e-3   # relative: busiest-rank ratios closer than this are the same pace


def _with_ends(counts: list[int], mtp: int) -> tuple[str, ...]:
    """Stages of decoder counts with the embedding first and the MTP layers and loss on the last (Megatron's
    placement without a layout string)."""
    stages = ["t" * n for n in counts]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * mtp + "L"
    return tuple(stages)


def logged_split(log: str, model, args: dict[str, Any], pp: int, vp: int):
    """(the split the arguments build, the argument that states it), or (None, why) when they state none Megatron
    builds for this model (an excerpt of a block, or a model other than --model's layer count)."""
    from commbench.planner.layout.split import PipelineSplit, split_from_layout
    layers, mtp, stages = model.num_layers, model.num_mtp_layers, pp * vp
    layout = args.get("pipeline_model_parallel_layout")
    if layout:
        try:
            split = split_from_layout(model, pp, str(layout))
        except CommbenchError as exc:
            raise CommbenchError(f"{log}: pipeline_model_parallel_layout={layout!r}: {exc}") from None
        return split, f"pipeline_model_parallel_layout={layout!r}"
    first, last = args.get("decoder_first_pipeline_num_layers"), args.get("decoder_last_pipeline_num_layers")
    if first is not None or last is not None:
        said = ", ".join(f"decoder_{k}_pipeline_num_layers={v}" for k, v in (("first", first), ("last", last))
                         if v is not None)
        first = _whole(log, "decoder_first_pipeline_num_layers", first) if first is not None else None
        last = _whole(log, "decoder_last_pipeline_num_layers", last) if last is not None else None
        middle = pp - (first is not None) - (last is not None)
        rest = layers - (first or 0) - (last or 0)
        if rest < 0 or (middle and rest % middle) or (not middle and rest) or \
                any(n % vp for n in (first or 0, last or 0, rest // middle if middle else 0)):
            return None, f"{said} does not split {layers} layers over pp={pp} x vp={vp}"
        per_rank = [first if r == 0 and first is not None else last if r == pp - 1 and last is not None
                    else rest // middle for r in range(pp)]
        counts = [per_rank[s % pp] // vp for s in range(stages)]
        return PipelineSplit(pp=pp, vp=vp, method="uneven", stages=_with_ends(counts, mtp),
                             first_stage_layers=first, last_stage_layers=last), said
    emb = bool(args.get("account_for_embedding_in_pipeline_split"))
    loss = bool(args.get("account_for_loss_in_pipeline_split"))
    said = ", ".join(f"account_for_{k}_in_pipeline_split=True" for k, on in (("embedding", emb), ("loss", loss))
                     if on) or "no split argument (an even split)"
    slots = layers + emb + loss
    if slots % stages:
        return None, f"{said}: {layers} layers do not divide over pp={pp} x vp={vp}"
    counts = [slots // stages] * stages
    counts[0] -= emb
    counts[-1] -= loss
    return PipelineSplit(pp=pp, vp=vp, method="account" if emb or loss else "even", stages=_with_ends(counts, mtp),
                         account_for_embedding=emb, account_for_loss=loss), said


def check_logged_split(log: str, args: dict[str, Any], model_name: str, *, pp: int, vp: int, tp: int,
                       without_mtp: bool) -> tuple[str, str]:
    """(the split the log ran as a --pipeline-model-parallel-layout string, the row's pipeline_layout, which the step
    model prices: ModelSpec.pinned_split; a note where its busiest rank is not as loaded as the step model's own best
    split's), or ('', '') where pp is 1 or --model is outside the zoo. One line where the arguments state no split
    Megatron-LM builds for the model (it could not be priced as it ran), or another vp than the run's."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.layout.split import best_split, split_vocab, stage_weights
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model_name)
    if pp == 1 or name is None:
        return "", ""
    model = load_model(name)
    if without_mtp:
        model = dataclasses.replace(model, num_mtp_layers=0)
    ran, said = logged_split(log, model, args, pp, vp)
    missing = [key for key in SPLIT_ARGS if key not in args]
    if ran is None and missing:
        # an excerpt of a block (Megatron-LM prints every argument): the split it ran is not stated; said, not guessed
        best = best_split(model, pp, vp, split_vocab(model, tp))
        return "", (f"pipeline split: {said}, and the arguments block lacks {', '.join(missing)}; priced as the step "
                    f"model's best split {best.layout!r}" if best is not None else "")
    if ran is None:
        raise CommbenchError(f"{log}: {said}, a split Megatron-LM does not build for {model_name}, so the run cannot "
                             "be priced as it ran; allowed: the arguments block as the run printed it (with its "
                             "pipeline_model_parallel_layout or decoder_first/last_pipeline_num_layers)")
    if ran.vp != vp:
        raise CommbenchError(f"{log}: {said} has {ran.vp} virtual stages per rank, but it ran with "
                             f"virtual_pipeline_model_parallel_size={vp}; give the log as Megatron-LM wrote it")
    vocab = split_vocab(model, tp)
    best = best_split(model, pp, vp, vocab)
    weights = stage_weights(model, vocab)

    def pace(split) -> float:
        costs = split.rank_costs(weights)
        return max(costs) * len(costs) / sum(costs)

    note = ""
    if best is not None and abs(pace(ran) - pace(best)) > IMBALANCE_TOLERANCE * pace(best):
        note = (f"pipeline split priced as it ran: {said}, layout {ran.layout!r} (busiest rank {pace(ran):.3f}x the "
                f"mean; the step model's best for pp={pp} vp={vp}, {best.layout!r}, is {pace(best):.3f}x)")
    return ran.layout, note
