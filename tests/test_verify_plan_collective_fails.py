"""verify-plan on a collective that times out (probe P7 F13): `-T 0.1` on a 16M EP all-to-all printed a traceback
from each rank, wrote 0 bytes with --json, and its error named the peer's secondary failure ('Connection closed by
peer'), not the timeout, where `bench` records the point failed and names the rank that failed first. Now the
collective's row is failed with the first rank's cause, the collectives after it are said not to be measured, the
table or the (schema-valid) document is still printed, and the run exits 1 with one error line, no traceback.

The hang is real: rank 1 arrives at the first collective late (it sleeps past rank 0's --timeout before calling it),
so rank 0's gloo wait times out and rank 1 then finds the connection gone."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    """A small plan with two collectives to verify (EP all-to-all, DP grad bucket): qwen3-30b-a3b on 4 GPUs."""
    folder = tmp_path_factory.mktemp("plan")
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4",
                                      "--gbs", "64", "--emit", "json", "--out", str(folder), "--layout",
                                      "tp=1,pp=1,ep=2,etp=1,cp=1"])
    assert result.exit_code == 0, result.output
    return folder / "plan.json"


@pytest.fixture
def rank_1_late(monkeypatch):
    """Rank 1 reaches the first collective 3 x --timeout after rank 0 (the ranks are forked: they inherit this)."""
    import commbench.measure.harness as harness

    real = harness.measure_point
    calls = {"n": 0}

    def late(backend, *args, **kwargs):
        calls["n"] += 1
        if backend.rank == 1 and calls["n"] == 1:
            time.sleep(3 * TIMEOUT_S)
        return real(backend, *args, **kwargs)

    monkeypatch.setattr(harness, "measure_point", late)


def _verify(plan_file, *extra):
    return CliRunner().invoke(app, ["verify-plan", str(plan_file), "--nproc", "2", "-e", "64K", "--iters", "1",
                                    "-T", str(TIMEOUT_S), *extra], env={"COLUMNS": "250"})


def test_a_timed_out_collective_is_a_failed_point_in_a_valid_document(plan_file, rank_1_late):
    import jsonschema

    from tests.test_json_output import schema

    result = _verify(plan_file, "--json")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "rank 0 failed first" in errors[0] and "Timed out" in errors[0], errors[0]
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema("verify-plan"), cls=jsonschema.Draft202012Validator)
    first, *rest = doc["points"]
    assert rest, "the plan has a collective after the one that fails"
    assert first["error"].startswith(f"failed while measuring {first['collective']}: ") and "Timed out" in first["error"]
    assert first["measured_time_us"] is None and first["num_wrong"] is None
    assert all(p["error"].startswith("not measured") and p["measured_time_us"] is None for p in rest), rest
    assert doc["failed"] in errors[0]


def test_the_table_says_which_collective_failed(plan_file, rank_1_late):
    result = _verify(plan_file)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    assert "measured vs" not in result.stderr and "measured here vs" in result.stdout, result.output
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED:")]
    assert len(failed) == 2 and "failed" in failed[0] and "not measured" in failed[1], result.stdout
    assert "rank 0 failed first" in result.stderr and "Timed out" in result.stderr, result.stderr
