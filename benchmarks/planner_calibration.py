"""Predicted vs published tokens/s/GPU for every calibration row; MoE and dense errors apart; a
leave-one-GPU-out table (fit without that GPU's rows, predict them); and the held-out GB300 runs
(benchmarks/data/heldout-gb300-runs.json: Megatron-Bridge 25.11 DGX-GB300 table, no GB300 row is in
the calibration set) predicted with the calibration in use, never fitted.

    python benchmarks/planner_calibration.py            # calibrated terms in use + leave-one-GPU-out
    python benchmarks/planner_calibration.py --fit      # refit from FIT_START first and print the terms
    python benchmarks/planner_calibration.py --no-logo  # skip the leave-one-GPU-out refits (a few min)
    python benchmarks/planner_calibration.py --no-loro  # skip the leave-one-release-out refits
    python benchmarks/planner_calibration.py --open-bounds  # also refit each bound-held term with its bound opened
    python benchmarks/planner_calibration.py --fit --hold overlap_efficiency=0.6 -O cal.json  # a hypothesis: the
        # term held at a value in every fit here (in-sample, leave-one-GPU-out, leave-one-release-out), the fitted
        # calibration written for benchmarks/newer_releases.py and vendor_layouts.py --calibration cal.json
    python benchmarks/planner_calibration.py --calibration cal.json   # the tables for a calibration file

Leave-one-release-out (LORO): for each newer release line (a patch container such as 26.02.01 belongs to
its line, 26.02), fit on the rows of the older lines only and predict that line's rows; the newest line's
figure is the headline. Every row is modelled with its own release's recipe (layout/recipes.py).
A fitted term at a bound is printed with the rows holding it there (calibrate.fit.bound_pullers: each row's share
of the loss rise were the term moved 10% into its range), the rows whose physics the bound points at.
Bars: issue 13: in-sample median |error| MoE <= 8%, dense <= 6%; leave-one-GPU-out MoE <= 12%.
issue 24: LORO median <= 12%; held-out GB300 <= 8%; no fitted term at a bound.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from cli_args import calibration_argument, calibration_of, parser_for
from commbench.errors import CommbenchError
from commbench.planner.step.terms import CALIBRATED, FIT_START, FITTED_TERMS, PUBLISHED_FIT_TERMS, save_calibration
from commbench.planner.calibrate.published import predict_runs, published_runs
from commbench.planner.calibrate.fit import BOUNDS, bound_pullers, fit_calibration, hard_range

HELD_OUT = Path(__file__).parent / "data" / "heldout-gb300-runs.json"


def _medians(p) -> tuple[float, float, int, int]:
    moe = np.array([r.model.is_moe for r in p.runs], dtype=bool)
    err = p.abs_pct_error
    med = lambda x: float(np.median(x)) if len(x) else float("nan")  # noqa: E731
    return med(err[moe]), med(err[~moe]), int(moe.sum()), int((~moe).sum())


def parse_holds(texts: list[str]) -> dict[str, float]:
    """--hold TERM=VALUE (repeatable) -> {term: value}; a one-line ValueError naming what is wrong."""
    holds: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or name not in FITTED_TERMS:
            raise ValueError(f"--hold {text!r}: give TERM=VALUE with TERM one of {', '.join(FITTED_TERMS)}")
        try:
            holds[name] = float(value)
        except ValueError:
            raise ValueError(f"--hold {text!r}: {value.strip()!r} is not a number") from None
    try:
        CALIBRATED.with_values(**holds)   # the terms' own range checks (an efficiency in (0, 1], ...)
    except ValueError as exc:
        raise ValueError(f"--hold: {exc}") from None
    return holds


def fit_terms(holds: dict[str, float]) -> tuple[str, ...]:
    """The published-run fit's terms less the held ones."""
    return tuple(t for t in PUBLISHED_FIT_TERMS if t not in holds)


def leave_one_gpu_out(runs, start=FIT_START, rounds: int = 5,
                      terms: tuple[str, ...] = PUBLISHED_FIT_TERMS) -> list[tuple[str, int, float, float]]:
    """(gpu, rows, MoE median |err| %, dense median |err| %) predicting each GPU with a fit on the others."""
    out = []
    for gpu in sorted({str(r.row["gpu"]) for r in runs if r.layout is not None}):
        train = [r for r in runs if r.layout is not None and str(r.row["gpu"]) != gpu]
        test = [r for r in runs if r.layout is not None and str(r.row["gpu"]) == gpu]
        cal = fit_calibration(train, start=start, rounds=rounds, terms=terms)
        moe_med, dense_med, _, _ = _medians(predict_runs(test, cal))
        out.append((gpu, len(test), moe_med, dense_med))
    return out


def release_line(release: str) -> tuple[int, ...]:
    """'26.02.01' -> (26, 2): a patch container belongs to its release line."""
    try:
        return tuple(int(p) for p in str(release).split(".")[:2])
    except ValueError:
        return (0,)


def leave_one_release_out(runs, start=FIT_START, rounds: int = 5, terms: tuple[str, ...] = PUBLISHED_FIT_TERMS
                          ) -> list[tuple[str, int, int, float, float, float]]:
    """(line, train rows, test rows, all / MoE / dense median |err| %) predicting each newer release line with
    a fit on the rows of the older lines only."""
    modelled = [r for r in runs if r.layout is not None]
    lines = sorted({release_line(r.row.get("release")) for r in modelled})
    out = []
    for line in lines[2:]:   # at least two older lines to fit on
        train = [r for r in modelled if release_line(r.row.get("release")) < line]
        test = [r for r in modelled if release_line(r.row.get("release")) == line]
        cal = fit_calibration(train, start=start, rounds=rounds, terms=terms)
        p = predict_runs(test, cal)
        moe_med, dense_med, _, _ = _medians(p)
        name = ".".join(f"{part:02d}" for part in line)
        out.append((name, len(train), len(test), float(np.median(p.abs_pct_error)), moe_med, dense_med))
    return out


def at_bounds(cal, terms=PUBLISHED_FIT_TERMS) -> list[str]:
    """Fitted terms sitting at (within 0.5% of) a bound of fit.BOUNDS; a floor of 0 (a time term the fit drove
    to nothing) within 0.5% of the range."""
    out = []
    for name in terms:
        lo, hi = BOUNDS[name]
        v = getattr(cal, name)
        at_floor = abs(v / lo - 1) < 5e-3 if lo > 0 else v <= lo + 5e-3 * (hi - lo)
        if at_floor or abs(v / hi - 1) < 5e-3:
            out.append(f"{name}={v:.4g} (bounds {lo:g}..{hi:g})")
    return out


def open_bound(runs, held_rows, cal, term: str, terms: tuple[str, ...] = PUBLISHED_FIT_TERMS) -> None:
    """Refit from `cal` with `term`'s bound opened to fit.hard_range: where the rows put it, the terms that
    move with it (over 2%), any term then at its bound, and the in-sample and held-out GB300 (`held_rows`)
    medians before and after. Both fits are in-sample diagnostics; held-out tables decide (issue 24)."""
    opened = fit_calibration(runs, start=cal, terms=terms, bounds={**BOUNDS, term: hard_range(term)})
    lo, hi = hard_range(term)
    print(f"  {term} with its bound opened to {lo:g}..{hi:g}: {getattr(cal, term):.4g} -> {getattr(opened, term):.4g}")
    moved = [f"{n} {getattr(cal, n):.4g} -> {getattr(opened, n):.4g}" for n in terms
             if n != term and abs(getattr(opened, n) / max(getattr(cal, n), 1e-300) - 1) > 0.02]
    print(f"    moving with it: {'; '.join(moved) if moved else 'none'}")
    print(f"    then at a bound: {', '.join(at_bounds(opened, [t for t in terms if t != term])) or 'none'}")
    for label, c in (("as fitted", cal), ("opened", opened)):
        p, h = predict_runs(runs, c), predict_runs(held_rows, c)
        print(f"    {label:9}: in-sample median |error| {float(np.median(p.abs_pct_error)):.1f}%, "
              f"held-out GB300 {float(np.median(h.abs_pct_error)):.1f}%")


def main(argv: list[str]) -> int:
    parser = parser_for(__doc__)
    parser.add_argument("--fit", action="store_true", help="refit the terms from FIT_START first and print them")
    parser.add_argument("--no-logo", action="store_true", help="skip the leave-one-GPU-out refits (a few min)")
    parser.add_argument("--no-loro", action="store_true", help="skip the leave-one-release-out refits")
    parser.add_argument("--open-bounds", action="store_true",
                        help="for each term at a bound, refit with its range opened to fit.hard_range and print where "
                             "it goes, which terms move with it and the errors then (a diagnostic: one refit per term)")
    parser.add_argument("--hold", action="append", default=[], metavar="TERM=VALUE",
                        help="hold a term at VALUE (repeatable): set in the calibration evaluated and left out of every "
                             "fit here (--fit, leave-one-GPU-out, leave-one-release-out, --open-bounds), to test a "
                             "physical value of it against the held-out tables")
    calibration_argument(parser)
    parser.add_argument("-O", "--out", metavar="FILE",
                        help="write the calibration the tables were made with (a commbench-calibration file, as "
                             "`commbench calibrate -O` writes) for newer_releases.py / vendor_layouts.py --calibration")
    parser.add_argument("--force", action="store_true", help="replace -O/--out even when it is not a calibration file")
    args = parser.parse_args(argv)   # --help or a wrong option: argparse's usage, before any work
    try:
        holds = parse_holds(args.hold)
    except ValueError as exc:
        parser.error(str(exc))
    if args.fit and args.calibration:
        parser.error("--fit starts from FIT_START, --calibration evaluates a file's terms: give one of them")
    terms, start = fit_terms(holds), FIT_START.with_values(**holds)
    runs = published_runs()
    cal = calibration_of(parser, args.calibration).with_values(**holds)
    if args.fit:
        cal = fit_calibration(runs, start=start, terms=terms)
        print("fitted terms" + (f" ({', '.join(f'{k} held at {v:g}' for k, v in holds.items())})" if holds else "") + ":")
        for name in FITTED_TERMS:
            print(f"  {name} = {getattr(cal, name):.4g}")
    if args.out:
        try:
            from commbench.cli.calibrate import run_key   # its runs name their GPUs: plan uses its kernel terms there
            save_calibration(args.out, cal, fitted_on=["commbench/data/calibration-runs.json"], force=args.force,
                             runs=[run_key(r) for r in runs if r.layout is not None])
        except CommbenchError as exc:
            parser.error(str(exc))
        print(f"calibration written to {args.out}")
    p = predict_runs(runs, cal)
    print(f"{'#':>3} {'run':46} {'layout':34} {'pred tok/s':>10} {'published':>10} {'err%':>7} {'mem GB':>7} {'cap':>5} fit")
    for j, r in enumerate(p.runs):
        lay = r.layout
        desc = f"tp{lay.tp} pp{lay.pp} vp{lay.vp} ep{lay.ep} cp{lay.cp} mbs{lay.mbs} gbs{lay.gbs}"
        err = (p.predicted_tokens[j] / p.published_tokens[j] - 1) * 100
        print(f"{r.index:>3} {r.label:46} {desc:34} {p.predicted_tokens[j]:10.0f} {p.published_tokens[j]:10.0f} "
              f"{err:+7.1f} {p.mem_total_bytes[j] / 1e9:7.1f} {p.mem_capacity_bytes[j] / 1e9:5.0f} "
              f"{'yes' if p.fits[j] else 'NO'}")
    for r in p.runs:
        if r.layout_note:
            print(f"  note: row {r.index} ({r.label}): {r.layout_note}")
    skipped = [r for r in runs if r.layout is None]
    print(f"\nnot modelled: {len(skipped)} rows ({', '.join(sorted({r.skip_reason for r in skipped}))})")
    moe_med, dense_med, n_moe, n_dense = _medians(p)
    print(f"rows modelled: {len(p.runs)} ({n_moe} MoE, {n_dense} dense)")
    print(f"in-sample median |error|: MoE {moe_med:.1f}% (bar <= 8%), dense {dense_med:.1f}% (bar <= 6%), "
          f"all {float(np.median(p.abs_pct_error)):.1f}%")
    print(f"mean |error| {float(np.mean(p.abs_pct_error)):.1f}%; rows within 15%: "
          f"{int(np.sum(p.abs_pct_error <= 15))}/{len(p.runs)}")
    print(f"published layouts predicted to fit in memory: {int(p.fits.sum())}/{len(p.runs)}  (goal: all)")
    held = predict_runs(published_runs(tuple(json.loads(HELD_OUT.read_text()))), cal)
    print(f"\nheld out, never fitted ({HELD_OUT.name}): predicted vs published tokens/s/GPU")
    for j, r in enumerate(held.runs):
        print(f"  {r.label:46} {held.predicted_tokens[j]:10.0f} {held.published_tokens[j]:10.0f} "
              f"{(held.predicted_tokens[j] / held.published_tokens[j] - 1) * 100:+7.1f}")
    h_moe, h_dense, _, _ = _medians(held)
    print(f"held-out median |error|: all {float(np.median(held.abs_pct_error)):.1f}% over {len(held.runs)} runs "
          f"(MoE {h_moe:.1f}%, dense {h_dense:.1f}%; goal: within 10%); mean {float(np.mean(held.abs_pct_error)):.1f}%, "
          f"worst {float(np.max(held.abs_pct_error)):.1f}%")
    bounded = at_bounds(cal, terms)
    print(f"\nterms at a bound: {', '.join(bounded) if bounded else 'none'} (bar: none)"
          + (f"; held, not fitted (--hold): {', '.join(f'{k}={v:g}' for k, v in holds.items())}" if holds else ""))
    for name in [b.split("=")[0] for b in bounded]:
        pullers = bound_pullers(runs, cal, name)
        total = sum(share for _, _, share in pullers)
        print(f"  rows holding {name} at its bound (share of the loss rise if it moved 10% inward):")
        for r, err, share in pullers[:6]:
            lay = r.layout
            print(f"    {r.index:>3} {r.label:46} tp{lay.tp} pp{lay.pp} vp{lay.vp} cp{lay.cp} ep{lay.ep} "
                  f"err {(np.exp(err) - 1) * 100:+6.1f}%  {share / total * 100:5.1f}%")
    if args.open_bounds:
        for name in [b.split("=")[0] for b in bounded]:
            open_bound(runs, held.runs, cal, name, terms)
    side = {"in-sample (all / MoE / dense)": (float(np.median(p.abs_pct_error)), moe_med, dense_med),
            "held-out GB300 (all / MoE / dense)": (float(np.median(held.abs_pct_error)), h_moe, h_dense)}
    if not args.no_logo:
        print("\nleave-one-GPU-out (fit on the other GPUs' rows, predict this GPU's):")
        print(f"{'GPU':8} {'rows':>5} {'MoE med|err|%':>14} {'dense med|err|%':>16}")
        table = leave_one_gpu_out(runs, start=start, terms=terms)
        for gpu, n, m, d in table:
            print(f"{gpu:8} {n:5d} {m:14.1f} {d:16.1f}")
        moe_all = [m for _, _, m, _ in table if np.isfinite(m)]
        dense_all = [d for _, _, _, d in table if np.isfinite(d)]
        print(f"median over GPUs: MoE {float(np.median(moe_all)):.1f}% (bar <= 12%)")
        side["leave-one-GPU-out (median over GPUs: MoE / dense)"] = (
            float("nan"), float(np.median(moe_all)), float(np.median(dense_all)))
    if not args.no_loro:
        print("\nleave-one-release-out (fit on the older release lines' rows, predict this line's):")
        print(f"{'line':6} {'train':>6} {'test':>5} {'all med|err|%':>14} {'MoE':>6} {'dense':>6}")
        loro = leave_one_release_out(runs, start=start, terms=terms)
        for line, n_train, n_test, a, m, d in loro:
            print(f"{line:6} {n_train:6d} {n_test:5d} {a:14.1f} {m:6.1f} {d:6.1f}")
        if loro:
            print(f"newest line {loro[-1][0]}: median |error| {loro[-1][3]:.1f}% (bar <= 12%)")
            side[f"leave-one-release-out, newest line {loro[-1][0]} (all / MoE / dense)"] = loro[-1][3:]
    print("\nside by side, median |error| %:")
    for name, (a, m, d) in side.items():
        print(f"  {name:58} {a:6.1f} {m:6.1f} {d:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
