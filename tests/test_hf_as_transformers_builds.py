"""`--model hf:PATH` plans the network transformers (5.25.0) builds from the config.json: keys its class for the
model type does not read change nothing, a per-layer list it builds from decides over an older count key, and the
configs its save_pretrained writes (tests/data/hf-resaved, SOURCES.md there) plan as the hub files they came from."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.models.counts import param_counts
from commbench.planner.models.zoo import load_model

HF = Path(__file__).parent / "data" / "hf"


def _config(tmp_path, folder: str, drop=(), **changes) -> str:
    raw = json.loads((HF / folder / "config.json").read_text())
    raw.update(changes)
    for key in drop:
        raw.pop(key)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return f"hf:{tmp_path}"


def _megatron_args(model: str, gpus: int = 8, layout: str = "tp=1,pp=1,vp=1,ep=8,mbs=1") -> list[str]:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus),
                                      "--layout", layout, "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    return shlex.split(result.stdout.strip().splitlines()[-1])


def _refusal(model: str, gpus: int = 16) -> str:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--system", "b200-hgx", "--gpus", str(gpus)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


# --- 1. Qwen3-MoE has no shared expert ------------------------------------------------------------------------------

def test_qwen3_moe_shared_expert_key_builds_no_shared_expert_and_says_so(tmp_path):
    """transformers 5.25.0 modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock is `experts` and `gate` alone, and
    Qwen3MoeConfig has no shared_expert_intermediate_size: a config carrying one (1536 here) builds Qwen3-30B-A3B's
    30,532,122,624 parameters. It was planned with 2 shared experts (+452,984,832) and launched with
    --moe-shared-expert-intermediate-size 1536."""
    model = load_model(_config(tmp_path, "Qwen3-30B-A3B", shared_expert_intermediate_size=1536))
    assert model.num_shared_experts == 0
    assert param_counts(model).total == 30_532_122_624   # transformers' count on the meta device (probe AD)
    assert any("shared_expert_intermediate_size=1536" in note and "no shared expert" in note
               for note in model.extra.get("notes", ())), model.extra
    assert "--moe-shared-expert-intermediate-size" not in _megatron_args(f"hf:{tmp_path}")


def test_qwen3_moe_shared_expert_key_of_zero_is_not_noted(tmp_path):
    """Qwen3-Coder-480B's published config carries the key as 0: nothing to say."""
    model = load_model(f"hf:{HF / 'Qwen3-Coder-480B-A35B-Instruct'}")
    assert model.num_shared_experts == 0 and not model.extra.get("notes")


def test_qwen2_moe_still_reads_its_shared_expert():
    """Qwen2MoeSparseMoeBlock does build a (gated) shared expert of shared_expert_intermediate_size."""
    assert load_model(f"hf:{HF / 'Qwen1.5-MoE-A2.7B'}").num_shared_experts == 4
