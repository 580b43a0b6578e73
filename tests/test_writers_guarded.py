"""Every writer takes the output lock and replaces only what commbench wrote (unless --force); names
read from files never leave their folder. Through the CLI."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

DATA = Path(__file__).resolve().parent / "data" / "compare" / "gloo_all_reduce_a.jsonl"
runner = CliRunner()
FOREIGN = "my notes\nkeep me"


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def one_line(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def held(tmp_path):
    """A file locked as a running sweep locks its output (flock, another open file description)."""
    path = tmp_path / "running.jsonl"
    path.write_text('{"record_type":"header"}\n')
    handle = path.open("a")
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    yield path
    handle.close()


@pytest.mark.parametrize("command", [
    ("fit", str(DATA), "-O"),
    ("nccl-tuner", "--system", "gb300-nvl72", "--gpus", "8", "-O"),
    ("calibrate", str(Path(__file__).resolve().parents[1] / "commbench" / "data" / "calibration-runs.json"), "-O"),
])
def test_a_file_a_running_sweep_writes_is_not_overwritten(held, command):
    before = held.read_bytes()
    line = one_line(invoke(*command, str(held)))
    assert "is in use by" in line
    assert held.read_bytes() == before


@pytest.mark.parametrize("command,marker", [
    (("fit", str(DATA), "-O"), "commbench-fabric"),
    (("nccl-tuner", "--system", "gb300-nvl72", "--gpus", "8", "-O"), "commbench nccl-tuner"),
])
def test_a_foreign_file_is_replaced_only_with_force(tmp_path, command, marker):
    target = tmp_path / "README.md"
    target.write_text(FOREIGN)
    line = one_line(invoke(*command, str(target)))
    assert "exists and is not a" in line and "--force" in line
    assert target.read_text() == FOREIGN
    again = invoke(*command, str(target))  # still foreign: refused again (nothing half-written)
    assert again.exit_code == 2 and target.read_text() == FOREIGN
    # nccl-tuner's refusal said "pass --force" while nccl-tuner had no --force: "No such option"
    assert invoke(*command, str(target), "--force").exit_code == 0
    assert marker in target.read_text()
    assert invoke(*command, str(target)).exit_code == 0  # its own output: replaced without --force


def test_nccl_tuner_writes_nothing_when_csv_is_refused(tmp_path):
    """nccl-tuner wrote -O, then refused a foreign --csv: exit 2 with a config written. Both are claimed first."""
    conf, csv = tmp_path / "t.conf", tmp_path / "perf.csv"
    csv.write_text(FOREIGN)
    line = one_line(invoke("nccl-tuner", "--system", "gb300-nvl72", "--gpus", "8", "-O", str(conf), "--csv", str(csv)))
    assert "--csv=" in line and "exists and is not a CSV file" in line
    assert not conf.exists() and csv.read_text() == FOREIGN


def test_report_with_an_empty_out_never_touches_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text(FOREIGN)
    line = one_line(invoke("report", str(DATA), "-O", ""))
    assert "--out='' is empty" in line
    assert (tmp_path / "README.md").read_text() == FOREIGN
    line = one_line(invoke("report", str(DATA), "-O", "."))
    assert "exists and is not a commbench report" in line and (tmp_path / "README.md").read_text() == FOREIGN


def test_tune_keeps_an_earlier_sweep_and_refuses_a_running_one(tmp_path):
    results = tmp_path / "tune-sweep.jsonl"
    results.write_text(DATA.read_text())
    line = one_line(invoke("tune", "--out", str(tmp_path)))
    assert "already holds a sweep's results" in line and "--results" in line
    assert results.read_text() == DATA.read_text()
    with results.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = one_line(invoke("tune", "--out", str(tmp_path), "--force"))
        assert "is in use by" in line
    assert results.read_text() == DATA.read_text()


@pytest.mark.parametrize("name,code", [("../../../x/PWNED", 2), ("..", 0), ("/tmp/abs", 2)])
def test_report_names_from_records_stay_inside_the_report_folder(tmp_path, name, code):
    """A path in a record's collective is refused on read; a name that passes ('..') is sanitised."""
    hostile = tmp_path / "hostile.jsonl"
    rows = []
    for line in DATA.read_text().splitlines():
        record = json.loads(line)
        if record.get("record_type") == "measurement":
            record["collective"] = name
        rows.append(json.dumps(record))
    hostile.write_text("\n".join(rows) + "\n")
    out = tmp_path / "deep" / "er" / "report"
    result = invoke("report", str(hostile), "-O", str(out))
    assert result.exit_code == code, result.output
    written = set(tmp_path.rglob("*.png")) | set(Path("/tmp").glob("abs*.png"))
    assert all(out in p.parents for p in written)
    assert (code == 0) == bool(written)


def test_a_sweep_name_never_moves_its_default_results_file(tmp_path, monkeypatch):
    from commbench.cli.sweep import default_output

    monkeypatch.chdir(tmp_path)
    path = Path(default_output("../../../../ESCAPED"))
    assert path.parent == Path("results") and path.name.startswith("sweep-ESCAPED-")


@pytest.mark.timeout(300)
def test_tune_run_again_replaces_its_own_sweep(tmp_path):
    results = tmp_path / "tune-sweep.jsonl"
    lines = DATA.read_text().splitlines()
    header = json.loads(lines[0])
    header["argv"] = ["/usr/bin/commbench", "tune", "--out", str(tmp_path)]
    results.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    again = invoke("tune", "--out", str(tmp_path), "--gpus", "8", "--gbs", "64", "--model", "qwen3-30b-a3b",
                   "--system", "b200-hgx")
    assert again.exit_code == 0, again.output
    assert results.read_text() != "\n".join([json.dumps(header), *lines[1:]]) + "\n"


def test_tune_refuses_a_foreign_fabric_measured_json_before_the_sweep(tmp_path):
    """tune ran its whole sweep and wrote fabric.json, then refused OUT/fabric-measured.json (a file commbench did
    not write); the README: an output path that cannot be written is found before any rank starts."""
    out = tmp_path / "tune"
    out.mkdir()
    (out / "fabric-measured.json").write_text("my notes\n")
    result = runner.invoke(app, ["tune", "-O", str(out)])
    assert result.exit_code == 2, result.output
    assert "fabric-measured.json' exists and is not a fabric profile written by commbench" in " ".join(result.output.split())
    assert sorted(p.name for p in out.iterdir()) == ["fabric-measured.json"]  # nothing measured, nothing written
    assert (out / "fabric-measured.json").read_text() == "my notes\n"


def test_emulate_counters_out_refusal_offers_no_option_emulate_lacks(tmp_path):
    """emulate --counters-out FOREIGN said 'pass --force to replace it'; emulate has no --force."""
    target = tmp_path / "counters.json"
    target.write_text(FOREIGN)
    line = one_line(invoke("emulate", "--counters-out", str(target), "--", "env"))
    assert "exists and is not a counters file written by commbench: choose another path" in line
    assert "--force" not in line and target.read_text() == FOREIGN
