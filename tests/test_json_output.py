"""Every `--json` output validates against its documented schema (commbench/data/schemas, docs/json-output.md);
a pinned and a searched plan share one schema."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter, Measurement

SCHEMAS = Path(__file__).resolve().parents[1] / "commbench" / "data" / "schemas"
PLAN = ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "mxfp8"]
# these tests check the documents' shape; the same plan search, run again for several of them, is made once
pytestmark = pytest.mark.usefixtures("search_once")


def schema(name: str) -> dict:
    doc = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def run_json(args: list[str], exit_code: int = 0) -> dict:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def validate(doc: dict, name: str) -> None:
    jsonschema.validate(doc, schema(name), cls=jsonschema.Draft202012Validator)


@pytest.fixture(scope="module")
def results_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("json") / "ar.jsonl"
    with JsonlWriter(path) as writer:
        for size in (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26):
            time_us = 20.0 + size / 5e3
            writer.write(Measurement(run_id="r", collective="all_reduce", backend="gloo", size_bytes=size, count=size // 4,
                                     dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, iters=10,
                                     warmup_iters=2, time_us_median=time_us, time_us_p99=time_us * 1.02,
                                     algbw_gbps=size / time_us / 1e3, busbw_gbps=size / time_us / 1e3, num_wrong=0))
    return path


def test_pinned_and_searched_plans_share_one_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # -O given relative: written_files names the files relative to here, as given
    searched = run_json(PLAN + ["--json", "--top", "3", "--out", "s"])
    winner = ",".join(f"{k}={str(v).lower()}" for k, v in searched["layout"].items() if k not in ("dp", "precision"))
    pinned = run_json(PLAN + ["--layout", winner, "--json", "--out", "p"])
    on_disk = [json.loads((tmp_path / folder / "plan.json").read_text()) for folder in ("p", "s")]
    for doc in (pinned, searched, *on_disk):
        validate(doc, "plan")
    # session 45: the --json document did not say where -O's files went (the terminal's line did)
    for doc, folder in ((pinned, "p"), (searched, "s")):
        assert sorted(doc["written_files"]) == sorted(f"{folder}/{f.name}" for f in (tmp_path / folder).iterdir())
        assert f"{folder}/megatron_args.txt" in doc["written_files"]
    assert not any("written_files" in doc for doc in on_disk)   # plan.json is read from other directories
    assert pinned["mode"] == "pinned" and searched["mode"] == "search"
    assert pinned["layout"] == searched["layout"]  # the search's winner, pinned, predicts the same step
    assert pinned["predicted"]["step_s"] == pytest.approx(searched["predicted"]["step_s"])
    # probe Q: the pinned plan's `predicted` lacked mem_headroom_bytes and ep_racks_per_group
    assert set(pinned["predicted"]) == set(searched["predicted"]) >= {"mem_headroom_bytes", "ep_racks_per_group"}
    for key in ("mem_headroom_bytes", "ep_racks_per_group"):
        assert pinned["predicted"][key] == pytest.approx(searched["predicted"][key])
    assert searched["predicted"]["mem_headroom_bytes"] == pytest.approx(searched["top"][0]["mem_headroom_bytes"])
    assert searched["predicted"]["ep_racks_per_group"] == searched["top"][0]["ep_racks"]
    assert shlex.split((tmp_path / "p" / "megatron_args.txt").read_text()) == pinned["megatron_args"]


def test_plan_schema_refuses_a_document_missing_its_layout():
    doc = run_json(PLAN + ["--layout", "tp=1,pp=4,vp=16,ep=32,mbs=2,gbs=4096", "--json"])
    del doc["layout"]
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, "plan")
    doc = run_json(PLAN + ["--json", "--top", "2"]) | {"unknown_top_level": 1}
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, "plan")


def test_compare_json(results_file):
    doc = run_json(["compare", str(results_file), str(results_file), "--allow-same-run", "--json"])
    validate(doc, "compare")
    assert doc["passed"] and len(doc["points"]) == 7 and {p["verdict"] for p in doc["points"]} == {"ok"}
    # typed fields for scripts beside the display text (issue 29 item 6)
    first = doc["points"][0]
    assert isinstance(first["size_bytes"], int) and first["dtype"] and isinstance(first["params"], dict)
    assert first["verdict_code"] == "ok" and first["regressed"] is False and first["point"].startswith(first["collective"])
    assert sorted(p["size_bytes"] for p in doc["points"]) == [p["size_bytes"] for p in doc["points"]]


def test_fit_json(results_file, tmp_path):
    doc = run_json(["fit", str(results_file), "--json", "-O", str(tmp_path / "fabric.json")])
    validate(doc, "fit")
    assert doc["curves"][0]["collective"] == "all_reduce" and (tmp_path / "fabric.json").exists()


def test_env_json():
    doc = run_json(["env", "--json"])
    validate(doc, "env")
    assert doc["backend"] in ("gloo", "nccl")


def test_systems_json():
    doc = run_json(["systems", "--checks", "--json"])
    validate(doc, "systems")
    assert {p["preset"] for p in doc["presets"]} >= {"gb300-nvl72", "h100-hgx"} and doc["checks"]


def test_predict_json_names_the_algorithm_per_size():
    doc = run_json(["predict", "-c", "all_reduce", "-g", "144", "--system", "gb300-nvl72", "--racks", "2", "-b", "1K",
                    "-e", "1G", "-f", "32", "--json"])
    validate(doc, "predict")
    assert all(row["algorithm"] for row in doc["rows"]) and all(row["predicted"] for row in doc["rows"])


def test_sweep_dry_run_json_from_a_shipped_name():
    doc = run_json(["sweep", "ci-small", "--dry-run", "--json"])
    validate(doc, "sweep-plan")
    assert doc["sweep"] == "ci-small" and len(doc["points"]) > 10


def test_tune_json_from_results(results_file, tmp_path):
    doc = run_json(["tune", "--results", str(results_file), "--out", str(tmp_path), "--top", "2", "--json"])
    validate(doc, "plan")
    sources = next(a for a in doc["assumptions"] if a.startswith("network sources: "))
    assert len(sources.split("; ")) == len(set(sources.split("; ")))


def test_old_output_spellings_still_work_with_a_notice(results_file, tmp_path):
    result = CliRunner().invoke(app, ["fit", str(results_file), "-o", str(tmp_path / "f.json")])
    assert result.exit_code == 0 and (tmp_path / "f.json").exists()
    assert "-o/--output is now -O/--out" in result.stderr
    clash = CliRunner().invoke(app, ["fit", str(results_file), "-o", "a.json", "-O", "b.json"])
    assert clash.exit_code == 2 and "disagree" in clash.stderr
    assert "--output" not in CliRunner().invoke(app, ["fit", "--help"], env={"COLUMNS": "200"}).stdout


def test_tune_takes_a_calibration_file(results_file, tmp_path):
    base = run_json(["tune", "--results", str(results_file), "--out", str(tmp_path / "a"), "--top", "2", "--json",
                     "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096"])
    slow = tmp_path / "slow.json"
    # a user's runs (of the GB300 tune plans) say the expert GEMMs are half as fast as the shipped term: the plan must
    # follow (a file naming no runs cannot show it was fitted on GB300: its kernel terms stay shipped, below)
    slow.write_text(json.dumps({"kind": "commbench-calibration", "terms": {"grouped_gemm_8bit_efficiency": 0.2},
                                "runs": ["DeepSeek-V3 256x gb300-nvl72 MXFP8 tp1 pp2 ep32: 1 tokens/s/GPU"]}))
    calibrated = run_json(["tune", "--results", str(results_file), "--out", str(tmp_path / "b"), "--top", "2",
                           "--json", "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096", "--calibration", str(slow)])
    validate(calibrated, "plan")
    assert calibrated["layout"] == base["layout"]
    before, after = (d["predicted"]["tokens_per_s_per_gpu"] for d in (base, calibrated))
    assert after < 0.9 * before
    # the same term fitted on B200 runs: tune plans GB300 (its --system) with the shipped kernel terms, and says so
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "commbench-calibration", "terms": {"grouped_gemm_8bit_efficiency": 0.2},
                                 "runs": ["Qwen3-30B-A3B B200x8 MXFP8 tp1 pp1 ep8: 1 tokens/s/GPU"]}))
    scoped = CliRunner().invoke(app, ["tune", "--results", str(results_file), "--out", str(tmp_path / "d"), "--top",
                                      "2", "--json", "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096",
                                      "--calibration", str(other)])
    assert scoped.exit_code == 0, scoped.output
    doc = json.loads(scoped.stdout)
    validate(doc, "plan")
    assert "grouped_gemm_8bit_efficiency" in doc["inputs"]["calibration_other_gpu_terms"]
    assert doc["predicted"]["tokens_per_s_per_gpu"] == before and "b200 only; for gb300: its kernel terms" in scoped.stderr
    unnamed = tmp_path / "unnamed.json"   # no runs: nothing shows it was fitted on GB300, so the same as B200's
    unnamed.write_text(json.dumps({"kind": "commbench-calibration", "terms": {"grouped_gemm_8bit_efficiency": 0.2}}))
    scoped = CliRunner().invoke(app, ["tune", "--results", str(results_file), "--out", str(tmp_path / "e"), "--top",
                                      "2", "--json", "--layout", "tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096",
                                      "--calibration", str(unnamed)])
    assert scoped.exit_code == 0, scoped.output
    assert json.loads(scoped.stdout)["predicted"]["tokens_per_s_per_gpu"] == before
    assert "records no runs it was fitted on" in " ".join(scoped.stderr.split())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "commbench-calibration", "terms": {"grouped_gemm_efficiency": 3}}))
    refused = CliRunner().invoke(app, ["tune", "--results", str(results_file), "--out", str(tmp_path / "c"),
                                       "--calibration", str(bad)])
    assert refused.exit_code == 2 and "grouped_gemm_efficiency" in refused.output


# --- typed fields for scripts (issue 29, item 6) ---

def test_plan_top_and_pareto_layouts_are_objects_with_their_text_beside():
    doc = run_json(PLAN + ["--json", "--top", "3"])
    validate(doc, "plan")
    assert doc["version"] == 3
    first = doc["top"][0]
    assert first["layout"] == doc["layout"]  # the winner, as the same object as the top-level layout
    assert first["layout_text"].startswith(f"TP{first['layout']['tp']} PP{first['layout']['pp']}")
    for entry in doc["pareto"]:
        assert isinstance(entry["layout"], dict) and isinstance(entry["layout"]["ep"], int)
    broken = json.loads(json.dumps(doc))
    broken["top"][0]["layout"] = first["layout_text"]   # the version-2 string no longer validates
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, "plan")


def test_env_json_has_typed_keys_beside_the_labels():
    doc = run_json(["env", "--json"])
    validate(doc, "env")
    machine = doc["machine"]
    assert machine["backend"] == doc["backend"] and isinstance(machine["num_cpu_cores"], int)
    assert machine["backends"]["gloo"]["available"] is True
    assert machine["torch_version"] == doc["environment"]["torch"]


def test_results_records_validate_against_the_record_schema(tmp_path):
    from dataclasses import fields

    from commbench.results.records import Measurement, RunHeader
    record_schema = schema("results-record")
    for name, cls in (("header", RunHeader), ("measurement", Measurement)):
        assert set(record_schema["$defs"][name]["properties"]) == {f.name for f in fields(cls)}, name
    out = tmp_path / "ar.jsonl"
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "8", "-e", "64", "-f", "8",
                                      "-n", "2", "-w", "0", "-J", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["record_type"] for line in lines] == ["header", "measurement", "measurement"]
    for line in lines:
        validate(line, "results-record")
    bad = dict(lines[1], size_bytes="8 B")
    with pytest.raises(jsonschema.ValidationError):
        validate(bad, "results-record")


# every --json command, cheaply: (name, args); "{results}", "{tmp}" and "{runs}" are filled in below
JSON_COMMANDS = {
    "systems": ["systems", "--json"],
    "predict": ["predict", "-c", "all_reduce", "-g", "8", "--system", "h100-hgx", "-b", "1K", "-e", "1M", "--json"],
    "env": ["env", "--json"],
    "sweep": ["sweep", "ci-small", "--dry-run", "--json"],
    "plan-search": ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs", "64",
                    "--top", "2", "--json"],
    "plan-pinned": ["plan", "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "4", "--gbs", "64",
                    "--layout", "tp=2,pp=1,ep=2,etp=1,cp=1", "--json"],
    "fit": ["fit", "{results}", "--json"],
    "compare": ["compare", "{results}", "{results}", "--allow-same-run", "--json"],
    "calibrate": ["calibrate", "--evaluate", "{runs}", "--json"],
    "tune": ["tune", "--results", "{results}", "--out", "{tmp}/tune", "--top", "2", "--json"],
}
# run in a fresh interpreter: rich reads FORCE_COLOR / TTY_COMPATIBLE when a console is made (at import)
_DRIVER = """
import json, sys
from typer.testing import CliRunner
from commbench.cli.app import app
out = {}
for name, args in json.loads(sys.argv[1]).items():
    result = CliRunner().invoke(app, args)
    out[name] = {"exit_code": result.exit_code, "stdout": result.stdout, "output": result.output}
sys.__stdout__.write(json.dumps(out))
"""


@pytest.fixture(scope="module", params=["FORCE_COLOR", "TTY_COMPATIBLE"])
def coloured_outputs(request, results_file, tmp_path_factory):
    """Every --json command's stdout with rich told to colour (FORCE_COLOR=1 or TTY_COMPATIBLE=1)."""
    import os
    import subprocess
    import sys
    tmp = tmp_path_factory.mktemp("colour")
    runs = tmp / "runs.json"
    runs.write_text(json.dumps([dict(model="deepseek-v3", gpu="gb300-nvl72", num_gpus=256, precision="MXFP8", seq_len=4096,
                                     tokens_per_s_per_gpu=6300.0, tp=1, pp=2, vp=8, ep=32, etp=1, cp=1, mbs=1, gbs=4096)]))
    fill = {"{results}": str(results_file), "{runs}": str(runs)}
    commands = {name: [fill.get(a, a.replace("{tmp}", str(tmp))) for a in args] for name, args in JSON_COMMANDS.items()}
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env |= {request.param: "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(commands)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_json_stays_plain_when_colour_is_forced(coloured_outputs, name):
    """FORCE_COLOR=1 / TTY_COMPATIBLE=1 coloured every --json document with ANSI codes (rich's print_json)."""
    got = coloured_outputs[name]
    assert got["exit_code"] == 0, got["output"]
    assert "\x1b[" not in got["stdout"]
    assert isinstance(json.loads(got["stdout"]), dict)


def test_no_command_prints_json_through_rich():
    """One writer of JSON documents (commbench.cli.base.print_json); rich's Console.print_json colours them."""
    import re
    root = Path(__file__).resolve().parents[1] / "commbench"
    hits = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if re.search(r"\.print_json\(", line)]
    assert hits == []


def test_link_rates_say_their_unit_is_gigabytes():
    """Probe Q: systems' nvlink_gbps / nic_gbps and the plan's link_gbps_per_gpu are GB/s (1e9 bytes/s) but read as
    Gb/s; the schemas now say so (the names stay: scripts read them)."""
    presets = schema("systems")["properties"]["presets"]["items"]["properties"]
    tiers = schema("plan")["properties"]["inputs"]["properties"]["fabric"]["properties"]["tiers"]
    for field in (presets["nvlink_gbps"], presets["nic_gbps"], tiers["additionalProperties"]["properties"]["link_gbps_per_gpu"]):
        assert "GB/s" in field["description"] and "not gigabits" in field["description"]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "json-output.md").read_text()
    assert "`nvlink_gbps` and `nic_gbps` are per GPU per direction in GB/s" in docs and "link_gbps_per_gpu` is per GPU" in docs
    # and the values are what the descriptions say: H100 HGX has a 400 Gb/s NIC per GPU, NVLink 4 450 GB/s a direction
    h100 = next(p for p in run_json(["systems", "--json"])["presets"] if p["preset"] == "h100-hgx")
    assert h100["nic_gbps"] * 8 == 400 and h100["nvlink_gbps"] == 450
    plan = run_json(["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--top", "1", "--json"])
    validate(plan, "plan")
    assert plan["inputs"]["fabric"]["tiers"]["scale_out"]["link_gbps_per_gpu"] == h100["nic_gbps"]
