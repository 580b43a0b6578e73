"""probe M finding 2: `plan --software 25.09` on a GB300 NVL72 rack emitted --moe-flex-dispatcher-backend hybridep
and --overlap-moe-expert-parallel-comm, though no recipe of 25.09 (Megatron-Bridge v0.1.0rc3) sets HybridEP (its only
flex recipes are DeepSeek-V3's on H100, with DeepEP and the EP overlap). recipes.json now records each recipe's flex
backend; the search takes the flex dispatcher only where the backend the fabric needs is one the release's recipes set,
and the EP overlap only where a recipe runs it with a dispatcher the fabric runs; the Software line says what is off."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import recipes_json


def test_every_flex_recipe_names_its_backend_and_hybridep_starts_in_25_11():
    from commbench.planner.layout.recipes import first_release_with_backend, release_flex_backends
    rows = [r for r in recipes_json()["recipes"] if not r.get("unresolved")]
    assert all(r["flex_backend"] in ("deepep", "hybridep") for r in rows if r["dispatcher"] == "flex")
    assert all(r["flex_backend"] is None for r in rows if r["dispatcher"] == "alltoall")
    assert release_flex_backends("25.09") == {"deepep"}            # v0.1.0rc3: DeepSeek-V3 on H100 only
    assert first_release_with_backend("hybridep") == "25.11"      # v0.2.0: GB200 / GB300


def test_25_09_on_an_nvl72_rack_has_neither_flex_nor_the_ep_overlap():
    from commbench.planner.layout.recipes import dispatch_limits, release_features
    has = release_features("25.09", "gb300", "mxfp8", "deepseek-v3", True, 72)
    assert has["dispatcher"] == {"alltoall"} and has["moe_a2a_overlap"] == {False}
    why = dispatch_limits("25.09", "gb300", "mxfp8", "deepseek-v3", True, 72)
    assert "HybridEP" in why["dispatcher"] and "25.11" in why["dispatcher"]
    assert "DeepEP on H100" in why["moe_a2a_overlap"]
    # where the release's recipes run them, they stay: 25.09 on H100 (DeepEP), 25.11 on GB300 (HybridEP)
    h100 = release_features("25.09", "h100", "fp8", "deepseek-v3", True, 8)
    assert "flex" in h100["dispatcher"] and True in h100["moe_a2a_overlap"]
    assert "flex" in release_features("25.11", "gb300", "mxfp8", "deepseek-v3", True, 72)["dispatcher"]
    assert dispatch_limits("26.04", "gb200", "mxfp8", "deepseek-v3", True, 72) == {}


def test_plan_25_09_on_gb300_emits_no_hybridep_nor_overlap_and_says_why():
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                      "--precision", "mxfp8", "--software", "25.09", "--top", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    args = doc["megatron"]["args"]
    assert "hybridep" not in args and "--overlap-moe-expert-parallel-comm" not in args
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "alltoall"
    software = next(line for line in doc["explanation"] if line.startswith("Software:"))
    assert "the flex dispatcher (this fabric takes HybridEP" in software
    assert "EP all-to-all overlap (release 25.09's recipes run it only with DeepEP on H100" in software
    assert "runs on GB300 and none stands in" in software


def test_a_flex_pin_the_release_cannot_run_here_is_one_line():
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                      "--precision", "mxfp8", "--software", "25.09", "--layout", "dispatcher=flex"])
    assert result.exit_code != 0
    line = result.output.strip()
    assert line.startswith("error: --layout dispatcher=flex") and "HybridEP" in line and "\n" not in line
