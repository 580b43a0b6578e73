"""The benchmarks' way to test a physical value of a term against the held-out tables (issue 24: held-out numbers
decide): planner_calibration.py --hold TERM=VALUE keeps the term out of every fit it runs, -O writes the calibration
the tables were made with, and newer_releases.py / vendor_layouts.py / planner_calibration.py --calibration FILE
evaluate such a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import cli_args  # noqa: E402
import planner_calibration  # noqa: E402

from commbench.planner.calibrate.fit import fit_calibration  # noqa: E402
from commbench.planner.calibrate.published import published_runs  # noqa: E402
from commbench.planner.step.terms import CALIBRATED, FIT_START, PUBLISHED_FIT_TERMS, load_calibration  # noqa: E402


def test_hold_parses_terms_and_values_and_refuses_what_is_not_one_by_name():
    assert planner_calibration.parse_holds(["overlap_efficiency=0.6", "layer_overhead_s = 0.004"]) == {
        "overlap_efficiency": 0.6, "layer_overhead_s": 0.004}
    with pytest.raises(ValueError, match="'overlap=0.6'.*one of gemm_efficiency_hopper"):
        planner_calibration.parse_holds(["overlap=0.6"])
    with pytest.raises(ValueError, match="'x' is not a number"):
        planner_calibration.parse_holds(["overlap_efficiency=x"])
    with pytest.raises(ValueError, match=r"overlap_efficiency=1.5 must be in \(0, 1\]"):
        planner_calibration.parse_holds(["overlap_efficiency=1.5"])
    with pytest.raises(ValueError, match="TERM=VALUE"):
        planner_calibration.parse_holds(["overlap_efficiency"])


def test_a_held_term_stays_at_its_value_through_a_fit_while_the_others_move():
    holds = {"overlap_efficiency": 0.6}
    terms = planner_calibration.fit_terms(holds)
    assert "overlap_efficiency" not in terms and set(terms) == set(PUBLISHED_FIT_TERMS) - {"overlap_efficiency"}
    runs = [r for r in published_runs() if r.layout is not None and r.model.name.startswith("llama")][:8]
    start = FIT_START.with_values(**holds)
    cal = fit_calibration(runs, start=start, rounds=1, terms=terms)
    assert cal.overlap_efficiency == 0.6
    assert any(getattr(cal, t) != getattr(start, t) for t in terms)


def test_out_writes_the_held_calibration_that_calibration_reads_back(tmp_path, capsys):
    out = tmp_path / "held.json"
    assert planner_calibration.main(["--no-logo", "--no-loro", "--hold", "overlap_efficiency=0.6", "-O", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "held, not fitted (--hold): overlap_efficiency=0.6" in printed
    assert "overlap_efficiency=0.3" not in printed.split("terms at a bound:")[1].splitlines()[0]
    back = load_calibration(str(out))
    assert back.overlap_efficiency == 0.6
    from commbench.planner.calibrate.fit import read_calibration_file   # its runs name the GPUs it was fitted on
    assert {"h100", "b200", "gb200"} <= set(read_calibration_file(str(out)).gpus)
    assert back.with_values(overlap_efficiency=CALIBRATED.overlap_efficiency) == CALIBRATED
    parser = cli_args.parser_for("x")
    assert cli_args.calibration_of(parser, str(out)) == back
    assert cli_args.calibration_of(parser, None) == CALIBRATED


@pytest.mark.parametrize("argv, named", [(["--hold", "nope=1"], "'nope=1'"),
                                         (["--calibration", "missing.json"], "'missing.json'")])
def test_a_bad_hold_or_calibration_file_is_one_line_and_exit_2(argv, named, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        planner_calibration.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert ": error: " in last and named in last


def test_a_file_that_is_not_a_calibration_is_refused_by_name(tmp_path, capsys):
    bad = tmp_path / "rows.json"
    bad.write_text(json.dumps([{"model": "x"}]))
    with pytest.raises(SystemExit) as exc:
        cli_args.calibration_of(cli_args.parser_for("x"), str(bad))
    assert exc.value.code == 2
    assert "commbench-calibration" in capsys.readouterr().err


def test_a_term_driven_to_a_floor_of_zero_counts_as_at_its_bound_and_fit_with_calibration_is_refused(capsys):
    at = planner_calibration.at_bounds(CALIBRATED.with_values(expert_gemm_kernel_s=0.0, moe_sync_s=0.0))
    assert [a.split("=")[0] for a in at] == ["moe_sync_s", "overlap_efficiency", "expert_gemm_kernel_s"]
    assert not any(a.startswith("layer_overhead_s") for a in planner_calibration.at_bounds(CALIBRATED))
    with pytest.raises(SystemExit) as exc:
        planner_calibration.main(["--fit", "--calibration", "x.json"])
    assert exc.value.code == 2 and "give one of them" in capsys.readouterr().err


def test_newer_releases_names_the_calibration_file_on_the_gb300_table_too(capsys):
    """The GB300 table's line said 'predicted with the shipped calibration' under --calibration FILE, though its
    figure came from the file (fix-G3's finding, session 43)."""
    import newer_releases
    absent = [r for r in published_runs(tuple(json.loads(newer_releases.ABSENT_GB300.read_text())))
              if r.layout is not None][:2]
    newer_releases._absent_gb300(absent, [], CALIBRATED, False, "held.json")
    printed = capsys.readouterr().out
    assert "predicted with held.json vs published" in printed
    assert "shipped calibration" not in printed
