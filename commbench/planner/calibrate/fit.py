"""Fitting the step model's terms to published runs (benchmarks/planner_calibration.py, and the start
of `commbench calibrate`'s regularised fit): the terms' physical bounds, the per-run weights (each
model family x system group weighs the same; duplicate configurations across releases share one
unit), the robust (Huber) loss of log(predicted / measured) tokens/s/GPU and the coordinate search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from commbench.planner.calibrate.published import RUN_FRAMEWORKS, PublishedRun, predict_runs, run_framework  # noqa: F401
from commbench.planner.step.terms import CALIBRATED, FITTED_TERMS, KERNEL_TERMS, MOE_TERMS, Calibration

# Physical ranges: large cuBLAS/TE GEMMs reach 45-80% of the dense datasheet peak in training (power
# cap, tile quantisation); bf16 grouped (expert) GEMMs 25-90% (the 8-bit ones are not fitted: terms.py);
# flash attention's tensor-core part 25-75% (FlashAttention-3, arXiv 2407.08608:
# up to 75% on H100 forward, less backward); a GEMM moves at least its compulsory operand traffic
# (gemm_traffic_factor >= 1); host launch time per layer per micro-batch (forward + backward, ~150-400
# kernel launches at 5-20 us of Python/C++ dispatch each; exposed only beyond the layer's GPU time) at most
# 10 ms, and one device-to-host sync (a round trip plus the relaunch
# that refills the queue) at most 200 us. Without these bounds a fit that lacks one system's rows
# wanders into unphysical corners (traffic 0.25x compulsory, 2 ms syncs) that no row contradicts.
BOUNDS = {"gemm_efficiency_hopper": (0.45, 0.8), "gemm_efficiency_blackwell": (0.45, 0.8),
          "fp4_gemm_ratio": (0.2, 1.0), "grouped_gemm_efficiency": (0.25, 0.9),
          "grouped_gemm_8bit_efficiency": (0.25, 0.9), "attention_efficiency": (0.25, 0.75),
          "hbm_efficiency": (0.3, 0.95), "layer_overhead_s": (0.0, 1e-2), "graph_layer_residual": (0.05, 0.5),
          "moe_sync_s": (0.0, 2e-4), "all_to_all_efficiency": (0.1, 1.0), "overlap_efficiency": (0.3, 1.0),
          "ep_overlap_efficiency": (0.3, 1.0),
          "gemm_traffic_factor": (1.0, 10.0), "expert_gemm_kernel_s": (0.0, 5e-5)}


def hard_range(term: str) -> tuple[float, float]:
    """What a term may not cross even in a diagnostic fit: an efficiency is a fraction of a peak, (0, 1];
    a time stays >= 0 and a traffic factor >= 1, each below ten times its BOUNDS ceiling.
    benchmarks/planner_calibration.py --open-bounds refits with a bound-held term's range widened to
    this, to show where the rows would put it and which other terms it trades against."""
    lo, hi = BOUNDS[term]
    if term.endswith("_s"):
        return 0.0, 10.0 * hi
    return (1.0, 10.0 * hi) if lo >= 1.0 else (1e-3, 1.0)


@dataclass(frozen=True, kw_only=True)
class CalibrationFile:
    """A `commbench calibrate -O` file as read: its terms, and the fitted terms it does not set (a file of an older
    commbench fitted fewer), which are the shipped calibration's (step.terms.CALIBRATED); a plan names them."""

    path: str
    calibration: Calibration
    shipped_terms: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()   # the GPUs of the runs it was fitted on (its "runs"); () for a file that names none
    runs: tuple[str, ...] = ()   # its "runs" as written (step.terms.fitted_runs); () for a file written before them
    written_by: str | None = None   # its "commbench_version": the release that wrote it
    step_model: str | None = None   # its "step_model": the step model (step.terms.STEP_MODEL) its terms were fitted to
    terms_fitted: tuple[str, ...] | None = None     # the terms its fits determined; None: not recorded (unknown)
    terms_at_bound: tuple[str, ...] | None = None   # those of them at a BOUNDS end; None: not recorded
    # the release a log's run ran under, as `calibrate --software` named it, by run ("run_releases"; a log's run is
    # listed with release "user"): the release of a run it does not name is unknown
    run_releases: tuple[tuple[str, str], ...] = ()

    def software_note(self, release: str, precision: str) -> str:
        """'' when every run the file was fitted on ran at the plan's release (`release`, as plan resolves --software)
        and precision; else one line naming both (runs_software), and how far its terms carry over."""
        return software_note(runs_software(self.runs, dict(self.run_releases)), release, precision)

    def version_note(self) -> str:
        """'' for a file fitted to this commbench's step model (step.terms.STEP_MODEL); else step_model_note's line."""
        return step_model_note(self.path, self.step_model, self.written_by)

    def bounds_note(self) -> str:
        """'' when every term lies in its BOUNDS (where `commbench calibrate` fits it); else one line naming those
        that do not: inside the hard range (read_calibration_file refuses beyond it), but no fit ends there, so a
        hand edit or a benchmark's held value."""
        outside = [f"{t}={getattr(self.calibration, t):.4g} ({BOUNDS[t][0]:g} to {BOUNDS[t][1]:g})" for t in BOUNDS
                   if not BOUNDS[t][0] <= getattr(self.calibration, t) <= BOUNDS[t][1]]
        if not outside:
            return ""
        return (f"calibration file {self.path}: {', '.join(outside)} outside the range a fit reaches: not what "
                "`commbench calibrate` writes (a hand edit?); used as it stands")

    def warnings(self, gpu_name: str | None = None) -> list[str]:
        """The lines a plan, tune or calibrate prints about the file before using it (bounds_note, other_gpu_note)."""
        return [w for w in (self.version_note(), self.bounds_note(), self.other_gpu_note(gpu_name) if gpu_name else "")
                if w]

    def fitted_on(self, gpu_name: str) -> bool:
        """Whether the file's runs include `gpu_name`. False for a file whose runs name no GPU (none recorded, or
        none commbench knows): it cannot show it was fitted on `gpu_name`, so its kernel terms are not used there
        (README, `--calibration`: "only on the GPUs of its runs")."""
        return gpu_name.lower() in self.gpus

    def for_gpu(self, gpu_name: str) -> tuple[Calibration, tuple[str, ...]]:
        """The terms a plan of `gpu_name` uses, and those of them that are the file's no more: on a GPU its runs do not
        include, its kernel terms (step.terms.KERNEL_TERMS) are the shipped values; the terms of the software and its
        schedule carry (terms.py has the measurement that chose the split)."""
        if self.fitted_on(gpu_name):
            return self.calibration, ()
        # a kernel term the file does not set is one of shipped_terms already: named once, there
        return (kernel_terms_of(self.calibration, CALIBRATED),
                tuple(t for t in KERNEL_TERMS if t not in self.shipped_terms))

    def other_gpu_note(self, gpu_name: str) -> str:
        """'' when the file's runs include `gpu_name`; else one line: which GPUs its runs name (or that they name
        none), and which terms are the file's and which the shipped ones (for_gpu)."""
        if self.fitted_on(gpu_name):
            return ""
        carried = [t for t in FITTED_TERMS if t not in KERNEL_TERMS]
        shipped_here = ", ".join(self.for_gpu(gpu_name)[1])
        if self.gpus:
            fitted = f"was fitted on runs of {', '.join(self.gpus)} only"
        elif self.runs:
            fitted = (f"lists {len(self.runs)} run(s) that name no GPU commbench knows ({self.runs[0][:60]!r}), so it "
                      f"cannot show it was fitted on {gpu_name.lower()}")
        else:
            fitted = (f"records no runs it was fitted on (a file written before runs were recorded has none), so "
                      f"it cannot show it was fitted on {gpu_name.lower()}")
        return (f"calibration file {self.path} {fitted}; for "
                f"{gpu_name.lower()}: its kernel terms ({shipped_here}) are the shipped values, and only "
                f"the software's ({', '.join(carried)}) are the file's (carried to a GPU they were not fitted on, "
                "kernel terms made predictions worse than the shipped ones: step.terms.KERNEL_TERMS; refit with runs "
                "of this GPU)")

    def note(self) -> str:
        """'' when the file sets every fitted term; else one line naming the terms filled from the shipped values."""
        if not self.shipped_terms:
            return ""
        return (f"calibration file {self.path} sets no {', '.join(self.shipped_terms)}: these {len(self.shipped_terms)} "
                f"of the {len(FITTED_TERMS)} fitted terms are the shipped calibration's values, not fitted to your runs "
                "(a file of an older commbench fitted fewer terms)")


FRAMEWORK_NAMES = {"megatron": "Megatron-LM", "torchtitan": "TorchTitan", "unstated": "JSON rows of no stated framework"}


def framework_note(path: str, framework: str) -> str:
    """'' when the calibration file's runs ran under `framework` (plan's --framework) alone; else one line: its
    software terms (host time per layer, overlap, MoE synchronisations) were fitted to another framework's runs. A
    file that records no frameworks (written before they were) is named for a torchtitan plan, whose software is
    not the published Megatron-Bridge runs' the shipped terms were fitted to."""
    import json

    from commbench.errors import read_user_file
    try:
        said = json.loads(read_user_file(path, "calibration file")).get("frameworks")
    except (ValueError, AttributeError):
        return ""
    software = "its software terms (host time per layer, overlap, MoE synchronisations)"
    if not isinstance(said, list) or not all(isinstance(f, str) for f in said):
        return (f"note: calibration file {path} records no framework its runs ran under; {software} may be another "
                f"framework's than {FRAMEWORK_NAMES[framework]}'s") if framework == "torchtitan" else ""
    if said == [framework]:
        return ""
    return (f"note: calibration file {path} was fitted on runs of {', '.join(FRAMEWORK_NAMES.get(f, f) for f in said)}"
            f": {software} are theirs, applied here to a {FRAMEWORK_NAMES[framework]} plan")


def kernel_terms_of(fitted: Calibration, shipped: Calibration) -> Calibration:
    """`fitted` with the kernel terms (step.terms.KERNEL_TERMS) of `shipped`: a calibration fitted on other GPUs'
    runs, as a plan of a GPU it was not fitted on uses it (CalibrationFile.for_gpu; benchmarks/newer_releases.py
    --transfer predicts the same way)."""
    return fitted.with_values(**{t: getattr(shipped, t) for t in KERNEL_TERMS})


# calibrate's run_key: "MODEL Nx GPU PRECISION ...", in files written before "MODEL GPUxN PRECISION ..."
RUN_GPU = re.compile(r"\s\d+x\s(\S+)\s|\s(\S+)x\d+\s")


def fitted_gpus(path: str) -> tuple[str, ...]:
    """The GPUs (hardware.toml names) of the runs a calibration file lists (step.terms.fitted_runs), in order."""
    from commbench.planner.step.terms import fitted_runs
    return gpus_of_runs(fitted_runs(path))


def gpus_of_runs(runs: list[str]) -> tuple[str, ...]:
    """The GPUs (hardware.toml names) the run names of a calibration file name, in order; a name of no known GPU
    adds none."""
    from commbench.data.reference import gpu_names
    from commbench.planner.calibrate.published import _preset_name
    found: dict[str, None] = {}
    for run in runs:
        match = RUN_GPU.search(run)
        gpu = preset_gpu(_preset_name(match.group(1) or match.group(2)) if match else None)
        if gpu in gpu_names():
            found[gpu] = None
    return tuple(found)


def preset_gpu(preset: str | None) -> str | None:
    """The GPU of a system preset name ("gb300-nvl72" -> "gb300"), as a calibration file's runs name it."""
    return preset.split("-")[0] if preset else None


# calibrate's run_key as written: 'MODEL Nx GPU PRECISION [RELEASE] tp..' (files written before: 'MODEL GPUxN ...'); a
# precision of '?' is a row without one (a 25.09 row: FP8)
LISTED_RUN = re.compile(r"(?P<model>\S+) (?:(?P<num>\d+)x (?P<gpu>\S+)|(?P<old_gpu>\S+)x(?P<old_num>\d+)) "
                        r"(?P<precision>\S+)(?: (?P<release>(?!tp\d)\S+))? (?P<rest>tp\d+\b.*)")
UNKNOWN_RELEASE = "release unknown"


def runs_software(runs, run_releases: dict[str, str]) -> list[tuple[str, str]]:
    """(release, PRECISION) of each listed run (LISTED_RUN) it can read: the release as the run names it, or for a
    log's run ("user": its own software) the one `calibrate --software` recorded (`run_releases`), else
    UNKNOWN_RELEASE; the precision as the step model reads it (published.precision_of), upper case."""
    from commbench.planner.calibrate.published import precision_of
    from commbench.planner.layout.recipes import normalised_release
    out = []
    for run in runs:
        match = LISTED_RUN.match(run)
        if match is None:
            continue
        label = match.group("precision")
        try:
            precision = precision_of(None if label == "?" else label).upper()
        except ValueError:
            precision = label.upper()
        release = match.group("release") or ""
        release = run_releases.get(run, "") if release in ("", "user") else normalised_release(release)
        out.append((release or UNKNOWN_RELEASE, precision))
    return out


def software_note(software: list[tuple[str, str]], release: str, precision: str) -> str:
    """One line where the runs a calibration file was fitted on (`software`: runs_software) ran at another release or
    precision than the plan (`release` as plan resolves it, `precision`), or at a release not recorded; '' where every
    run is the plan's (or none is read). Its terms are fitted to those runs: the kernel efficiencies to their GEMMs'
    number format, the software terms (host time per layer, overlap, MoE synchronisations) to their release."""
    from commbench.planner.layout.recipes import resolve_release
    if not software:
        return ""
    plan_precision = precision.upper()
    other_release = [r for r, _ in software if r == UNKNOWN_RELEASE or resolve_release(r)[0] != release]
    other_precision = [p for _, p in software if p != plan_precision]
    if not other_release and not other_precision:
        return ""
    counts: dict[str, int] = {}
    for r, p in software:
        counts[f"{r} {p}"] = counts.get(f"{r} {p}", 0) + 1
    ran = ", ".join(f"{k}" + (f" ({n} runs)" if n > 1 else "") for k, n in counts.items())
    carry = []
    if other_precision:
        carry.append(f"the GEMM efficiencies fitted at {', '.join(dict.fromkeys(other_precision))} are applied at "
                     f"{plan_precision} through the step model's own precision ratios")
    if other_release:
        known = [r for r in dict.fromkeys(other_release) if r != UNKNOWN_RELEASE]
        carry.append("the software terms (host time per layer, overlap, MoE synchronisations) fitted to "
                     + (f"{', '.join(known)}'s software" if known else "")
                     + (" and " if known and UNKNOWN_RELEASE in other_release else "")
                     + ("runs of a release not recorded (name a log's with `calibrate --software`)"
                        if UNKNOWN_RELEASE in other_release else "")
                     + f" are applied to {release}'s")
    return (f"calibration runs: {ran}; this plan: {release} {plan_precision}: the fitted terms carry over only as far "
            f"as the step model's release and precision differences are right ({'; '.join(carry)})")


def step_model_note(path: str, step_model: str | None, written_by: str | None) -> str:
    """'' for a calibration file fitted to this commbench's step model (step.terms.STEP_MODEL); else one line naming
    the file and both step models: its terms were fitted to another one (or to one it does not record: a file written
    before step models were recorded, whose release string says nothing, commbench being 0.1.0 throughout), and are
    read as this one's. `plan` prints it and keeps it among plan.json's assumptions (emit.plan.calibration_inputs)."""
    from commbench import __version__
    from commbench.planner.step.terms import STEP_MODEL
    if step_model == STEP_MODEL:
        return ""
    by = f"was written by commbench {written_by}" if written_by else "records no commbench version"
    if step_model is not None:
        return (f"calibration file {path} was fitted to step model {step_model} ({by.replace('was ', '')}"
                f"); this commbench ({__version__}) has step model {STEP_MODEL}: its terms are read as this one's "
                "(refit with `commbench calibrate -O`)")
    return (f"calibration file {path} {by} and records no step model (written before step models were "
            f"recorded), so the step model its terms were fitted to is unknown; this commbench ({__version__}) has "
            f"step model {STEP_MODEL}: its terms are read as this one's (refit with `commbench calibrate -O` to be "
            "sure)")


def calibration_provenance(path: str) -> dict[str, str | None]:
    """A calibration file's {"step_model", "commbench_version"} as it records them (None where it does not)."""
    return _recorded(path, step_model="step_model", commbench_version="commbench_version")


def read_calibration_file(path: str) -> CalibrationFile:
    """A `commbench calibrate -O` file (step.terms.read_calibration) whose every term lies in its hard_range: a fit
    stays inside BOUNDS, so a term beyond hard_range (layer_overhead_s = 5 s per layer) is a hand edit or a corrupt
    file, refused in one line naming the term, not planned with. The terms it does not set are named
    (CalibrationFile.shipped_terms), not filled silently."""
    from commbench.errors import invalid
    from commbench.planner.step.terms import fitted_runs, read_calibration, recorded_fit

    cal, missing = read_calibration(path)
    for term in BOUNDS:
        lo, hi = hard_range(term)
        value = getattr(cal, term)
        if not lo <= value <= hi:
            raise invalid(term, value, f"from {lo:g} to {hi:g} (its physical range; {path})")
    runs = fitted_runs(path)   # a corrupt "runs" is refused here: they decide where its kernel terms are used
    terms_fitted, at_bound = recorded_fit(path)
    return CalibrationFile(path=path, calibration=cal, shipped_terms=missing, gpus=gpus_of_runs(runs), runs=tuple(runs),
                           terms_fitted=terms_fitted, terms_at_bound=at_bound,
                           run_releases=tuple(recorded_run_releases(path).items()),
                           **_recorded(path, written_by="commbench_version", step_model="step_model"))


def recorded_run_releases(path: str) -> dict[str, str]:
    """A calibration file's "run_releases" (run -> the release `calibrate --software` named for a log's run); {} for
    a file without it. One that is not an object of release names is refused in one line naming the field."""
    import json

    from commbench.errors import CommbenchError, read_user_file
    from commbench.planner.layout.recipes import RELEASE_NAME
    said = json.loads(read_user_file(path, "calibration file")).get("run_releases", {})
    if not isinstance(said, dict) or not all(isinstance(k, str) and isinstance(v, str) and RELEASE_NAME.fullmatch(v)
                                             for k, v in said.items()):
        raise CommbenchError(f"calibration file {path}: field 'run_releases' = {json.dumps(said)[:80]}; allowed: an "
                             "object of run -> NeMo release (\"YY.MM\"), as `commbench calibrate --software -O` "
                             "writes it")
    return said


def _recorded(path: str, **fields: str) -> dict[str, str | None]:
    """A calibration file's string fields by the names given (None where it records none), from one read."""
    import json

    from commbench.errors import read_user_file
    data = json.loads(read_user_file(path, "calibration file"))
    return {name: data.get(key) if isinstance(data.get(key), str) else None for name, key in fields.items()}


def load_calibration_file(path: str) -> Calibration:
    """read_calibration_file's terms alone (the benchmarks' --calibration)."""
    return read_calibration_file(path).calibration


HUBER_DELTA = 0.1  # |log error| beyond which the loss grows linearly (~10%): outlier rows pull less


def family_of(model_name: str) -> str:
    """Model family for weighting: 'deepseek', 'qwen3', 'gpt-oss', 'llama' (the name's first word)."""
    return re.split(r"[-.\d]", model_name.lower(), maxsplit=1)[0] or model_name.lower()


def model_family(model) -> str:
    """family_of a run's model (a ModelSpec): of its zoo name, or for hf:PATH (named after its path) of its
    architecture: the zoo model whose architecture it has (layout/recipe_model.py, as plan reads that model's
    recipes), else its config's model_type ('llama', 'qwen3_moe', 'deepseek_v3')."""
    if not model.name.startswith("hf:"):
        return family_of(model.name)
    from commbench.planner.layout.recipe_model import recipe_model
    same = recipe_model(model)
    if same != model.name:
        return family_of(same)
    kind = model.extra.get("model_type")
    return family_of(kind) if kind else family_of(model.name.removeprefix("hf:"))


def median_error_by_family(runs: list[PublishedRun], abs_errors_pct) -> dict[str, tuple[float, int]]:
    """Median |error| and run count per model family (family_of), and for the hybrid (Mamba) and
    FSDP runs (and HSDP, FSDP over part of DP) as groups of their own; `runs` are the modelled runs in `abs_errors_pct` order."""
    groups: dict[str, list[float]] = {}
    for r, e in zip(runs, abs_errors_pct):
        labels = [model_family(r.model)] + (["hybrid (Mamba)"] if r.model.is_hybrid else []) + \
            (["FSDP"] if r.layout.fsdp else []) + (["HSDP"] if r.layout.fsdp_replicas > 1 else [])
        for label in labels:
            groups.setdefault(label, []).append(float(e))
    return {k: (float(np.median(v)), len(v)) for k, v in sorted(groups.items())}


def fit_weights(runs: list[PublishedRun]) -> np.ndarray:
    """Weight per modelled run: duplicates (same model, system, GPUs, precision, layout across
    releases) share one unit, then every (model family x system) group gets the same total."""
    modelled = [r for r in runs if r.layout is not None]
    config = [(r.model.name, r.preset, int(r.row["num_gpus"]), r.layout) for r in modelled]
    dup = {c: config.count(c) for c in set(config)}
    w = np.array([1.0 / dup[c] for c in config])
    groups = [(model_family(r.model), r.preset) for r in modelled]
    totals: dict[tuple, float] = {}
    for g, wi in zip(groups, w):
        totals[g] = totals.get(g, 0.0) + wi
    return np.array([wi / totals[g] for g, wi in zip(groups, w)]) if modelled else w


def huber(x: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    ax = np.abs(x)
    return np.where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta))


def fit_loss(runs: list[PublishedRun], cal: Calibration, weights: np.ndarray | None = None) -> float:
    """Weighted Huber loss of log(predicted / measured) tokens/s/GPU over the modelled runs."""
    p = predict_runs(runs, cal)
    w = fit_weights(runs) if weights is None else weights
    err = np.log(np.maximum(p.predicted_tokens, 1e-9) / p.published_tokens)
    return float(np.sum(w * huber(err)) / max(np.sum(w), 1e-12))


def bound_pullers(runs: list[PublishedRun], cal: Calibration, term: str, step: float = 0.1,
                  weights: np.ndarray | None = None) -> list[tuple[PublishedRun, float, float]]:
    """Which runs hold `term` at its bound (fit.BOUNDS): (run, log error at `cal`, its share of the loss
    increase when the term moves `step` (relative) into its range), the runs whose loss rises, biggest
    first. The loss is fit_loss's weighted Huber term per run; the shares of all runs sum to the change
    of fit_loss. A term at its bound is a form the rows disagree with (issue 24): these are the rows."""
    modelled = [r for r in runs if r.layout is not None]
    lo, hi = BOUNDS[term]
    value = getattr(cal, term)
    inside = value * (1 + step) if abs(value - lo) <= abs(hi - value) else value / (1 + step)
    moved = cal.with_values(**{term: float(np.clip(inside, lo, hi))})
    w = fit_weights(modelled) if weights is None else weights
    errs = []
    for c in (cal, moved):
        p = predict_runs(modelled, c)
        errs.append(np.log(np.maximum(p.predicted_tokens, 1e-9) / p.published_tokens))
    share = w * (huber(errs[1]) - huber(errs[0])) / max(float(np.sum(w)), 1e-12)
    order = [j for j in np.argsort(-share) if share[j] > 0]
    return [(modelled[j], float(errs[0][j]), float(share[j])) for j in order]


def coordinate_search(runs, start: Calibration, terms, rounds: int, loss=None,
                      bounds: dict[str, tuple[float, float]] | None = None) -> Calibration:
    """Per term in turn, multiplicative steps within `bounds` (default BOUNDS) that lower
    `loss(calibration)` (default: the weighted Huber log loss, fit_loss), at shrinking step sizes.
    Deterministic."""
    bounds = BOUNDS if bounds is None else bounds
    if loss is None:
        weights = fit_weights(runs)

        def loss(cal: Calibration) -> float:
            return fit_loss(runs, cal, weights)

    best, best_loss = start, loss(start)
    for round_index in range(rounds):
        step = 0.5 / (1 + round_index)
        for _sweep in range(3):           # sweep again at this step size while it still improves
            before = best_loss
            for name in terms:
                lo, hi = bounds[name]
                value = getattr(best, name)
                for factor in (1 + step, 1 / (1 + step), 1 + step / 3, 1 / (1 + step / 3)):
                    trial_value = float(np.clip(value * factor if value > 0 else hi * step / 10, lo, hi))
                    trial = best.with_values(**{name: trial_value})
                    trial_loss = loss(trial)
                    if trial_loss < best_loss:
                        best, best_loss, value = trial, trial_loss, trial_value
            if best_loss > before * (1 - 1e-3):
                break
    return best


def fit_calibration(runs: list[PublishedRun], start: Calibration = CALIBRATED, rounds: int = 5,
                    terms: tuple[str, ...] = FITTED_TERMS,
                    bounds: dict[str, tuple[float, float]] | None = None) -> Calibration:
    """Coordinate search minimising the weighted Huber log loss (fit_loss) within `bounds` (default
    BOUNDS): every term on every row, then the MoE-only terms (MOE_TERMS) again on the MoE rows alone.
    Terms the rows cannot constrain (no row of that kind, e.g. no Hopper run) keep their start value.
    Deterministic."""
    modelled = [r for r in runs if r.layout is not None]
    if not modelled:
        raise ValueError("no modelled runs to fit")
    gpus = {r.preset for r in modelled}
    usable = [t for t in terms if not (t == "gemm_efficiency_hopper" and not gpus & HOPPER_PRESETS)
              and not (t == "gemm_efficiency_blackwell" and not gpus - HOPPER_PRESETS)
              and not (t == "fp4_gemm_ratio" and not any(r.layout.precision == "nvfp4" for r in modelled))]
    moe = [r for r in modelled if r.model.is_moe]
    if not moe:
        usable = [t for t in usable if t not in MOE_TERMS]
    best = coordinate_search(modelled, start, tuple(usable), rounds, bounds=bounds)
    moe_terms = tuple(t for t in usable if t in MOE_TERMS)
    if moe and moe_terms:
        best = coordinate_search(moe, best, moe_terms, max(2, rounds - 2), bounds=bounds)
    return best


HOPPER_PRESETS = frozenset({"h100-hgx", "h200-hgx", "h800-hgx"})
