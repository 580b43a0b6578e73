"""compare: BASE and NEW measured on another setup (NCCL version, devices, a real vs an emulated fabric, from the
runs' headers) are not the same measurement: the gate refuses them in one line naming what differs, unless
--allow-setup-change (an NCCL upgrade judged against the old baseline), and then still says so. NEW is B, another
run of A's points, under an edited header (A itself there is refused as no new run: test_compare_same_run.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from tests.test_compare import A, B


def _with_header(tmp_path, name: str, **header) -> str:
    lines = [json.loads(line) for line in B.read_text().splitlines()]
    lines[0].update(header)
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("header, named", [
    ({"devices": ["NVIDIA H100 80GB HBM3"] * 2}, "devices"),
    ({"nccl_version": "2.21.5"}, "NCCL versions"),
    ({"emulated": {"racks": 2}}, "fabrics"),
    # on gloo torch is the collective implementation (ProcessGroupGloo), as the NCCL library is on NCCL: it was ignored
    ({"torch_version": "2.4.0+cu121"}, "torch versions on gloo (base: torch 2.13.0+cpu (gloo); new: torch 2.4.0+cu121"),
])
def test_another_setup_fails_in_one_line_unless_allowed(tmp_path, header, named):
    new = _with_header(tmp_path, "new.jsonl", **header)
    out = CliRunner().invoke(app, ["compare", str(A), new])
    assert out.exit_code == 2, out.output
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and named in errors[0] and "--allow-setup-change" in errors[0]
    allowed = CliRunner().invoke(app, ["compare", str(A), new, "--allow-setup-change"])
    assert allowed.exit_code == 0, allowed.output
    assert "allowed: the new file was measured on another setup" in allowed.output and named in allowed.output


def test_same_setup_on_other_hosts_passes_and_is_noted(tmp_path):
    new = _with_header(tmp_path, "new.jsonl", hostnames=["ci-7", "ci-7"])
    out = CliRunner().invoke(app, ["compare", str(A), new])
    assert out.exit_code == 0 and "note:" in out.output and "hosts" in out.output
    assert CliRunner().invoke(app, ["compare", str(A), str(B)]).output.count("note:") == 0


def test_another_torch_under_nccl_or_another_commbench_is_judged_and_noted(tmp_path):
    """Under NCCL torch only launches NCCL's kernels and commbench is the harness: both were ignored without a word;
    a change of either is now named in a note (with both versions), and the files are judged."""
    def nccl(name: str, source, **header) -> str:
        lines = [json.loads(line) for line in source.read_text().splitlines()]
        lines[0].update({"backend": "nccl", "nccl_version": "2.21.5", **header})
        for line in lines[1:]:
            line["backend"] = "nccl"
        (tmp_path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
        return str(tmp_path / name)

    base, new = nccl("a.jsonl", A), nccl("b.jsonl", B, torch_version="2.4.0", commbench_version="0.0.9")
    out = CliRunner().invoke(app, ["compare", base, new])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "note: the new file differs from the base in torch versions on NCCL (base: torch 2.13.0+cpu; new: torch " \
           "2.4.0)" in text, out.output
    assert "commbench versions (base: commbench 0.1.0; new: commbench 0.0.9)" in text, out.output
    same = CliRunner().invoke(app, ["compare", base, nccl("c.jsonl", B)])
    assert same.exit_code == 0 and "differs from the base" not in same.output, same.output


def test_a_setup_a_file_does_not_know_is_no_change(tmp_path):
    """An nccl-tests log names no devices (or an old one no NCCL version): unknown is not another setup."""
    for devices in ([], ["unknown"] * 2):  # the importer's placeholder where a log names none
        new = _with_header(tmp_path, "new.jsonl", devices=devices, hostnames=["unknown"], nccl_version=None)
        assert CliRunner().invoke(app, ["compare", str(A), new]).exit_code == 0
        assert CliRunner().invoke(app, ["compare", new, str(A)]).output.count("note:") == 0


def test_a_history_of_another_setup_is_refused_too(tmp_path):
    """--history runs set the run-to-run noise: runs on other devices would set it from another machine."""
    history = tmp_path / "history"
    history.mkdir()
    _with_header(history, "h100.jsonl", devices=["NVIDIA H100 80GB HBM3"] * 2)
    out = CliRunner().invoke(app, ["compare", str(A), str(B), "--history", str(history)])
    assert out.exit_code == 2 and "error: the history" in out.output and "devices" in out.output, out.output


def test_an_empty_history_option_is_refused_not_ignored():
    out = CliRunner().invoke(app, ["compare", str(A), str(B), "--history", ""])
    # worded as -O '' is (files.refuse_empty_path): an unset shell variable, more likely than a folder named ''
    assert out.exit_code == 2 and out.output.startswith("error: --history='' is empty"), out.output


def test_another_nccl_environment_is_judged_and_named(tmp_path):
    """NCCL_* settings are what the gate judges (NCCL_ALGO forced, say), so they pass, but the output names them."""
    new = _with_header(tmp_path, "new.jsonl", nccl_env={"NCCL_ALGO": "Tree"})
    out = CliRunner().invoke(app, ["compare", str(A), new])
    assert out.exit_code == 0 and "note:" in out.output and "NCCL_ALGO=Tree" in out.output, out.output


def _headerless(tmp_path, name: str, source=B) -> str:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in source.read_text().splitlines()[1:]))
    return str(path)


@pytest.mark.parametrize("side", ["new", "base"])
def test_a_file_without_a_header_is_said_to_be_unchecked_not_silently_passed(tmp_path, side):
    """A run without a header record passed the setup check in silence (setup_changes skips a side it knows
    nothing of). Its setup cannot be checked: one warning line names the file; the points are still judged (what
    bench, sweep and import write always starts with a header, so refusing it would fail a gate on no change)."""
    headerless = _headerless(tmp_path, f"{side}.jsonl", B if side == "new" else A)
    files = [str(A), headerless] if side == "new" else [headerless, str(B)]
    out = CliRunner().invoke(app, ["compare", *files], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    warned = [line for line in out.output.splitlines() if "without a readable header record" in line]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {headerless}: 1 run(s)"), out.output
    assert "setup (NCCL version, devices, emulated fabric) is unknown and cannot be checked" in warned[0]
    doc = json.loads(CliRunner().invoke(app, ["compare", *files, "--json"]).stdout)
    assert [entry.split(": run ")[0] for entry in doc["setup_unknown"]] == [headerless] and doc["passed"]
    assert json.loads(CliRunner().invoke(app, ["compare", str(A), str(B), "--json"]).stdout)["setup_unknown"] == []


def test_a_headerless_history_file_is_said_too(tmp_path):
    history = tmp_path / "history"
    history.mkdir()
    _headerless(history, "old.jsonl")
    out = CliRunner().invoke(app, ["compare", str(A), str(B), "--history", str(history)], env={"COLUMNS": "400"})
    assert out.exit_code == 0 and out.output.count("without a readable header record") == 1 and "old.jsonl" in out.output, out.output
