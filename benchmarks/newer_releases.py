"""The step model on releases newer than its calibration set: the check issue 24 names ("published runs
you have not seen: newer releases and GPUs, with the shipped calibration and after `commbench calibrate`
on the other GPUs of the same release"; goals: median <= 8%, MoE <= 10%, transfer <= 12%).

Runs: every pre-training row of Megatron-Bridge's performance tables for the NeMo 26.04 to 26.08
containers (docs/performance-summary.md and performance-summary-archive.md at 067f987, transcribed by
tools/published_tables.py into benchmarks/data/newer-release-runs.json). None of them is in
commbench/data/calibration-runs.json (25.09 to 26.02.01) and none is ever fitted by the shipped
calibration. Rows whose table carries a footnote (a known software regression, a mapping that did not
fit) are listed and counted apart.

- shipped: every row predicted with the shipped calibration (step/terms.py);
- transfer: per (release, GPU), `commbench calibrate`'s fit (calibrate/regularise.py: the terms the runs
  determine, a prior toward the shipped values) on that release's rows of the other GPUs, then that
  GPU's rows predicted as `plan` uses such a file: its software terms, the kernel terms shipped
  (step.terms.KERNEL_TERMS; every term the file's beside it, as a diagnostic). Each fit takes 1-2 min on 2 cores: `--transfer` names the releases (default
  none; `all` for every release).

- release steps: each row against the same configuration in the preceding release (calibration-level
  errors cancel): the check of the credit the model gives the features a release switched on.
- GPU steps: each row against the same model, release, GPU count and precision on another GPU (GB300 over
  GB200, B300 over B200, rack over HGX): the check of the hardware difference the model derives from sourced
  facts instead of a per-GPU factor.

- absent GB300 rows: the DGX-GB300 rows of the 26.02 and 26.02.01 tables (performance-summary-archive.md at
  067f987; benchmarks/data/heldout-gb300-2602-runs.json, 18 rows). calibration-runs.json holds those releases'
  GB200/B200/B300/H100 rows and no GB300 row, so these runs are unseen on a GPU the fit never saw, at releases it did:
  shipped, and (with --transfer naming 26.02 / 26.02.01, or all) after `commbench calibrate` on that release's
  calibration rows of the other GPUs. Two 26.02.01 Llama3-70B rows publish layouts that contradict their release
  recipe and that the memory model puts over HBM (MXFP8: MBS 2, PP4 without VP, 425 GB; NVFP4: MBS 2, PP1 with
  DDP, 670 GB of 297), while the recipe at v0.3.1 (LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 / NVFP4_V2 @9c9dd84:
  PP4 VP5 MBS1) is published by 26.04 / 26.04.01 within 1-6% of their throughput: they are predicted as published
  (an outside check would), and their errors (MXFP8 -30%) are the table's columns, not the model's.

    python benchmarks/newer_releases.py [--transfer 26.06,26.08|all] [--rows]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))   # cli_args, when imported as a module

from commbench.planner.calibrate.published import predict_runs, published_runs  # noqa: E402
from commbench.planner.calibrate.fit import kernel_terms_of  # noqa: E402
from commbench.planner.calibrate.regularise import calibrate_report  # noqa: E402
from cli_args import calibration_argument, calibration_of  # noqa: E402

ROWS = Path(__file__).parent / "data" / "newer-release-runs.json"
ABSENT_GB300 = Path(__file__).parent / "data" / "heldout-gb300-2602-runs.json"
GOALS = {"all": 8.0, "MoE": 10.0, "transfer": 12.0}


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def _summary(name: str, runs, errors) -> None:
    clean = [not _footnoted(r) for r in runs]
    moe = [r.model.is_moe for r in runs]
    pick = lambda keep: [abs(e) for e, k in zip(errors, keep) if k]  # noqa: E731
    print(f"{name}: median |error| all {_median(pick([True] * len(runs))):.1f}% over {len(runs)} rows "
          f"(MoE {_median(pick(moe)):.1f}%, dense {_median(pick([not m for m in moe])):.1f}%); without footnoted rows "
          f"{_median(pick(clean)):.1f}% (MoE {_median(pick([c and m for c, m in zip(clean, moe)])):.1f}%)")
    every = pick([True] * len(runs))
    if every:
        print(f"  tails: mean |error| {float(np.mean(every)):.1f}%, within 10% {sum(e <= 10 for e in every)} of "
              f"{len(every)}, worst {max(every):.1f}%")
    by_release = collections.defaultdict(list)
    for r, e in zip(runs, errors):
        by_release[r.row["release"]].append(abs(e))
    print("  by release: " + ", ".join(f"{k} {_median(v):.1f}% ({len(v)})" for k, v in sorted(by_release.items())))
    by_gpu = collections.defaultdict(list)   # signed: where the model sits high or low, not only how far
    for r, e in zip(runs, errors):
        by_gpu[f"{str(r.row['gpu']).removeprefix('DGX-')} {r.row.get('precision') or '?'}"].append(e)
    print("  median signed error by GPU and precision: " + ", ".join(
        f"{k} {_median(v):+.1f}% ({len(v)})" for k, v in sorted(by_gpu.items())))


def _footnoted(run) -> bool:
    return "footnote:" in str(run.row.get("notes", ""))


def _errors(runs, calibration) -> list[float]:
    pred = predict_runs(runs, calibration)
    return list((pred.predicted_tokens / pred.published_tokens - 1) * 100)


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in str(release).split(".") if x.isdigit())


def release_steps(runs, errors) -> list[tuple[str, float, float]]:
    """(label, published step, predicted step) for every row and the same configuration (model, system,
    GPUs, precision) in the preceding release that has it (footnoted rows left out): how much one container moved the same run,
    and how much the model says it did. Calibration-level errors shared by both releases cancel, so this
    isolates the credit the model gives the features a release switched on (fused grouped MLP,
    full-iteration graphs, EP overlap, FP8 attention)."""
    by_config = collections.defaultdict(list)
    for r, e in zip(runs, errors):
        if _footnoted(r):  # a known software regression is no step of the software's features
            continue
        key = (r.row["model"], r.row["gpu"], r.row["num_gpus"], r.row["precision"])
        by_config[key].append((_release_key(r.row["release"]), r, e))
    steps = []
    for rows in by_config.values():
        rows.sort(key=lambda x: x[0])
        for (_, old, e_old), (_, new, e_new) in zip(rows, rows[1:]):
            published = float(new.row["tokens_per_s_per_gpu"]) / float(old.row["tokens_per_s_per_gpu"])
            steps.append((f"{new.label} from {old.row['release']}", published,
                          published * (1 + e_new / 100) / (1 + e_old / 100)))
    return steps


def _steps_summary(steps, show_rows: bool) -> None:
    moved = [s for s in steps if abs(s[1] - 1) > 0.10]
    err = lambda sel: _median([abs(pred / pub - 1) * 100 for _, pub, pred in sel])  # noqa: E731
    print(f"release steps (same model, system, GPUs, precision; consecutive releases): median |predicted/published "
          f"step - 1| {err(steps):.1f}% over {len(steps)} pairs; where the published step is over 10%: "
          f"{err(moved):.1f}% over {len(moved)}")
    if show_rows:
        for label, pub, pred in sorted(moved):
            print(f"  {label:72s} published x{pub:.2f} predicted x{pred:.2f}")


# GPU pairs whose difference the step model derives from sourced facts (hardware.toml: SMs, power limit, SFU rate,
# memory; kernels.sustained_tensor_fraction) rather than a per-GPU factor (issue 24): newer die over older, and a
# rack (NVL72) GPU over its HGX sibling.
GPU_PAIRS = (("gb300-nvl72", "gb200-nvl72"), ("b300-hgx", "b200-hgx"), ("gb300-nvl72", "b300-hgx"),
             ("gb200-nvl72", "b200-hgx"))


def _pair_name(faster: str, slower: str) -> str:
    """'gb300-nvl72', 'gb200-nvl72' -> 'GB300/GB200'."""
    return f"{faster.split('-')[0].upper()}/{slower.split('-')[0].upper()}"


def _as_published(run) -> tuple:
    """(model, release, GPUs, precision) as a table spells them."""
    return run.row["model"], run.row["release"], run.row["num_gpus"], run.row["precision"]


def _as_modelled(run) -> tuple:
    """(model, release, GPUs, precision) as the zoo and the layout read them: the calibration set and the newer tables
    spell a model and a precision differently ('Llama3-70B' / 'LLAMA3_70B', 'FP8-MX' / 'MXFP8')."""
    return run.model.name, run.row["release"], run.row["num_gpus"], run.layout.precision.upper()


def gpu_steps(runs, errors, same_job=_as_published) -> list[tuple[str, str, str, float, float]]:
    """(GPU pair, precision, label, published ratio, predicted ratio) for every run and the same model, release, GPU
    count and precision on the pair's other GPU (GPU_PAIRS; footnoted rows left out), each at its own published
    layout and recipe: how much faster one GPU ran the same job, and how much the model says. Calibration-level
    errors shared by both cancel, so this isolates the hardware difference the model derives. `same_job`: the (model,
    release, GPUs, precision) a pair shares, as one table spells it (_as_modelled across two spellings)."""
    by_config = {}
    for r, e in zip(runs, errors):
        if not _footnoted(r):
            by_config[(*same_job(r), r.preset)] = (r, e)
    steps = []
    for (model, release, gpus, precision, preset), (new, e_new) in sorted(by_config.items(), key=lambda kv: kv[1][0].label):
        for faster, slower in GPU_PAIRS:
            if preset != faster or (model, release, gpus, precision, slower) not in by_config:
                continue
            old, e_old = by_config[(model, release, gpus, precision, slower)]
            published = float(new.row["tokens_per_s_per_gpu"]) / float(old.row["tokens_per_s_per_gpu"])
            steps.append((_pair_name(faster, slower), str(precision), new.label,
                          published, published * (1 + e_new / 100) / (1 + e_old / 100)))
    return steps


def _gpu_steps_summary(steps, show_rows: bool) -> None:
    print("GPU steps (same model, release, GPUs, precision on two GPUs, each at its published layout): "
          "published vs predicted ratio, medians")
    for pair in [_pair_name(*p) for p in GPU_PAIRS if any(s[0] == _pair_name(*p) for s in steps)]:
        mine = [s for s in steps if s[0] == pair]
        by_precision = collections.defaultdict(list)
        for _, precision, _, pub, pred in mine:
            by_precision[precision].append(pred / pub)
        print(f"  {pair:12s} {len(mine):3d} pairs: published x{_median([s[3] for s in mine]):.3f}, predicted "
              f"x{_median([s[4] for s in mine]):.3f}, median |predicted/published - 1| "
              f"{_median([abs(s[4] / s[3] - 1) * 100 for s in mine]):.1f}%; predicted/published by precision: "
              + ", ".join(f"{k} {_median(v):.2f} ({len(v)})" for k, v in sorted(by_precision.items())))
    if show_rows:
        for pair, _, label, pub, pred in steps:
            print(f"  {pair:12s} {label:58s} published x{pub:.2f} predicted x{pred:.2f}")


def _gpu_of(run) -> str:
    """'DGX-GB300' and 'GB300' alike: the calibration rows and the newer tables spell a system differently."""
    return str(run.row["gpu"]).removeprefix("DGX-").upper()


def transfer(runs, releases, calibration, pool=()) -> tuple[list, list, list]:
    """Per (release, GPU) in `releases`: fit on the release's other GPUs' rows (`runs` and `pool`, e.g. the
    calibration set's rows of that release; calibrate's prior: `calibration`), predict this GPU's rows of `runs` as
    `plan` does with that file (its kernel terms the prior's: calibrate.fit.kernel_terms_of); the third list: the
    same predicted with every term the fit's (the diagnostic that chose the split)."""
    held, errors, every_term = [], [], []
    for release in releases:
        mine = [r for r in runs if r.row["release"] == release]
        others = [r for r in pool if r.row.get("release") == release]
        for gpu in sorted({_gpu_of(r) for r in mine}):
            train = [r for r in mine + others if _gpu_of(r) != gpu]
            test = [r for r in mine if _gpu_of(r) == gpu]
            if not train:
                print(f"  {release} {gpu}: no other GPU's rows to calibrate on", file=sys.stderr)
                continue
            fitted = calibrate_report(train, calibration, loo=False).fitted
            errs = _errors(test, kernel_terms_of(fitted, calibration))
            every_term += _errors(test, fitted)
            print(f"  {release} {gpu}: calibrated on {len(train)} rows of the other GPUs, {len(test)} predicted, "
                  f"median |error| {_median([abs(e) for e in errs]):.1f}%", file=sys.stderr, flush=True)
            held += test
            errors += errs
    return held, errors, every_term


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transfer", default="", help="releases for the transfer check (comma list, or all)")
    parser.add_argument("--rows", action="store_true", help="print every row's error")
    calibration_argument(parser)
    args = parser.parse_args()
    calibration = calibration_of(parser, args.calibration)
    runs = published_runs(tuple(json.loads(ROWS.read_text())))
    refused = [r for r in runs if r.layout is None]
    runs = [r for r in runs if r.layout is not None]
    absent = [r for r in published_runs(tuple(json.loads(ABSENT_GB300.read_text()))) if r.layout is not None]
    known = sorted({r.row["release"] for r in runs})
    known_absent = sorted({r.row["release"] for r in absent})
    asked = [r for r in args.transfer.split(",") if r]
    if unknown := [r for r in asked if r != "all" and r not in known + known_absent]:
        parser.error(f"--transfer {','.join(unknown)}: no such release in {ROWS.name} or {ABSENT_GB300.name} "
                     f"(allowed: {', '.join(known + known_absent)}, or all)")
    releases = known if "all" in asked else [r for r in asked if r in known]
    releases_absent = known_absent if "all" in asked else [r for r in asked if r in known_absent]
    print(f"{len(runs)} rows modelled of {len(runs) + len(refused)} ({ROWS.name}); not modelled: "
          + (", ".join(sorted({r.row['model'] for r in refused})) or "none"))
    errors = _errors(runs, calibration)
    if args.rows:
        for r, e in sorted(zip(runs, errors), key=lambda x: x[0].label):
            print(f"  {r.label:58s} {e:+7.1f}{'  (footnoted)' if _footnoted(r) else ''}")
    _summary(f"predicted with {args.calibration or 'the shipped calibration'} vs published", runs, errors)
    _steps_summary(release_steps(runs, errors), args.rows)
    _gpu_steps_summary(gpu_steps(runs, errors), args.rows)
    if releases:
        held, errs, every_term = transfer(runs, releases, calibration)
        _summary(f"predicted after calibrate on the release's other GPUs vs published (transfer; {', '.join(releases)}; "
                 "the file's software terms, the kernel terms shipped, as plan uses it)", held, errs)
        _summary("  diagnostic, every term the file's (as plan used it before the kernel terms were scoped to the "
                 "file's GPUs)", held, every_term)
    _absent_gb300(absent, releases_absent, calibration, args.rows, args.calibration)
    print("goals (issue 24): " + ", ".join(f"{k} <= {v:g}%" for k, v in GOALS.items()))


def _absent_gb300(absent, releases, calibration, show_rows: bool, calibration_name: str | None = None) -> None:
    """The GB300 rows of the 26.02 / 26.02.01 tables (ABSENT_GB300): shipped, and after calibrate on the release's
    calibration rows of the other GPUs (`releases`)."""
    print(f"\n{len(absent)} GB300 rows of the 26.02 / 26.02.01 tables ({ABSENT_GB300.name}; absent from "
          "calibration-runs.json, which holds those releases' other GPUs)")
    errors = _errors(absent, calibration)
    if show_rows:
        for r, e in sorted(zip(absent, errors), key=lambda x: x[0].label):
            print(f"  {r.label:58s} {e:+7.1f}")
    _summary(f"predicted with {calibration_name or 'the shipped calibration'} vs published", absent, errors)
    labels = {r.label for r in absent}   # the GB300 row over the same run on GB200 / B300 (a calibration row)
    steps = gpu_steps(*_with_pool(absent, errors, calibration), same_job=_as_modelled)
    _gpu_steps_summary([s for s in steps if s[2] in labels], show_rows)
    if releases:
        pool = [r for r in published_runs() if r.layout is not None]
        held, errs, every_term = transfer(absent, releases, calibration, pool)
        _summary(f"predicted after calibrate on the release's calibration rows of the other GPUs vs published "
                 f"(transfer; {', '.join(releases)}; the kernel terms shipped, as plan uses the file)", held, errs)
        _summary("  diagnostic, every term the file's", held, every_term)


def _with_pool(absent, errors, calibration) -> tuple[list, list]:
    """The absent rows with the calibration set's rows of the same releases (their shipped errors): the pairs
    gpu_steps forms are GB300 over GB200 / B300 at one release, layout and precision as each published."""
    releases = {r.row["release"] for r in absent}
    pool = [r for r in published_runs() if r.layout is not None and r.row.get("release") in releases]
    return absent + pool, list(errors) + _errors(pool, calibration)


if __name__ == "__main__":
    main()
