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


def test_a_release_offers_the_flex_backends_its_own_recipes_set_on_the_gpu():
    """probe PA: `plan --software 26.04` on H100 wrote --moe-flex-dispatcher-backend deepep (26.04.01, 26.06, 26.08
    too), though no H100 recipe sets DeepEP from 26.04 on (Megatron-Bridge v0.4.0 qwen3_workload_base_configs.py:
    422-430: hybridep for Qwen3-30B-A3B on H100 at FP8): the backends were those of the release and every older one,
    so 25.09's DeepEP stayed offered for ever. A release offers what its own recipes set on the GPU (its stand-in's)."""
    from commbench.planner.layout.recipes import flex_backend, release_flex_backends, releases
    from commbench.planner.layout.release_flags import release_takes
    assert release_flex_backends("26.04", "h100") == {"hybridep"}
    assert release_flex_backends("26.08", "h200") == {"hybridep"}              # H200 reads H100's recipes
    assert release_flex_backends("26.02.01", "h100") == {"deepep", "hybridep"}
    assert release_flex_backends("26.02", "h100") == {"hybridep"}               # its container has no DeepEP
    assert release_flex_backends("26.04.01", "b200") == {"deepep", "hybridep"}
    assert [flex_backend(8, r, "h100") for r in ("25.09", "25.11", "26.02", "26.02.01", "26.04", "26.08")] == \
        ["deepep", "deepep", "hybridep", "deepep", "hybridep", "hybridep"]
    assert flex_backend(72, "26.08", "gb300") == "hybridep"
    rows = [r for r in recipes_json()["recipes"] if not r.get("unresolved") and r.get("flex_backend")]
    for release in releases():   # every backend a recipe sets is offered (but DeepEP in 26.02), and each offered parses
        for row in (r for r in rows if r["release"] == release and (release, r["flex_backend"]) != ("26.02", "deepep")):
            assert row["flex_backend"] in release_flex_backends(release, row["gpu"]), (release, row["config"])
        for gpu in ("h100", "b200", "b300", "gb200", "gb300", "h800"):
            for backend in release_flex_backends(release, gpu):
                assert release_takes(["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend",
                                      backend], release), (release, gpu, backend)


def test_plan_26_04_on_h100_writes_the_hybridep_its_recipes_set_and_says_why():
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16",
                                      "--precision", "fp8", "--software", "26.04", "--top", "1", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    args = doc["megatron"]["args"]
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "flex"
    assert args[args.index("--moe-flex-dispatcher-backend") + 1] == "hybridep"
    assert any("--moe-flex-dispatcher-backend hybridep: the Megatron-Bridge 26.04 recipes read for" in line
               and "set HybridEP, none DeepEP" in line for line in doc["explanation"] + doc.get("assumptions", []))
