"""NCCL's configuration files (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf: NVIDIA/nccl src/misc/param.cc,
v2.30.7-1) set NCCL_* variables the environment leaves unset. A host whose file sets NCCL_ALGO measures a "default"
that is not NCCL's own choice: the run header records the files' settings, and nccl-tuner treats a setting from a
file exactly as the same variable exported."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_conf import SYSTEM_FILE, conf_paths, effective_settings, parse_conf, read_conf_files
from commbench.results.records import JsonlWriter, RunHeader, read_records
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _record, reproduced_plugin_load


@pytest.fixture
def fake_conf(tmp_path, monkeypatch):
    """A fake NCCL_CONF_FILE and a HOME of our own (with a ~/.nccl.conf NCCL must not read beside it)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_PROTO=LL\n")
    named = tmp_path / "site.conf"
    named.write_text("# site settings\nNCCL_ALGO=Tree\r\nNCCL_ALGO=Ring\nnot a setting\nNCCL_SOCKET_IFNAME = eth0\n"
                     "OMP_NUM_THREADS=4\nNCCL_IB_HCA=mlx5_0:1,mlx5_1:1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NCCL_CONF_FILE", str(named))
    return named, home


def test_the_files_are_read_as_nccl_reads_them(fake_conf, monkeypatch):
    named, home = fake_conf
    assert conf_paths({"NCCL_CONF_FILE": str(named), "HOME": str(home)}) == [str(named), SYSTEM_FILE]
    assert conf_paths({"HOME": str(home)}) == [f"{home}/.nccl.conf", SYSTEM_FILE]
    assert conf_paths({"NCCL_CONF_FILE": "", "HOME": str(home)}) == [f"{home}/.nccl.conf", SYSTEM_FILE]  # empty: unset
    found = read_conf_files()
    # NCCL_CONF_FILE replaces ~/.nccl.conf; first line of a key wins ('\r' dropped); NCCL's key is everything
    # before '=' (blanks kept: "NCCL_SOCKET_IFNAME " is another variable); non-NCCL_* keys are not recorded
    assert found[str(named)] == {"NCCL_ALGO": "Tree", "NCCL_SOCKET_IFNAME ": " eth0", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1"}
    assert f"{home}/.nccl.conf" not in found
    monkeypatch.delenv("NCCL_CONF_FILE")
    assert read_conf_files()[f"{home}/.nccl.conf"] == {"NCCL_PROTO": "LL"}
    assert parse_conf("#NCCL_ALGO=Ring\nNCCL_PROTO\n") == {}


def test_the_environment_wins_then_the_first_file():
    files = {"/a.conf": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, SYSTEM_FILE: {"NCCL_PROTO": "Simple", "NCCL_X": "1"}}
    assert effective_settings({"NCCL_ALGO": "Ring"}, files) == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_X": "1"}
    assert effective_settings({}, None) == {}


@pytest.mark.timeout(120)
def test_a_bench_run_header_records_the_files_settings(fake_conf, tmp_path):
    named, _ = fake_conf
    out = tmp_path / "ar.jsonl"
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "8", "-n", "2", "-w", "1",
                                      "-O", str(out)])
    assert result.exit_code == 0, result.output
    header = json.loads(out.read_text().splitlines()[0])
    assert header["nccl_conf"][str(named)]["NCCL_ALGO"] == "Tree"
    assert header["nccl_env"]["NCCL_CONF_FILE"] == str(named)
    (read,) = [r for r in read_records([out]) if isinstance(r, RunHeader)]
    assert read.nccl_settings()["NCCL_ALGO"] == "Tree"


def _tune(tmp_path, runs) -> tuple[int, str]:
    path = tmp_path / f"runs-{len(list(tmp_path.glob('runs-*')))}.jsonl"  # a new file each time (JsonlWriter appends)
    with JsonlWriter(path) as writer:
        for header, combo, median in runs:
            writer.write(header)
            for size in (1024, 4096):
                writer.write(_record(header.run_id, size, combo, median))
    conf = tmp_path / "c.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf)])
    return result.exit_code, (conf.read_text() if result.exit_code == 0 else result.output)


def test_a_default_measured_under_a_conf_file_setting_is_left_out_as_an_exported_one(tmp_path):
    """/etc/nccl.conf with NCCL_ALGO=Tree: the run's "default" is tree's, as with NCCL_ALGO=Tree exported; the
    note names the file. The ring/LL run's own NCCL_ALGO=Ring wins over the file's (setenv(.., 0)): kept."""
    tuned = dataclasses.replace(_header("ring", ["h"] * 4), nccl_env=dict(RING_LL.env()),
                                nccl_conf={SYSTEM_FILE: {"NCCL_ALGO": "Tree"}})
    by_file = dataclasses.replace(_header("base", ["h"] * 4), nccl_conf={SYSTEM_FILE: {"NCCL_ALGO": "Tree"}})
    by_env = dataclasses.replace(_header("base", ["h"] * 4), nccl_env={"NCCL_ALGO": "Tree"})
    for base, named in ((by_file, True), (by_env, False)):
        code, text = _tune(tmp_path, [(base, DEFAULT, 40.0), (tuned, RING_LL, 10.0)])
        assert code == 0, text
        assert reproduced_plugin_load(text)[0] == []  # no NCCL default left: nothing shown to beat it
        assert "left out 2 points with an NCCL-default axis forced by the environment" in text
        assert (f"in {SYSTEM_FILE} (NCCL_ALGO=Tree)" in text) == named
        assert "left out 2 points whose run's" not in text  # ring/LL: the environment's Ring wins over the file


def test_other_nccl_settings_from_a_file_count_as_exported_ones(tmp_path):
    """NCCL_NVLS_ENABLE=0 in ~/.nccl.conf for NCCL's default but not for ring/LL: refused in one line, as when
    exported; the same setting exported in one run and from a file in the other is the same system."""
    off = {"/home/u/.nccl.conf": {"NCCL_NVLS_ENABLE": "0"}}
    base = dataclasses.replace(_header("base", ["h"] * 4), nccl_conf=off)
    tuned = dataclasses.replace(_header("tuned", ["h"] * 4), nccl_env=dict(RING_LL.env()))
    code, output = _tune(tmp_path, [(base, DEFAULT, 40.0), (tuned, RING_LL, 10.0)])
    assert code == 2 and "Traceback" not in output and len(output.splitlines()) == 1, output
    assert "NCCL_NVLS_ENABLE=0: run base" in output and "configuration files" in output
    exported = dataclasses.replace(tuned, nccl_env={**RING_LL.env(), "NCCL_NVLS_ENABLE": "0"})
    code, text = _tune(tmp_path, [(base, DEFAULT, 40.0), (exported, RING_LL, 10.0)])
    assert code == 0 and [c["algo"] for c in reproduced_plugin_load(text)[0]] == ["ring"], text


def test_env_shows_the_files_and_which_settings_the_environment_overrides(fake_conf, monkeypatch):
    # `commbench env` listed NCCL_* variables only: a host whose /etc/nccl.conf forces NCCL_ALGO showed nothing of it
    from tests.test_json_output import validate

    named, _ = fake_conf
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_2:1")
    shown = CliRunner().invoke(app, ["env"], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.output.splitlines() if "NCCL config" in line)
    assert str(named) in row and "NCCL_ALGO=Tree" in row and "overrides NCCL_IB_HCA" in row and "mlx5_0" not in row
    assert ".nccl.conf" not in shown.output   # NCCL_CONF_FILE is set: NCCL does not read ~/.nccl.conf
    as_json = CliRunner().invoke(app, ["env", "--json"])
    doc = json.loads(as_json.stdout)
    assert doc["machine"]["nccl_conf"][str(named)]["NCCL_ALGO"] == "Tree"
    validate(doc, "env")
