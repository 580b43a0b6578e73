"""A plan states the sequence length it used, and whether it was defaulted (readable output and --json); NVIDIA's
tuned layout is compared only at the sequence length its recipe trains at: a layout and global batch tuned at 8192
tokens ranked among layouts searched at 4096 is not like-for-like (the probe: hf Llama-3.1-70B on 64 H100 planned
at the hf default 4096 showed the 8192-token recipe's layout at rank 346, -22.8%; at --seq-len 8192, rank 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner.layout.recipe_model import recipe_seq_len, sequence_length
from commbench.planner.models.zoo import load_model
from commbench.planner.search.recipe_gap import versus_recipe, versus_recipe_lines
from commbench.planner.search.space import SearchRequest, search

HF_70B = f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Llama-3.1-70B'}"


def _plan(*args):
    res = CliRunner().invoke(app, ["plan", *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_the_recipe_seq_len_is_the_recipe_models():
    """Megatron-Bridge's Llama 3 recipes train at 8192 (recipes/llama/h100/llama3.py cfg.model.seq_length = 8192),
    DeepSeek-V3's at 4096; an hf: config of the same network reads those recipes and their length."""
    assert recipe_seq_len("llama3.1-70b") == 8192 and recipe_seq_len("deepseek-v3") == 4096
    assert sequence_length(load_model(HF_70B), None)[0] == 4096
    seq, note = sequence_length(load_model(HF_70B), None)
    assert "default" in note and "8192" in note and "--seq-len" in note
    assert sequence_length(load_model("llama3.1-70b"), 2048) == (2048, None)


@pytest.fixture(scope="module")
def hf_at_default_seq():
    req = SearchRequest(model=load_model(HF_70B), fabric=load_preset("h100-hgx", num_gpus=64), num_gpus=64, gbs=256,
                        precision="fp8")
    return search(req)


def test_a_recipe_at_another_seq_len_is_not_ranked(hf_at_default_seq):
    v = versus_recipe(hf_at_default_seq)
    assert v["recipe_seq_len"] == 8192 and v["seq_len"] == 4096
    assert "unavailable" in v and "rank" not in v and "best_gain_pct" not in v
    (line,) = versus_recipe_lines(v)
    assert "not compared" in line and "8192" in line and "4096" in line and "--seq-len 8192" in line


def test_at_the_recipes_seq_len_it_is_compared_and_recorded():
    req = SearchRequest(model=load_model("llama3.1-70b"), fabric=load_preset("h100-hgx", num_gpus=64), num_gpus=64,
                        gbs=256, precision="fp8")
    v = versus_recipe(search(req))
    assert v["recipe_seq_len"] == v["seq_len"] == 8192 and v["rank"] >= 1


def test_readable_search_and_json_state_the_seq_len_and_its_default():
    out = _plan("--model", HF_70B, "--system", "h100-hgx", "--gpus", "64")
    assert "seq_len 4096 (default" in out
    assert "rank" not in next(line for line in out.splitlines() if line.startswith("NVIDIA's tuned layout"))
    doc = json.loads(_plan("--model", HF_70B, "--system", "h100-hgx", "--gpus", "64", "--json"))
    assert doc["inputs"]["seq_len"] == 4096 and doc["inputs"]["seq_len_default"] is True
    assert "8192" in doc["inputs"]["seq_len_note"]
    assert doc["versus_recipe"]["recipe_seq_len"] == 8192 and doc["versus_recipe"]["seq_len"] == 4096
    given = json.loads(_plan("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--seq-len", "4096",
                             "--json"))
    assert given["inputs"]["seq_len"] == 4096 and given["inputs"]["seq_len_default"] is False
    assert "seq_len_note" not in given["inputs"]


def test_readable_pinned_plan_states_the_seq_len():
    out = _plan("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--layout",
                "tp=1,pp=1,vp=1,ep=1,cp=1,mbs=1,recompute=full,recompute_layers=5,fsdp=false")
    assert "seq_len 8192 (default" in out
    doc = json.loads(_plan("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--seq-len", "4096",
                           "--layout", "tp=1,pp=1,vp=1,ep=1,cp=1,mbs=1", "--json"))
    assert doc["inputs"]["seq_len"] == 4096 and doc["inputs"]["seq_len_default"] is False
