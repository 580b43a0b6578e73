"""`commbench verify-plan`: run a plan's own communication here and put it beside the plan's prediction.

The plan's collectives, sized and priced as the step model does (planner/step/evaluate.py):
- EP all-to-all (one MoE layer's dispatch + combine, forward): the `moe_all_to_all` workload with the plan's
  tokens per rank (mbs x seq / (tp x cp)), expert width (the latent size for latent MoE), top-k, experts and
  dispatcher (per-expert copies with alltoall, per-rank deduplicated with flex), the dispatch in 8-bit where the
  plan quantises it (flex in an 8/4-bit recipe), and the model's expert capacity factor where it has one
  (tokens over capacity dropped, no padding); priced by moe_comm.ep_phases_s over the all-to-all efficiency.
  With ETP > 1 as megatron-core 0.16.1 runs it (token_dispatcher.py): flex is ONE all-to-all over the ETP x EP
  group, each token sent to every ETP rank of its destination EP ranks (the workload's expert_tp), and no ETP
  gather/scatter; alltoall is the all-to-all over EP, then per MoE layer an all-gather of the received tokens and a
  reduce-scatter of the expert outputs over ETP (etp x tokens x top-k x expert width elements, the gather bf16,
  the scatter in the routing probabilities' dtype: the step model's, moe_comm.etp_combine_bytes);
- TP: all-reduce of the layer activation (mbs x seq / cp x hidden x 2 B), or with sequence parallel its
  reduce-scatter (bf16) and all-gather (8-bit + scales in an 8-bit recipe, tp_comm.GATHER_BYTES);
- DP: each distinct gradient call Megatron-LM makes (megatron_grad_calls): the first stage's bucket, max(40M, 1M x
  DP*CP size) parameters (dp_sync.megatron_bucket_params; the 40M floor is the calibration's dp_bucket_params), or the
  local params if fewer, and with PP or VP > 1 the later stages' and chunks' whole buffer, x 2 B: reduce-scatter with
  the distributed optimizer, else all-reduce; TorchTitan: one mean block's FSDP2 reduce-scatter at 4 B
  (dp_sync.grad_bytes); dense params on the DP x CP groups, expert params on the expert-DP groups; priced as dp_sync
  prices the step's (flat or two-stage across racks);
- PP: one activation between adjacent stages, on the plan's PP pairs at its rank count (_pp_item).
Not measured, said in one line: the CP exchange, TorchTitan's parameter all-gathers.
Two predictions per collective, both from the plan's fabric and calibration: `predicted` at what was measured
here (size, group size, scale-up domains the measured group spans), to set beside the measurement, and
`plan predicted` at the plan's own size, group and racks, the figure the plan charges per call. Where this
machine cannot match the plan (other backend or devices, fewer ranks, smaller sizes), it runs what it can and
flags each unmet assumption.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import numpy as np

from commbench.comm.topology import Topology
from commbench.errors import CommbenchError, first_line
from commbench.planner.emit.plan import plan_layout, plan_model
from commbench.planner.layout.placement import domains_touched, place
from commbench.planner.layout.spec import Layout, code_of
from commbench.planner.models.counts import param_counts, step_vocab
from commbench.planner.models.spec import ModelSpec
from commbench.planner.step import moe_comm, tp_comm
from commbench.planner.step.dp_sync import GRAD_BYTES, grad_bytes, grad_sync_s, megatron_bucket_params
from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.units import format_size

ACT_BYTES = 2
# measured / predicted beyond this either way is flagged as a mismatch where the plan's fabric describes the backend
# measured (NCCL for a preset, the fitted backends for a profile): well past the cost model's error on its own
# published anchors and the run-to-run noise of a median, so what is flagged is the fabric, not the noise
MISMATCH_RATIO = 1.5


@dataclass(frozen=True, kw_only=True)
class PlanContext:
    """What the plan's sizes and predictions rest on, read from plan.json."""

    model: ModelSpec
    layout: Layout
    seq_len: int
    gpus: int
    per_rack: int
    imbalance: float
    calibration: Calibration
    framework: str
    flags: tuple[str, ...] = ()
    loss: str | None = None   # the cross entropy the plan's memory charged (inputs.loss; None: the launch's)

    @property
    def flex(self) -> bool:
        return self.layout.dispatcher == "flex"

    @property
    def quantised(self) -> bool:
        """The flex kernels dispatch 8-bit tokens in an 8/4-bit recipe (moe_comm.ep_etp_totals_s)."""
        return self.flex and self.layout.precision != "bf16"


@dataclass(frozen=True, kw_only=True)
class CommItem:
    """One collective of the plan, as measured here."""

    label: str
    kind: str                      # the group kind: tp | ep (ETP x EP with flex and ETP > 1) | etp | dp_cp | edp | pp
    collective: str                # workload name in collectives.REGISTRY
    size_bytes: int                # measured size (nccl-tests' meaning; a dispatch's bytes per rank for EP)
    plan_size_bytes: int           # the plan's size
    groups: tuple[tuple[int, ...], ...]
    plan_group_size: int
    plan_domains: int              # scale-up domains one of the plan's groups spans
    plan_tokens_per_rank: float = 0.0   # EP: the plan's tokens per rank (the measured ones are in params)
    params: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class VerifyJob:
    """`items`, `flags`: the plan's collectives as planned before ranks start (on `topology`, resolve_before_launch's); the
    ranks resolve the run's racks as bench does (resolve_on_ranks) and, where they differ, cut the plan's groups
    again from `doc` (`max_bytes`, `ctx`) on them."""
    items: tuple[CommItem, ...]
    flags: tuple[str, ...]        # plan_items' flags for `items`
    backend: str
    doc: dict
    max_bytes: int
    ctx: PlanContext
    topology: Topology
    iters: int = 5
    warmup_iters: int = 2
    timeout_s: float = 120.0


@dataclass(frozen=True, kw_only=True)
class VerifyOutcome:
    """What every rank measured on: the run's racks, the items measured on them and plan_items' flags for them."""
    topology: Topology
    items: tuple[CommItem, ...]
    flags: tuple[str, ...]
    rows: list[dict]              # one per item: measured, or with its "error" (failed, or not reached after one)
    error: str | None = None      # the collective that failed and why (the first rank's cause), as bench's outcome
    failed_at_s: float | None = None   # time.time() when `error` happened: the CLI names the rank that failed first


def model_spec_flag(inputs: dict) -> str:
    """'' when the plan's model_spec is the zoo model it names (or names none in the zoo); else one line naming the
    first field that differs: a hand edit, a --model-file of the same name or an older zoo, whose sizes verify-plan
    measures as they stand."""
    from commbench.planner.emit.plan import model_dict
    from commbench.planner.models.zoo import load_model, model_names

    name, spec = inputs.get("model"), inputs.get("model_spec")
    if not isinstance(name, str) or name not in model_names() or not isinstance(spec, dict):
        return ""
    zoo = json.loads(json.dumps(model_dict(load_model(name)), default=float))
    differ = next((k for k in zoo if k in spec and spec[k] != zoo[k]), None)
    if differ is None:
        return ""
    return (f"the plan's model_spec has {differ}={spec[differ]!r}, but zoo model {name} has {zoo[differ]!r}: a hand "
            "edit, a --model-file model of that name or another commbench's zoo; the sizes measured are the plan's "
            "model_spec's")


def step_model_flags(inputs: dict) -> list[str]:
    """A line where the plan was predicted by another step model than this commbench's (inputs.step_model: its
    predicted figures are not what this commbench gives for the same layout) and one where its calibration file was
    fitted to another step model than the plan's (inputs.calibration_step_model: the file's terms were read as another
    physics'). A plan written before plans recorded it (commbench before 2026-12-06) says so: its figures came from an
    older step model than any that records one."""
    from commbench.planner.step.terms import STEP_MODEL
    flags = []
    planned = inputs.get("step_model")
    if planned is None:
        flags.append(f"the plan records no step model (written by a commbench before plans recorded one): its "
                     f"predicted figures are an older step model's than this commbench's {STEP_MODEL} (plan it again)")
    elif planned != STEP_MODEL:
        flags.append(f"the plan was predicted by step model {planned} (commbench "
                     f"{inputs.get('commbench_version') or 'unknown'}); this commbench has step model {STEP_MODEL}: its "
                     "predicted figures are not what this one gives (plan it again)")
    if "calibration_step_model" in inputs and inputs.get("calibration") not in (None, "shipped"):
        fitted = inputs.get("calibration_step_model")
        if fitted != (planned or STEP_MODEL):
            flags.append(f"the plan's calibration file {inputs['calibration']} was fitted to step model "
                         f"{fitted or 'unknown (it records none)'}, the plan predicted by {planned or STEP_MODEL}: its "
                         "terms were read as another step model's (refit with `commbench calibrate -O`)")
    return flags


def _other_gpu_terms(inputs: dict) -> set[str]:
    """The kernel terms a plan of a GPU its calibration file was not fitted on took from the shipped calibration
    (inputs.calibration_other_gpu_terms; CalibrationFile.for_gpu): not the file's, so not "changed" when they differ
    from it. A hand edit that is not a list of fitted terms is refused in one line."""
    from commbench.planner.step.terms import FITTED_TERMS
    terms = inputs.get("calibration_other_gpu_terms", [])
    if not isinstance(terms, list) or not all(isinstance(t, str) and t in FITTED_TERMS for t in terms):
        raise CommbenchError(f"plan field 'inputs.calibration_other_gpu_terms' = {str(terms)[:80]!r} is invalid: a list "
                             f"of fitted terms ({', '.join(FITTED_TERMS)}) (write the plan again with `commbench plan`)")
    return set(terms)


def _recorded_terms(inputs: dict) -> dict[str, float] | None:
    """The fitted terms a plan recorded (inputs.calibration_terms, plans from this commbench on); None for an older
    plan. A hand edit that is not every fitted term as a finite number is refused in one line."""
    import math

    from commbench.planner.step.terms import FITTED_TERMS
    terms = inputs.get("calibration_terms")
    if terms is None:
        return None
    if not isinstance(terms, dict) or set(terms) != set(FITTED_TERMS) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in terms.values()):
        raise CommbenchError(f"plan field 'inputs.calibration_terms' = {str(terms)[:80]!r} is invalid: every fitted "
                             f"term ({', '.join(FITTED_TERMS)}) as a number >= 0 (write the plan again with "
                             "`commbench plan`)")
    return {t: float(v) for t, v in terms.items()}


def release_flags(inputs: dict, model: ModelSpec | None = None, framework: str | None = None) -> list[str]:
    """The plan's release and precision checked as `plan` checks --software and --precision (recipes.check_release,
    check_precision_in_release: one rule), and for a Megatron plan whether the release's Megatron-LM builds `model`
    (release_flags.check_model_in_release, as `plan`): a line where a hand edit made them a combination plan refuses.
    A plan that records no release (written before plans did) has nothing to check."""
    from commbench.planner.layout.release_flags import check_model_in_release
    from commbench.planner.layout.recipes import check_precision_in_release, check_release
    software = inputs.get("software")
    if software is None:
        return []
    try:
        release = check_release(str(software), "inputs.software")
        check_precision_in_release(str(inputs.get("precision")), release, str(software),
                                   fields=("inputs.precision", "inputs.software"))
        if model is not None and framework == "megatron":
            check_model_in_release(model, release, str(software), field="inputs.software")
    except CommbenchError as exc:
        return [f"{first_line(exc)}: `plan` refuses this release and precision, so the plan was edited by hand; its "
                "launch and predicted figures are not that release's (plan it again)"]
    return []


# predicted figures re-predicted for the recorded layout: equal to float noise, else edited or stale
REPREDICTED = ("step_s", "tokens_per_s_per_gpu", "mem_total_bytes")


def prediction_flags(doc: dict, ctx: PlanContext, fabric) -> list[str]:
    """Re-predict the recorded layout (precision included) on the plan's fabric under the recorded step model and
    calibration terms (ctx.calibration): a line where the plan's `predicted` figures differ beyond float noise (a
    hand edit of the layout, its precision or the figures). Not where the plan was predicted by another step model
    (step_model_flags says that) or its fabric changed (fabric None)."""
    import math

    from commbench.planner.layout.spec import LayoutArrays
    from commbench.planner.step.evaluate import evaluate_layouts
    from commbench.planner.step.terms import STEP_MODEL
    inputs, recorded = doc["inputs"], doc.get("predicted") or {}
    if fabric is None or getattr(fabric, "gpu", None) is None or inputs.get("step_model") != STEP_MODEL:
        return []   # no fabric the plan's, or one without a GPU (a fitted profile alone): nothing to predict on
    bd = evaluate_layouts(ctx.model, fabric, LayoutArrays.from_layouts([ctx.layout]), seq_len=ctx.seq_len,
                          calibration=ctx.calibration, moe_imbalance=ctx.imbalance,
                          moe_capacity_factor=inputs.get("moe_capacity_factor"), framework=ctx.framework,
                          loss=ctx.loss)
    row = bd.row(0)
    differ = [f"{k} {recorded[k]:.6g} (now {float(row[k]):.6g})" for k in REPREDICTED
              if isinstance(recorded.get(k), (int, float)) and not math.isclose(float(recorded[k]), float(row[k]),
                                                                               rel_tol=1e-6)]
    if not differ:
        return []
    return [f"the plan's predicted figures are not its recorded layout's (precision {ctx.layout.precision}) under its "
            f"step model {STEP_MODEL} and calibration: {'; '.join(differ)}: edited or stale (plan it again); "
            "'plan predicted' below is the plan's fabric at the recorded layout"]


def plan_context(doc: dict) -> PlanContext:
    """The plan's model, layout, sequence, racks, routing, framework and efficiency terms (its --calibration file
    where it names one; flagged and the shipped terms used where that file cannot be read here)."""
    lay, model = plan_layout(doc), plan_model(doc)
    inputs = doc["inputs"]
    flags: list[str] = []
    cal = CALIBRATED
    source = inputs.get("calibration", "shipped")
    recorded = _recorded_terms(inputs)
    if isinstance(source, str) and source != "shipped":
        from commbench.planner.calibrate.fit import read_calibration_file

        try:
            cal = read_calibration_file(source).calibration
        except CommbenchError as exc:
            flags.append(f"the plan's calibration file {source} cannot be read here ({exc}): predictions use "
                         + ("the terms the plan recorded" if recorded else "the shipped efficiency terms "
                            "(all_to_all_efficiency, dp_bucket_params)"))
        else:
            shipped_instead = _other_gpu_terms(inputs)
            changed = [t for t, v in (recorded or {}).items() if t not in shipped_instead and getattr(cal, t) != v]
            if changed:
                flags.append(f"the plan's calibration file {source} has changed since the plan ({', '.join(changed)} "
                             "differ): predictions use the terms the plan recorded (inputs.calibration_terms)")
        if recorded:
            try:
                cal = CALIBRATED.with_values(**recorded)
            except ValueError as exc:
                raise CommbenchError(f"plan field 'inputs.calibration_terms' is invalid: {exc} (write the plan "
                                     "again with `commbench plan`)") from None
    framework = doc.get("framework")
    framework = str(framework.get("name", "megatron")) if isinstance(framework, dict) else "megatron"
    flags.extend(filter(None, [model_spec_flag(inputs), *step_model_flags(inputs),
                               *release_flags(inputs, model, framework)]))
    return PlanContext(model=model, layout=lay, seq_len=int(inputs.get("seq_len", model.seq_len)),
                       gpus=int(inputs["gpus"]), per_rack=int(doc["placement"]["gpus_per_rack"]),
                       imbalance=float(inputs.get("moe_imbalance", 1.0)), calibration=cal,
                       framework=framework, flags=tuple(flags), loss=plan_loss(inputs, framework))


def plan_loss(inputs: dict, framework: str) -> str:
    """The cross entropy the plan's memory charged (step/loss_memory.py): inputs.loss, or for a plan written before
    it was recorded the one plans charged then, the published runs' (run_loss: TE's for Megatron), so its re-prediction
    is the plan's own."""
    from commbench.planner.step.loss_memory import check_loss, run_loss
    loss = inputs.get("loss")
    if loss is None:
        return run_loss(framework)
    try:
        return check_loss(loss if isinstance(loss, str) else repr(loss), framework)
    except CommbenchError as exc:
        raise CommbenchError(f"plan field 'inputs.loss' is invalid: {exc} (write the plan again with "
                             "`commbench plan`)") from None


def _scaled_groups(size: int, nproc: int, divides: int = 0, *, ranks_per_rack: int | None = None,
                   plan_domains: int = 1, multiple_of: int = 1) -> tuple[tuple[int, ...], ...]:
    """Groups of the largest divisor m of `nproc` up to `size` (that also divides `divides`). Where this run spans
    several racks (`ranks_per_rack` ranks each), each group spans as many of them as the plan's group spans of its
    own (`plan_domains`) where the run allows, and never more: m/d ranks from each of d racks, as Megatron's
    data-parallel groups stride over the racks of a stage; a smaller group inside fewer racks rather than a larger one
    over a tier the plan's group does not use. Consecutive ranks on one host (`ranks_per_rack` None) or rack.
    `multiple_of`: m a multiple of it (the flex ETP x EP exchange keeps whole ETP groups); groups of 1 where none is."""
    sizes = sorted((m for m in range(1, nproc + 1) if nproc % m == 0 and m <= size and (not divides or divides % m == 0)
                    and m % multiple_of == 0), reverse=True) or [1]
    racks = nproc // ranks_per_rack if ranks_per_rack and nproc % ranks_per_rack == 0 else 1
    if racks <= 1:
        return tuple(tuple(range(s, s + sizes[0])) for s in range(0, nproc, sizes[0]))
    for m in sizes:
        spans = [d for d in range(1, min(plan_domains, racks, m) + 1)
                 if m % d == 0 and racks % d == 0 and ranks_per_rack % (m // d) == 0]
        if spans:
            d, per_rack = max(spans), m // max(spans)
            return tuple(tuple((block * d + k) * ranks_per_rack + j * per_rack + t for k in range(d)
                               for t in range(per_rack))
                         for block in range(racks // d) for j in range(ranks_per_rack // per_rack))
    raise AssertionError("a group of 1 fits one rack")


def _rack_order(topology: Topology | None, nproc: int) -> tuple[int | None, tuple[int, ...]]:
    """(ranks per rack, the world ranks rack after rack) of this run's racks, for _scaled_groups, which places groups
    on ranks numbered rack by rack: position v is rank order[v] (block placement: order is 0..n-1; a cyclic launch's
    racks 0,2;1,3 give 0,2,1,3). One rack, or racks of unequal size: (None, consecutive ranks rack by rack)."""
    if topology is None or topology.num_racks <= 1:
        return None, tuple(range(nproc))
    assert topology.world_size == nproc, (topology.world_size, nproc)
    return topology.ranks_per_rack, tuple(r for rack in topology.racks for r in rack)


def _scaled_on(topology: Topology | None, size: int, nproc: int, divides: int = 0, *, plan_domains: int = 1,
               multiple_of: int = 1) -> tuple[tuple[int, ...], ...]:
    """_scaled_groups on this run's racks as they are (any placement of ranks on racks), each group's ranks sorted."""
    per_rack, order = _rack_order(topology, nproc)
    groups = _scaled_groups(size, nproc, divides, ranks_per_rack=per_rack, plan_domains=plan_domains,
                            multiple_of=multiple_of)
    return tuple(tuple(sorted(order[v] for v in g)) for g in groups)


def plan_items(doc: dict, nproc: int, max_bytes: int, ctx: PlanContext | None = None,
               topology: Topology | None = None) -> tuple[list[CommItem], list[str]]:
    """The plan's collectives scaled to `nproc` ranks and at most `max_bytes` per buffer, and the flags; on fewer
    ranks than the plan, a group spans as many of this run's racks (`topology`: the run's, as bench resolves it,
    comm/topology.resolve_on_ranks; None: one host) as the plan's group spans of its own, where the run has them."""
    ctx = ctx or plan_context(doc)
    lay, model = ctx.layout, ctx.model
    exact = ctx.gpus == nproc
    flags = list(ctx.flags)
    if not exact:
        per_rack, _ = _rack_order(topology, nproc)
        if topology is None or topology.num_racks <= 1:
            where = "consecutive ranks (this run is one host or rack)"
        elif per_rack is None:
            where = (f"consecutive ranks rack by rack (this run's {topology.num_racks} racks are uneven: "
                     f"{'/'.join(str(len(r)) for r in topology.racks)} ranks)")
        else:
            where = (f"each spanning as many of this run's {topology.num_racks} racks as the plan's group spans "
                     "of its own, where the run has them")
        flags.append(f"the plan has {ctx.gpus} ranks, this run {nproc}: groups are cut to at most the plan's size, "
                     f"{where}")
    placement = place(lay, ctx.gpus, ctx.per_rack) if exact else None

    def groups_of(kind: str, size: int, divides: int = 0, domains: int = 1):
        if placement is not None:
            return tuple(tuple(g) for g in placement.groups[kind])
        return _scaled_on(topology, size, nproc, divides, plan_domains=domains)

    def plan_domains(span: int, group: int) -> int:
        return int(domains_touched(np.array(span), np.array(group), ctx.per_rack))

    def scaled(plan_bytes: int, label: str) -> int:
        if plan_bytes > max_bytes:
            flags.append(f"{label}: {plan_bytes:,} B in the plan, measured at {max_bytes:,} B (--max-bytes); "
                         "'predicted' is at the measured size, 'plan predicted' at the plan's")
        return int(min(plan_bytes, max_bytes))

    tokens_mb = lay.mbs * ctx.seq_len
    items: list[CommItem] = []
    if lay.tp > 1:
        elements = tokens_mb / lay.cp * model.hidden
        gather = float(tp_comm.gather_bytes_per_element(np.array([code_of("precision", lay.precision)]),
                                                        ctx.framework)[0])
        names = (("reduce_scatter", ACT_BYTES), ("all_gather", gather)) if lay.sequence_parallel \
            else (("all_reduce", ACT_BYTES),)
        for name, per_element in names:
            plan_bytes = int(round(elements * per_element))
            tp_domains = plan_domains(lay.tp, lay.tp)
            items.append(CommItem(label=f"TP {name}", kind="tp", collective=name,
                                  size_bytes=scaled(plan_bytes, f"TP {name}"), plan_size_bytes=plan_bytes,
                                  groups=groups_of("tp", lay.tp, domains=tp_domains), plan_group_size=lay.tp,
                                  plan_domains=tp_domains))
    flex_etp = ctx.flex and lay.etp > 1   # one all-to-all over ETP x EP (module docstring)
    if model.is_moe and (lay.ep > 1 or flex_etp):
        ep_domains = plan_domains(lay.etp * lay.ep, lay.ep)
        if not flex_etp:
            ep_groups = groups_of("ep", lay.ep, model.num_routed_experts, ep_domains)
        elif placement is not None:   # the ETP x EP block: the ETP groups of one EP group's ranks
            etp_of = {r: g for g in placement.groups["etp"] for r in g}
            ep_groups = tuple(sorted({tuple(sorted({m for r in g for m in etp_of[r]}))
                                      for g in placement.groups["ep"]}))
        else:   # ETP copies stay whole: a multiple of ETP ranks whose EP part divides the experts
            ep_groups = _scaled_on(topology, lay.etp * lay.ep, nproc, lay.etp * model.num_routed_experts,
                                   plan_domains=ep_domains, multiple_of=lay.etp)
        items.append(_ep_item(ctx, tokens_mb, max_bytes, ep_groups, ep_domains, flags))
        if lay.etp > 1 and not ctx.flex:
            items.extend(_etp_items(ctx, tokens_mb, groups_of("etp", lay.etp, domains=plan_domains(lay.etp, lay.etp)),
                                    plan_domains(lay.etp, lay.etp), scaled))
    pc = param_counts(model, vocab=step_vocab(model, lay.tp, ctx.framework))  # the embedding/output rows it builds
    what = "reduce-scatter" if lay.distributed_optimizer else "all-reduce"
    collective = "reduce_scatter" if lay.distributed_optimizer else "all_reduce"
    stage_ranks = ctx.gpus // lay.pp   # the DP and expert-DP groups stride over one pipeline stage's ranks
    titan = ctx.framework == "torchtitan"
    replicas = lay.fsdp_replicas if lay.fsdp else 1
    for kind, name, local, block, group in (
            ("dp_cp", "DP", pc.non_expert / (lay.tp * lay.pp), (pc.non_expert - pc.embeddings) / lay.tp,
             lay.dp * lay.cp),
            ("edp", "DP expert", pc.expert / (lay.etp * lay.ep * lay.pp), pc.expert / (lay.etp * lay.ep), lay.edp)):
        if group <= 1 or local <= 0:
            continue
        dp_domains = plan_domains(stage_ranks, group)
        if titan:   # FSDP2 wraps each TransformerBlock (a MoE block's experts on the expert mesh): one mean block's
            # gradients (the embedding and output layer are units of their own), fp32, over the shard groups
            shard = max(group // replicas, 1)
            groups = groups_of(kind, group, domains=dp_domains)
            if placement is not None and replicas > 1:   # dp_replicate outside dp_shard: each replica's chunk
                groups = tuple(g[i:i + shard] for g in groups for i in range(0, len(g), shard))
            elif replicas > 1:
                groups = _scaled_on(topology, shard, nproc, plan_domains=plan_domains(stage_ranks, shard))
            calls = [(f"{name} FSDP2 block grad reduce-scatter (fp32)", block / model.num_layers, shard)]
            collective_of = "reduce_scatter"
        else:
            groups = groups_of(kind, group, domains=dp_domains)
            calls = [(f"{name} {label} {what}", params, group) for label, params in megatron_grad_calls(ctx, local)]
            collective_of = collective
        for label, params, plan_group in calls:
            plan_bytes = int(round(params * grad_bytes(ctx.framework)))
            items.append(CommItem(label=label, kind=kind, collective=collective_of,
                                  size_bytes=scaled(plan_bytes, label), plan_size_bytes=plan_bytes, groups=groups,
                                  plan_group_size=plan_group, plan_domains=dp_domains))
    if titan and any(i.kind in ("dp_cp", "edp") for i in items):
        flags.append(titan_fsdp_flag(lay))
    if lay.pp > 1:
        items.append(_pp_item(ctx, tokens_mb, scaled, topology, nproc, placement, flags))
    if lay.fsdp and not titan:
        flags.append("FSDP: the plan reduce-scatters and gathers per layer every micro-batch over its shard groups; "
                     "measured here as one gradient bucket over the whole DP group")
    if lay.cp > 1:
        exchange = ("TorchTitan's all-gathers of K,V and reduce-scatters of dK,dV" if titan else
                    "the all-to-alls" if model.all_to_all_cp else "the K,V ring send/recv")
        flags.append(f"CP: not measured: the plan prices the context-parallel exchange of every attention layer "
                     f"(cp={lay.cp}: {exchange}; predicted.cp_total_s, step/cp_comm.py and evaluate.py); verify-plan "
                     "runs no CP collective")
    def no_group(item: CommItem) -> str:
        return (f"no group of 2 to {item.plan_group_size} ranks (the plan's size"
                f"{', dividing its ' + str(model.num_routed_experts) + ' experts' if item.kind == 'ep' else ''}"
                f"{', whole ETP groups of ' + str(lay.etp) if item.params.get('expert_tp', 1) > 1 else ''})"
                f" divides the {nproc} ranks of this run")

    kept = [i for i in items if len(i.groups[0]) > 1]
    if items and not kept:   # the plan has collectives, none of which this rank count can hold
        raise CommbenchError(f"no collective of the plan fits {nproc} ranks: "
                             + "; ".join(f"{item.label} (the plan's group of {item.plan_group_size}): {no_group(item)}"
                                         for item in items) + "; run a rank count its groups divide")
    for item in items:
        if len(item.groups[0]) < 2:
            flags.append(f"{item.label}: not measured: {no_group(item)}; run a rank count its groups divide")
    return kept, flags


def _pp_item(ctx: PlanContext, tokens_mb: int, scaled, topology: Topology | None, nproc: int, placement,
             flags: list[str]) -> CommItem:
    """The pipeline send/recv between neighbouring stages, as step/evaluate.py charges it: one activation of the
    micro-batch (tokens / CP, scattered over TP with sequence parallelism, ACT_BYTES each) exchanged by a pair of ranks
    (the sendrecv curve at group 2, 2 x VP calls a micro-batch), across the racks where a stage's TP x CP x DP ranks
    fill a rack (evaluate's pp_dom). At the plan's rank count (`placement`), on the framework's own pairs: adjacent
    stages of each PP group (Megatron-Core's RankGenerator and TorchTitan's mesh put PP outermost, so a rank's
    neighbour is TP x CP x DP ranks away: tp2 pp2 on 8 is [0,4] [1,5] [2,6] [3,7]), stages 0-1, 2-3, ... at once. An
    odd PP cannot pair every rank with a neighbouring stage at once (every rank is in one group), so it (flagged) and
    fewer ranks than the plan measure disjoint pairs of this run's ranks, spanning two racks where the plan's pairs
    do and the run has them."""
    lay = ctx.layout
    plan_bytes = int(round(tokens_mb / (lay.cp * (lay.tp if lay.sequence_parallel else 1)) * ctx.model.hidden
                           * ACT_BYTES))
    domains = 2 if lay.tp * lay.cp * lay.dp >= ctx.per_rack else 1
    label = "PP send/recv"
    if placement is not None and lay.pp % 2 == 0:
        groups = tuple(sorted((g[s], g[s + 1]) for g in placement.groups["pp"] for s in range(0, lay.pp, 2)))
    else:
        groups = _scaled_on(topology, 2, nproc, plan_domains=domains)
        if placement is not None:
            flags.append(f"{label}: pp={lay.pp} is odd: not every rank has a neighbouring stage to pair with at once, "
                         "so measured on pairs of consecutive ranks, not the plan's PP pairs "
                         f"({', '.join(str(list(g[:2])) for g in placement.groups['pp'][:2])}, ...)")
    return CommItem(label=label, kind="pp", collective="sendrecv", size_bytes=scaled(plan_bytes, label),
                    plan_size_bytes=plan_bytes, groups=groups, plan_group_size=2, plan_domains=domains)


def megatron_grad_calls(ctx: PlanContext, local: float) -> list[tuple[str, float]]:
    """(label, parameters) of each distinct gradient reduce-scatter (all-reduce) Megatron-LM runs on a buffer of
    `local` parameters per stage: the first pipeline stage's first model chunk in buckets of
    megatron_bucket_params (the plan's calibrated floor), every other stage and chunk its chunk's whole buffer
    (local / VP) in one call (distributed_data_parallel.py core_v0.16.1:96-102, `if disable_bucketing or pp_rank > 0:
    self.bucket_size = None`, the same at core_v0.17.1 and core_v0.19.0; training.py core_v0.16.1:1337
    `disable_bucketing=(model_chunk_idx > 0)`), and no buckets anywhere without --overlap-grad-reduce (training.py
    core_v0.16.1: `if not ddp_config.overlap_grad_reduce: ddp_config.bucket_size = None`). `local` is the stage's mean
    (the plan's parameters / PP), as the step model counts it."""
    lay = ctx.layout
    chunk = local / lay.vp
    if not lay.dp_overlap:
        return [("grad buffer (every stage: the whole buffer in one call, no --overlap-grad-reduce)", chunk)]
    bucket = min(float(megatron_bucket_params(ctx.calibration, lay.dp * lay.cp)), chunk)
    if lay.pp == 1 and lay.vp == 1:
        return [("grad bucket", bucket)]
    first = "first stage" + (", first chunk" if lay.vp > 1 else "")
    rest = "stages after the first" + ("; chunks after the first" if lay.vp > 1 else "")
    calls = [(f"grad bucket ({first})", bucket)]
    if chunk > bucket:
        calls.append((f"grad buffer ({rest}: the whole buffer in one call)", chunk))
    return calls


def titan_fsdp_flag(lay: Layout) -> str:
    """What the TorchTitan DP rows measure and what they do not."""
    when = ("once a step, at the last micro-batch (torch pipelining's set_requires_gradient_sync)" if lay.pp > 1
            else "every micro-batch")
    return (f"TorchTitan FSDP2: measured one mean TransformerBlock's (embedding and output layer aside) gradient "
            f"reduce-scatter in fp32 (training.mixed_precision_reduce float32, TorchTitan 0.3.0 config/configs.py; "
            f"dp_sync.grad_bytes) over the shard groups; it runs per block {when}; the parameter all-gathers"
            f"{' and the replicas all-reduce' if lay.fsdp and lay.fsdp_replicas > 1 else ''} are not measured")


def _ep_item(ctx: PlanContext, tokens_mb: int, max_bytes: int, groups, plan_dom: int, flags: list[str]) -> CommItem:
    """The EP all-to-all: the plan's bytes per rank (moe_comm's accounting), measured with as many tokens as
    --max-bytes allows on the measured group."""
    lay, model = ctx.layout, ctx.model
    tokens_rank = tokens_mb / (lay.tp * lay.cp)
    width = model.expert_width
    per_element = float(moe_comm.dispatch_bytes_per_element(ctx.quantised))
    etp = lay.etp if ctx.flex else 1   # flex: the exchange spans ETP x EP and copies each token over ETP

    def dispatch_bytes(tokens: float, ranks: int, dom: int) -> int:
        elements = moe_comm.dispatch_elements(model, tokens_rank=np.array([float(tokens)]),
                                              ep=np.array([max(ranks // etp, 1)]), ep_dom=np.array([dom]),
                                              flex=np.array([ctx.flex]), etp=np.array([etp]))[0]
        return int(round(elements * per_element))

    dtype = "fp8" if ctx.quantised else "bf16"
    params = {"hidden": width, "top_k": model.top_k,
              "num_experts": model.num_routed_experts, "routing": "uniform",
              "dispatch_mode": "per-rank" if ctx.flex else "per-expert",
              "dispatch_dtype": dtype, "combine_dtype": "bf16", "seed": 0, **({"expert_tp": etp} if etp > 1 else {})}
    factor = model.architecture.capacity_factor if model.architecture is not None else 0.0
    if factor:  # drop-and-pad MoE: the dispatcher moves at most the capacity (the plan emits no padding)
        params.update(capacity_factor=float(factor), pad_to_capacity=False)
    whole = int(tokens_rank)
    cap = ep_tokens_within(params, whole, len(groups[0]), max_bytes) if len(groups[0]) > 1 else max(1, whole)
    if cap == 0:  # one token is the least the all-to-all can move: checked before ranks start
        one = ep_buffer_bytes(params, 1, len(groups[0]))
        raise CommbenchError(f"the plan's model (expert width {width}, top_k={model.top_k}, {dtype} dispatch "
                             f"{params['dispatch_mode']}, bf16 combine) fills a {one:,}-byte buffer with one token "
                             f"per rank in its EP all-to-all on {len(groups[0])} ranks, more than --max-bytes="
                             f"{max_bytes:,}: raise --max-bytes, or check the plan's model")
    if cap < whole:
        flags.append(f"EP all-to-all: {whole} tokens per rank in the plan, measured with {cap} (--max-bytes: the "
                     "largest dispatch or combine buffer of the seeded routing)")
    params = {"tokens_per_rank": int(cap), **params}
    if factor:
        flags.append(f"EP all-to-all: measured with the model's expert capacity factor {factor:g} (Megatron-Core "
                     "0.16.1: tokens over ceil(tokens x top-k / experts x C) per expert and rank dropped, not sent; "
                     "no padding, as the plan emits no --moe-pad-expert-input-to-capacity)")
    flags.append(f"routing: the plan assumes the busiest EP rank gets {ctx.imbalance:g}x the mean; measured with "
                 "uniform random routing (the workload records its own imbalance)")
    label = "EP all-to-all (dispatch + combine)" if etp == 1 else \
        f"ETP x EP all-to-all (flex, {etp} ETP copies; dispatch + combine)"
    return CommItem(label=label, kind="ep", collective="moe_all_to_all",
                    size_bytes=dispatch_bytes(cap, len(groups[0]), 1), plan_size_bytes=dispatch_bytes(
                        tokens_rank, etp * lay.ep, plan_dom), groups=groups, plan_group_size=etp * lay.ep,
                    plan_domains=plan_dom, plan_tokens_per_rank=tokens_rank, params=params)


def ep_buffer_bytes(params: dict, tokens: int, ranks: int) -> int:
    """The largest buffer the moe_all_to_all workload allocates for `params` at `tokens` per rank on `ranks` ranks:
    its own accounting of the seeded routing (MoeAllToAll.largest_buffer_bytes), not a per-token bound."""
    from collectives import get_collective

    workload = get_collective("moe_all_to_all")
    spec = workload.plan_specs(dict(params) | {"tokens_per_rank": [int(tokens)]}, ranks)[0][0]
    return workload.largest_buffer_bytes(spec, ranks)


def ep_tokens_within(params: dict, whole: int, ranks: int, max_bytes: int) -> int:
    """The most tokens per rank, up to `whole` (at least 1), whose largest buffer (ep_buffer_bytes) fits `max_bytes`;
    0 where one token does not. Doubling from 1 token, then bisecting (the seeded routing's buffers grow with the
    tokens), so the routings drawn stay about as large as the answer."""
    whole, lo, step = max(whole, 1), 0, 1
    while step <= whole and ep_buffer_bytes(params, step, ranks) <= max_bytes:
        lo, step = step, step * 2
    hi = min(step - 1, whole)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ep_buffer_bytes(params, mid, ranks) <= max_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _etp_items(ctx: PlanContext, tokens_mb: int, groups, plan_dom: int, scaled) -> list[CommItem]:
    """The alltoall dispatcher's ETP all-gather (before the expert GEMMs, bf16) and reduce-scatter (after, in the
    routing probabilities' dtype: moe_comm.etp_combine_bytes), one each per MoE layer forward: etp x the tokens a
    rank receives (tokens per rank x top-k) x expert width elements, as moe_comm.ep_etp_totals_s charges them."""
    lay, model = ctx.layout, ctx.model
    elements = lay.etp * tokens_mb / (lay.tp * lay.cp) * model.top_k * model.expert_width
    items = []
    for name, per_element in (("all_gather", ACT_BYTES), ("reduce_scatter", moe_comm.etp_combine_bytes(model))):
        plan_bytes = int(round(elements * per_element))
        items.append(CommItem(label=f"ETP {name}", kind="etp", collective=name,
                              size_bytes=scaled(plan_bytes, f"ETP {name}"), plan_size_bytes=plan_bytes,
                              groups=groups, plan_group_size=lay.etp, plan_domains=plan_dom))
    return items


def predicted_s(fabric, item: CommItem, ctx: PlanContext, *, size_bytes: float, tokens: float, group: int,
                domains: int, imbalance: float | None = None) -> float:
    """The plan's cost model for `item` at `size_bytes` (EP: `tokens` per rank, the busiest rank receiving
    `imbalance` x the mean, the plan's by default) on `group` ranks over `domains` scale-up domains (at most the
    fabric's): what the step model charges for one such call."""
    from commbench.costmodel import collective_time_s, hierarchical_reduce_scatter_time_s, moe_all_to_all_time_s

    dom = priced_domains(fabric, group, domains)
    if item.kind == "ep":
        etp = int(item.params.get("expert_tp", 1))   # flex with ETP: `group` is ETP x EP ranks
        dispatch, _, combine = moe_comm.ep_phases_s(
            ctx.model, fabric, tokens_rank=np.array([float(tokens)]), ep=np.array([max(group // etp, 1)]),
            ep_dom=np.array([dom]), flex=np.array([ctx.flex]), quantised=np.array([ctx.quantised]),
            moe_imbalance=ctx.imbalance if imbalance is None else imbalance,
            collective_time_s=collective_time_s, moe_all_to_all_time_s=moe_all_to_all_time_s, etp=np.array([etp]))
        return float((dispatch[0] + combine[0]) / ctx.calibration.all_to_all_efficiency)
    if item.kind in ("dp_cp", "edp"):
        return float(grad_sync_s(fabric, collective_time_s, hierarchical_reduce_scatter_time_s,
                                 params=size_bytes / GRAD_BYTES, group=group, domains=dom,
                                 dist=ctx.layout.distributed_optimizer)[0])
    return float(collective_time_s(fabric, item.collective, np.array([float(size_bytes)]), np.array([group]),
                                   np.array([dom]))[0])


def priced_domains(fabric, group: int, domains: int) -> int:
    """Scale-up domains the cost model prices `group` ranks over: `domains` (measured or planned), at most the group
    and the fabric's domains; on a profile of one GPU per domain (a 1-GPU-per-node cluster) no two ranks share one,
    so a group measured on one host is priced across as many domains as ranks, as the plan prices it
    (placement.pair_domains, which spreads a pair only at domain size 1); one domain was refused ('a group on one
    domain holds at most 1 ranks; pass num_domains')."""
    most = int(getattr(fabric, "num_domains", 0) or 0)
    dom = max(1, min(domains, group, most) if most else min(domains, group))
    return max(dom, group) if int(getattr(fabric, "domain_size", 0) or 0) == 1 else dom


def measured_domains(groups, topology: Topology | None) -> int:
    """Scale-up domains the widest measured group spans on this run's racks (`topology`; None: one host)."""
    if topology is None:
        return 1
    return max(len({topology.rack_of(r) for r in g}) for g in groups)


def mismatch_flags(points: list[dict], comparable: bool | None = None, *,
                   fits: dict[str, dict] | None = None) -> list[str]:
    """A flag per point whose measured / predicted lies beyond MISMATCH_RATIO either way, where the plan's fabric
    describes the backend measured (`comparable`, else each point's own "comparable"). `fits`: per point's collective,
    what a fitted profile measured for the curve that prices it (cli/predict.fitted_range, with `beyond`: whether
    'predicted' lies outside it, and `lo_bytes`/`hi_bytes`: the sizes the plan and this run read it at); absent for a
    preset's curve. A prediction extrapolated beyond the fit is no test of the fit (probe PC: a profile fitted from
    1 KiB..4 MiB, verified at 16 MiB, was 'MISMATCH 4.1x ... plan on the fitted profile', which the plan already
    was): its verdict says so and names the sizes to measure."""
    out = []
    for p in points:
        ratio = p.get("measured_over_predicted")
        if not (p.get("comparable") if comparable is None else comparable) or not ratio:
            continue
        if not (ratio > MISMATCH_RATIO or ratio < 1 / MISMATCH_RATIO):
            continue
        fit = (fits or {}).get(p["collective"])
        beyond = f"measured {ratio:.1f}x the prediction (beyond {MISMATCH_RATIO:g}x either way)"
        if fit is None:
            out.append(f"MISMATCH: {p['collective']} {beyond}: the plan's fabric model does not hold for it here; "
                       "measure the fabric (`commbench tune` or `sweep` + `fit`) and plan on the fitted profile")
        elif fit["beyond"]:
            out.append(f"{EXTRAPOLATED_MISMATCH}: {p['collective']} {beyond}, a prediction EXTRAPOLATED beyond what "
                       f"the profile measured for {fit['curve']} ({_fitted_span(fit)}): a check of the alpha-beta "
                       "curve's extension, not of the fit where it was measured; measure the sizes the plan uses: "
                       f"{resweep_text(fit)}")
        else:
            out.append(f"MISMATCH: {p['collective']} {beyond}, inside what the profile measured for {fit['curve']} "
                       f"({_fitted_span(fit)}): the fitted profile does not hold for it here (the fabric changed since "
                       "its results were measured, or a poor fit: see its fit warnings); measure it again and refit")
    return out


EXTRAPOLATED_MISMATCH = "MISMATCH ON AN EXTRAPOLATION"


def _fitted_span(fit: dict) -> str:
    if "phases" in fit:   # moe_all_to_all's dispatch and combine curves, each with its own range (probe PE)
        spans = "; ".join(f"{phase} {format_size(one['min_size_bytes'])} to {format_size(one['max_size_bytes'])}"
                          for phase, one in fit["phases"].items())
        return f"{spans}, group size(s) {', '.join(map(str, fit['group_sizes']))}"
    return (f"{format_size(fit['min_size_bytes'])} to {format_size(fit['max_size_bytes'])}, group size(s) "
            f"{', '.join(map(str, fit['group_sizes']))}")


def _size_option(size_bytes: int) -> str:
    """A size as bench's -b/-e take it (K/M/G/T = 1024^n), whole."""
    for suffix, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size_bytes >= mult and size_bytes % mult == 0:
            return f"{size_bytes // mult}{suffix}"
    return str(size_bytes)


def resweep_text(fit: dict) -> str:
    """The re-sweep that would measure what a verdict read beyond the fit: the curve's collective from the smaller of
    the fitted and the read sizes to the larger (the largest rounded up to a power of two, as -f 2 steps), on the
    group sizes read (`groups`)."""
    ranges = list(fit.get("phases", {}).values()) or [fit]   # each phase's curve its own range
    lo = min(*(int(r["min_size_bytes"]) for r in ranges), int(fit["lo_bytes"]))
    hi = max(*(int(r["max_size_bytes"]) for r in ranges), int(fit["hi_bytes"]))
    hi = 1 << (hi - 1).bit_length()
    groups = sorted(set(fit["groups"]))
    name = fit["collective"]
    command = ("" if name == "moe_all_to_all" else   # swept by tokens per rank, not -b/-e
               f" (`commbench bench {name} --nproc {max(groups)} -b {_size_option(lo)} -e {_size_option(hi)} -f 2 "
               "-O FILE`)")
    return (f"re-sweep {name} from {format_size(lo)} to {format_size(hi)} on {', '.join(map(str, groups))} rank(s)"
            f"{command}, fit it with the profile's other results and plan again")


def item_spec(item: CommItem):
    """The point verify_rank measures for `item` (the EP all-to-all's: its workload's plan at the item's tokens)."""
    from collectives import get_collective
    from collectives.base import PointSpec
    from commbench.dtypes import get_dtype

    if item.collective == "moe_all_to_all":
        return get_collective(item.collective).plan_specs(
            dict(item.params) | {"tokens_per_rank": [item.params["tokens_per_rank"]]}, len(item.groups[0]))[0][0]
    return PointSpec(size_bytes=item.size_bytes, dtype=get_dtype("float32"), params=dict(item.params))


def check_items_memory(items: list[CommItem], ranks: int, backend: str) -> None:
    """bench's check before launch (measure.bench.check_memory), on the largest point verify-plan measures: sizes up
    to --max-bytes, on `ranks` ranks sharing this machine on gloo."""
    from commbench.measure.bench import check_memory

    if backend == "cupy-nccl":   # as bench: CuPy allocates on the GPU it is given, checked there
        return
    item, spec = max(((i, item_spec(i)) for i in items), key=lambda pair: pair[1].size_bytes)
    check_memory(spec.size_bytes, ranks, backend, point=f"the plan's {item.label}",
                 advice="lower -e/--max-bytes (the plan's larger sizes are cut and flagged) or --nproc")


def verify_rank(rank_env, job: VerifyJob) -> VerifyOutcome:
    """Every rank: resolve the run's racks (resolve_on_ranks: NVML fabric, else host names, as bench), cut the plan's
    groups on them, measure each item on its groups; returns the outcome (rank 0's is reported). A collective that
    fails (a timeout, a peer gone) ends the run as it ends bench's: its row and those after it carry the error, led
    by the cause of the rank that failed first (measure.bench.first_failure_at), and no traceback leaves the rank."""
    import time

    from commbench.comm.topology import resolve_on_ranks
    from collectives import get_collective
    from commbench.measure.bench import GroupCache, first_failure_at
    from commbench.comm.backends import create_backend
    from commbench.measure.harness import GroupInfo, LoopOptions, measure_point
    from commbench.results.records import new_run_id

    backend = create_backend(job.backend, rank_env, job.timeout_s)
    comms, rows, run_id = GroupCache(backend), [], new_run_id()
    loop = LoopOptions(iters=job.iters, warmup_iters=job.warmup_iters, check=True)
    topology, items, flags = job.topology, job.items, job.flags
    error, failed_at_s = None, None
    try:
        try:   # exchanges with every peer: one gone or too slow for --timeout fails it
            here = resolve_on_ranks(None, backend)
        except RuntimeError as exc:
            error, failed_at_s = f"start-up failed: {first_line(exc)}", time.time()
        else:
            if here.racks != topology.racks:   # every rank gathered the same racks: each cuts the same groups
                kept, cut = plan_items(job.doc, backend.world_size, job.max_bytes, job.ctx, here)
                items, flags = tuple(kept), tuple(cut)
            topology = here
        for number, item in enumerate(items, 1):
            comm_size = len(item.groups[0]) if item.groups else backend.world_size
            if error is not None:
                rows.append(failed_row(item, comm_size, NOT_REACHED))
                continue
            if backend.rank == 0:   # a plan-sized point can take minutes on gloo: say which one is being measured
                print(f"verify-plan: measuring {number}/{len(items)}: {item.label}, {format_size(item.size_bytes)} "
                      f"on {len(item.groups)} group(s) of {len(item.groups[0]) if item.groups else 0} rank(s)",
                      file=sys.stderr, flush=True)
            collective, spec = get_collective(item.collective), item_spec(item)
            try:
                comm = comms.get(item.groups)
                rec = measure_point(backend, comm, collective, spec, loop, run_id=run_id,
                                    group=GroupInfo(layout=item.kind, num_groups=len(item.groups)))
            except (RuntimeError, ValueError, MemoryError) as exc:   # as bench: not a bug of ours, one line
                cause = first_failure_at(first_line(exc), backend.rank, f"commbench/verify-plan/item{number}")
                error, failed_at_s = f"failed while measuring {item.label}: {cause}", time.time()
                rows.append(failed_row(item, comm_size, error))
                continue
            # EP: dispatch + combine (the plan's pair), not the count exchange the workload also times
            time_us = rec.metrics.get("round_trip_us") or rec.time_us_median
            rows.append({"label": item.label, "time_us_median": time_us, "num_wrong": rec.num_wrong,
                         "size_bytes": rec.size_bytes, "group_size": comm.size, "metrics": dict(rec.metrics),
                         "error": None})
    finally:
        if error is None:   # after a failure its peers are gone: shutting down would wait on them (as bench)
            backend.shutdown()
    return VerifyOutcome(topology=topology, items=tuple(items), flags=flags, rows=rows, error=error,
                         failed_at_s=failed_at_s)


NOT_REACHED = "not measured: the run stopped at the failure before it"


def failed_row(item: CommItem, group_size: int, error: str) -> dict:
    """The row of an item with no measurement: `error` says why (it failed, or the run stopped before it)."""
    return {"label": item.label, "time_us_median": None, "num_wrong": None, "size_bytes": item.size_bytes,
            "group_size": group_size, "metrics": {}, "error": error}
