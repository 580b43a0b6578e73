"""Llama 3 RoPE scaling in an hf: config is `{"rope_type": "llama3", "factor": F, "low_freq_factor": L,
"high_freq_factor": H, "original_max_position_embeddings": M}`; commbench read F only, so a config with L=2 was
planned and emitted (`--use-rope-scaling --rope-scaling-factor 8`) as if it were Llama 3.1's L=1: megatron-core 0.16.1
and TorchTitan 0.3.0 both build L=1, H=4, M=8192 whatever the config says. Now the bands are read, real configs
(Llama-3.1-8B factor 8, Llama-3.2-1B factor 32, both 1 / 4 / 8192) plan as before, and a changed band is refused
for the framework in one line naming the field, the value and what that framework builds."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner import load_model
from commbench.planner.search.frameworks import LLAMA3_ROPE_BUILT, llama3_rope_refusal

HF = Path(__file__).parent / "data" / "hf"
PLAN = ["--system", "h100-hgx", "--gpus", "8", "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"]


def _source(package: str, path: str) -> str:
    """A file of an installed package, read without importing it (torchtitan's imports need triton)."""
    return (Path(importlib.util.find_spec(package).submodule_search_locations[0]) / path).read_text()


def _defaults(tree: ast.AST, cls: str) -> dict:
    """The annotated defaults of a class `cls` in `tree` (TorchTitan's RoPE.Config)."""
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {a.target.id: ast.literal_eval(a.value) for a in node.body if isinstance(a, ast.AnnAssign) and a.value
            and isinstance(a.value, ast.Constant)}


def test_both_frameworks_build_the_bands_commbench_says():
    """megatron-core 0.16.1: _apply_scaling's defaults, and RotaryEmbedding passes it the factor alone; TorchTitan
    0.3.0: RoPE.Config's defaults, which no llama3 flavor sets."""
    built = {key: value for key, _, value in LLAMA3_ROPE_BUILT}
    tree = ast.parse(_source("megatron", "core/models/common/embeddings/rotary_pos_embedding.py"))
    scaling = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_apply_scaling")
    names = [a.arg for a in scaling.args.args][-len(scaling.args.defaults):]
    assert {n: ast.literal_eval(d) for n, d in zip(names, scaling.args.defaults)} == {"factor": 8, **built}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "_apply_scaling"]
    assert len(calls) == 1 and [k.arg for k in calls[0].keywords] == ["factor"]
    rope = ast.parse(_source("torchtitan", "models/common/rope.py"))
    config = next(n for n in ast.walk(rope) if isinstance(n, ast.ClassDef) and n.name == "RoPE")
    assert {k: v for k, v in _defaults(config, "Config").items() if k in built} == built
    llama3 = _source("torchtitan", "models/llama3/__init__.py")
    assert not any(key in llama3 for key in built) and 'scaling="llama"' in llama3


@pytest.mark.parametrize("folder, factor", [("Llama-3.1-8B", 8.0), ("Llama-3.2-1B-Instruct", 32.0)])
def test_real_configs_read_their_bands_and_plan(folder, factor):
    model = load_model(f"hf:{HF / folder}")
    arch = model.architecture
    assert (arch.rope_scaling, arch.rope_scaling_factor) == ("llama3", factor)
    assert (arch.llama3_low_freq_factor, arch.llama3_high_freq_factor, arch.llama3_original_positions) == (1, 4, 8192)
    for framework in ("megatron", "torchtitan"):
        assert llama3_rope_refusal(model, framework) is None
        result = CliRunner().invoke(app, ["plan", "--model", f"hf:{HF / folder}", *PLAN, "--framework", framework])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("key, value, built", [("low_freq_factor", 2.0, "1"), ("high_freq_factor", 8.0, "4"),
                                               ("original_max_position_embeddings", 4096, "8192")])
@pytest.mark.parametrize("framework, who", [("megatron", "Megatron-LM core_v0.16.1"), ("torchtitan", "TorchTitan 0.3.0")])
def test_a_changed_band_is_refused_in_one_line(tmp_path, key, value, built, framework, who):
    raw = json.loads((HF / "Llama-3.1-8B" / "config.json").read_text())
    raw["rope_scaling"][key] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    result = CliRunner().invoke(app, ["plan", "--model", f"hf:{tmp_path}", *PLAN, "--framework", framework])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"error: hf:{tmp_path.name}: rope_scaling.{key}={value:g} is invalid with "
                               f"--framework {framework}: {who}"), lines[0]
    assert f"builds {built}," in lines[0]
