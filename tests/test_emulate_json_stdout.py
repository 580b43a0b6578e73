"""`commbench emulate -- CMD --json` keeps stdout one JSON document (probe P7 F13): emulate printed its fabric banner
(and after the run the uplink counters) on stdout, so `emulate ... -- env --json > e.json` or `-- verify-plan ...
--json` began with 'emulated fabric: ...' and was not JSON (docs/json-output.md: the document on stdout, notices on
stderr), and under `env --json` every rank printed its own document. With --json emulate's lines go to stderr (the
document says the run was emulated: verify-plan's `emulated`, env's `launch`) and only rank 0's stdout is passed
through, the bytes of the others said in a note; without it they stay on stdout, where `import nccl-tests` of a tee'd
`bench --format nccl-tests` log reads the banner."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

HAS_NETNS = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
COUNTERS = [{"rack": 0, "tx_bytes": 586, "rx_bytes": 586}, {"rack": 1, "tx_bytes": 586, "rx_bytes": 586}]


def _stub(monkeypatch, seen: dict) -> None:
    """emulate's fabric and ranks replaced: the 'ranks' print `seen["stdout"]` as rank 0 would."""
    import commbench.cli.emulate as emulate_cli

    class Fabric:
        def __init__(self, spec):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def uplink_counters(self):
            return COUNTERS

    def run_ranks(spec, command, restyle=None, left_out=None):
        seen["left_out"] = left_out
        sys.stdout.write(seen["stdout"])
        return 0

    monkeypatch.setattr(emulate_cli, "Fabric", Fabric)
    monkeypatch.setattr(emulate_cli, "run_ranks", run_ranks)


EMULATE = ["emulate", "--racks", "2", "--ranks-per-rack", "1", "--scale-out-rate", "1gbit", "--"]


@pytest.mark.parametrize("command", [["env", "--json"], ["verify-plan", "plan.json", "-e", "1M", "--json"],
                                     ["sweep", "s.toml", "--dry-run", "--json"]])
def test_with_json_stdout_is_the_document_alone(monkeypatch, command):
    seen = {"stdout": json.dumps({"format": "commbench-env"}, indent=2) + "\n"}
    _stub(monkeypatch, seen)
    result = CliRunner().invoke(app, [*EMULATE, *command], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"format": "commbench-env"}, result.stdout
    assert result.stderr.startswith("emulated fabric: 2 rack(s) x 1 rank(s); "), result.stderr
    assert "rack 1 uplink (measured veth counters): sent 586 B" in result.stderr
    assert seen["left_out"] == {}   # only rank 0's stdout is passed through


def test_without_json_the_banner_stays_on_stdout_for_a_teed_log(monkeypatch):
    seen = {"stdout": "# nccl-tests text\n"}
    _stub(monkeypatch, seen)
    result = CliRunner().invoke(app, [*EMULATE, "bench", "all_reduce", "--format", "nccl-tests"],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("emulated fabric: 2 rack(s) x 1 rank(s); ") and lines[1] == "# nccl-tests text"
    assert lines[-1].startswith("rack 1 uplink (measured veth counters)"), result.stdout
    assert seen["left_out"] is None


def test_json_after_a_double_dash_of_the_command_is_not_its_option():
    from commbench.cli.emulate import writes_document

    assert writes_document(["env", "--json"]) and writes_document(["sweep", "s.toml", "--dry-run", "--json"])
    assert not writes_document(["bench", "all_reduce", "--format", "nccl-tests"])
    assert not writes_document(["bench", "all_reduce", "--", "--json"])


@pytest.mark.netns
@pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2")
def test_env_json_on_two_emulated_ranks_is_one_document():
    import subprocess
    from pathlib import Path

    # a process of its own: the ranks write to its stdout (file descriptor 1), which CliRunner does not capture
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "commbench", *EMULATE, "env", "--json"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["format"] == "commbench-env" and doc["machine"]["launch"] == {"launcher": "emulate", "rank": 0,
                                                                               "world_size": 2}, doc
    assert result.stderr.startswith("emulated fabric: 2 rack(s)"), result.stderr
    assert "note: rank 1 printed" in result.stderr and "left out" in result.stderr, result.stderr
