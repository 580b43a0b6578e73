"""Every file kind users hand to commbench: binary, not UTF-8, not an object, wrong types, missing keys,
truncated -> one line naming the file (and line or field), exit 2, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset

runner = CliRunner()
BINARY = bytes(range(256)) * 4
NOT_UTF8 = b"name = \"caf\xe9\"\n"


def one_error_line(args: list[str], *must: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), result.output
    assert "Traceback" not in result.output and len(lines) <= 2, result.output
    for text in must:
        assert text in result.output, result.output
    return result.output


@pytest.mark.parametrize("content,must", [
    (BINARY, "is binary, not text"), (NOT_UTF8, "is not UTF-8 text (byte 0xe9 on line 1)"),
    (b"[sweep]\nname = \"x\n", "not valid TOML"), (b"[sweep]\nname = 3\n[[run]]\ncollective = 5\nsizes=[8]\n", "collective"),
])
def test_sweep_files(tmp_path, content, must):
    path = tmp_path / "s.toml"
    path.write_bytes(content)
    one_error_line(["sweep", str(path), "--dry-run"], must)


@pytest.mark.parametrize("content,must", [
    (BINARY, "is binary, not JSONL (a NUL byte on line 1)"),
    (b"[1, 2]\n", "expected a JSON object, got list"),
    (b'{"record_type": "measurement", "run_id": 5}\n', "field 'run_id'=5 has the wrong type"),
    (b'{"record_type": "header", "run_id": "x"}\n', "is missing"),
    (b'{"record_type": "measurement", "run_id": "x", "coll', "Unterminated string"),
    (b"\xff\xfe{}\n", "not UTF-8 text"),
])
def test_results_files(tmp_path, content, must):
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    result = runner.invoke(app, ["report", str(path), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 2 and "Traceback" not in result.output and must in result.output, result.output
    fit = runner.invoke(app, ["fit", str(path)])
    assert fit.exit_code == 2 and "Traceback" not in fit.output and len(fit.output.strip().splitlines()) <= 2


def fabric_text() -> dict:
    return json.loads(load_preset("h100-hgx", num_gpus=16).to_json())


@pytest.mark.parametrize("mutate,must", [
    (lambda d: BINARY, "is binary"),
    (lambda d: b"[]", "a JSON object"),
    (lambda d: json.dumps(d)[:100].encode(), "not valid JSON"),
    (lambda d: json.dumps({**d, "domain_size": "eight"}).encode(), "field 'domain_size'='eight' has the wrong type"),
    (lambda d: json.dumps({k: v for k, v in d.items() if k != "curves"}).encode(), "field 'curves' is missing"),
    (lambda d: json.dumps({**d, "curves": [{"collective": 1}]}).encode(), "curves[0]: field"),
    (lambda d: json.dumps({**d, "tiers": {"scale_up": 3}}).encode(), "tiers.scale_up: expected a JSON object"),
])
def test_fabric_files(tmp_path, mutate, must):
    path = tmp_path / "f.json"
    path.write_bytes(mutate(fabric_text()))
    one_error_line(["plan", "--model", "mixtral-8x22b", "--system", str(path), "--gpus", "16",
                    "--layout", "tp=8,pp=1,vp=1,ep=2,mbs=1,gbs=64"], must)


@pytest.fixture(scope="module")
def plan_doc(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("plan")
    result = runner.invoke(app, ["plan", "--model", "mixtral-8x22b", "--system", "h100-hgx", "--gpus", "64",
                                 "--layout", "ep=8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "plan.json").read_text())


@pytest.mark.parametrize("mutate,must", [
    (lambda d: BINARY, "is binary"),
    (lambda d: json.dumps(d)[:200].encode(), "not valid JSON"),
    (lambda d: json.dumps({**d, "layout": {**d["layout"], "tp": "two"}}).encode(), "field 'tp'='two' has the wrong type"),
    (lambda d: json.dumps({**d, "layout": 7}).encode(), "layout: expected a JSON object"),
    (lambda d: json.dumps({**d, "inputs": []}).encode(), "inputs: expected a JSON object"),
])
def test_plan_files(tmp_path, plan_doc, mutate, must):
    path = tmp_path / "p.json"
    path.write_bytes(mutate(plan_doc))
    one_error_line(["verify-plan", str(path), "--nproc", "2"], must)


GQA = (b'[model.x]\nlayers = 32\nhidden = 4096\nheads = 32\nkv_heads = 8\nhead_dim = 128\nattention = "gqa"\n'
       b'dense_ffn = 14336\nvocab = 128256\n')


@pytest.mark.parametrize("content,must", [
    (BINARY, "is binary"), (NOT_UTF8, "not UTF-8"), (b"[model.x\n", "valid TOML"), (b"model = 3\n", "[model.NAME]"),
    (b"[model.x]\nlayers = 'many'\nhidden = 8\nheads = 1\nvocab = 10\n", "layers='many' is invalid"),
    (b"[model.x]\nlayers = 8.7\nhidden = 8\nheads = 1\nvocab = 10\n", "layers=8.7 is invalid: a whole number"),
    (b"[model.x]\nlayers = 1e12\nhidden = 8\nheads = 1\nvocab = 10\n", "allowed 0..10,000,000"),
    (b"[model.x]\nhidden = 8\n", "model 'x' lacks required key 'layers'"),
    (b"[model.x]\nnum_layers = 8\nlayers = 8\nhidden = 8\nheads = 1\nvocab = 10\n",
     "key 'num_layers' is not a model field"),
    # a string read with bool() was true: glu = "no" emitted --swiglu
    (GQA + b'glu = "no"\n', "glu='no' is invalid: true or false"),
    (GQA + b'tied_embeddings = "false"\n', "tied_embeddings='false' is invalid: true or false"),
    # Megatron-LM needs heads % query groups == 0: kv_heads = 7 was planned and emitted
    (GQA.replace(b"kv_heads = 8", b"kv_heads = 7"), "x.kv_heads=7 is invalid: a divisor of heads (32)"),
])
def test_model_files(tmp_path, content, must):
    path = tmp_path / "m.toml"
    path.write_bytes(content)
    one_error_line(["plan", "--model", "x", "--model-file", str(path), "--system", "h100-hgx", "--gpus", "8"], must)


def test_import_of_a_binary_file_is_one_line(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(BINARY)
    one_error_line(["import", "nccl-tests", str(path), "-O", str(tmp_path / "o.jsonl")], "is binary")


def test_shipped_files_still_load(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    shutil.copy(repo / "sweeps" / "ci-small.toml", tmp_path / "c.toml")
    assert runner.invoke(app, ["sweep", str(tmp_path / "c.toml"), "--dry-run"]).exit_code == 0
