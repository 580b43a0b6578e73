"""A run whose header `fit` cannot read (written by a newer commbench, or its header line lost) has a setup nobody can
check: `fit` merged it with other runs in silence (probe CG F2: two runs refused together as two thread counts were
fitted into one curve once the other run's header said schema_version 2 or was cut off). One rule for such a run
(results.run_setup.setup_unknown_text), as compare and report say it: `fit` (and `tune --results`, which fits through
it) refuses to merge it with other runs, naming the file and run, and says it where it is fitted alone."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from tests.results_files import COMPARE, records as _records, write as _write


def _other_threads(tmp_path, how: str) -> tuple[str, str, str]:
    """(base file, the other run's file with its header `how`: newer schema or gone, the other run's id)."""
    base = _write(tmp_path / "base.jsonl", [dict(r, torch_threads=[1, 1]) if r["record_type"] == "header" else r
                                            for r in _records(COMPARE / "gloo_all_reduce_a.jsonl")])
    other = [dict(r, torch_threads=[2, 2]) if r["record_type"] == "header" else r
             for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    if how == "newer schema":
        other = [dict(r, schema_version=2) if r["record_type"] == "header" else r for r in other]
    else:
        other = [r for r in other if r["record_type"] != "header"]
    return base, _write(tmp_path / "other.jsonl", other), other[-1]["run_id"]


@pytest.mark.parametrize("how", ["newer schema", "no header line"])
def test_fit_refuses_to_merge_a_run_whose_header_it_cannot_read(tmp_path, how):
    base, other, run = _other_threads(tmp_path, how)
    whole = CliRunner().invoke(app, ["fit", base, other, "-O", str(tmp_path / "f.json")], env={"COLUMNS": "400"})
    said = " ".join(whole.output.split())
    assert whole.exit_code == 2, said
    assert f"{other}: 1 run(s) without a readable header record (run {run}" in said, said
    assert "cannot be checked" in said and "Traceback" not in said and not (tmp_path / "f.json").exists()
    if how == "newer schema":   # why its header is not read: the reader's own words
        assert "schema_version=2 is newer than this commbench reads" in said, said
    from commbench.costmodel.profile import fit_result_files
    with pytest.raises(CommbenchError, match="without a readable header record"):   # tune --results fits through it
        fit_result_files([base, other])


def test_a_run_without_a_header_fitted_alone_is_said(tmp_path):
    from commbench.costmodel.profile import fit_result_files

    _, other, run = _other_threads(tmp_path, "no header line")
    notes = fit_result_files([other], min_heldout_bytes=64 * 1024)[2]
    assert any(f"{other}: 1 run(s) without a readable header record (run {run})" in n and "cannot be checked" in n
               for n in notes), notes
    base, _, _ = _other_threads(tmp_path, "no header line")
    assert not any("header record" in n for n in fit_result_files([base], min_heldout_bytes=64 * 1024)[2])


def test_the_profile_notes_a_run_without_a_header_once(tmp_path):
    """check_setup_known's note (file, run, why) and check_one_fabric's '1 run(s) without a header (provenance
    unknown)' both went into the profile's notes for the one cause: one note."""
    from commbench.costmodel.profile import fit_result_files

    _, other, run = _other_threads(tmp_path, "no header line")
    fabric = fit_result_files([other], min_heldout_bytes=64 * 1024)[0]
    about = [n for n in fabric.notes if "header" in n]
    assert len(about) == 1 and f"1 run(s) without a readable header record (run {run})" in about[0], fabric.notes
