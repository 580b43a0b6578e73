"""Probe AE finding 3: an ETP 2 x EP 2 moe_all_to_all record holds params.ep_size 4 (the ranks of the exchange, ETP x
EP, as collectives/moe_all_to_all.py means it), but neither docs/json-output.md nor the record schema defined
ep_size (nor experts_per_rank, trace_rows, ...): a reader took it for the EP size. Every params key an MoE record
holds is now defined, in the schema's params.properties and in docs/json-output.md, as what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np

from collectives import get_collective
from commbench.moe.params import DEFAULTS

ROOT = Path(__file__).parent.parent
SCHEMA = json.loads((ROOT / "commbench/data/schemas/results-record.schema.json").read_text())
DOC = " ".join((ROOT / "docs/json-output.md").read_text().split())   # words, not line breaks


class _Comm:
    def __init__(self, size: int) -> None:
        self.size, self.rank = size, 0


class _Backend:   # prepare only allocates and uploads; nothing is exchanged here
    def empty(self, n, dtype):
        return np.zeros(n)

    def upload(self, values, dtype):
        return np.asarray(values)


def _params(ranks: int, **given) -> dict:
    moe = get_collective("moe_all_to_all")
    options = {"tokens_per_rank": [16], "hidden": 32, "num_experts": 8, "top_k": 2, **given}
    (spec, _), = moe.plan_specs(options, ranks)
    prepared = moe.prepare(_Comm(ranks), _Backend(), spec)
    return {**spec.params, **prepared.params}


def test_ep_size_is_the_exchange_ranks_etp_x_ep():
    params = _params(4, dispatch_mode="per-rank", expert_tp=2)
    # 4 ranks = ETP 2 x EP 2: ep_size is the exchange's 4 ranks, each EP rank holds 8 / 2 experts
    assert params["ep_size"] == 4 and params["expert_tp"] == 2 and params["experts_per_rank"] == 4
    described = SCHEMA["$defs"]["measurement"]["properties"]["params"]["properties"]
    assert "ETP x EP" in described["ep_size"]["description"]
    assert "ETP x EP" in DOC[DOC.index("`ep_size`"):][:400]


def test_every_moe_params_key_is_defined_in_the_schema_and_the_doc(tmp_path):
    trace = tmp_path / "t.npy"
    np.save(trace, np.array([[0, 1], [2, 3], [4, 5]]))
    keys = set(_params(4, dispatch_mode="per-rank", expert_tp=2)) | set(_params(2, capacity_factor=1.0)) | set(
        _params(2, routing=f"trace:{trace}")) | set(DEFAULTS)
    assert {"ep_size", "experts_per_rank", "trace_rows", "trace_recycled", "pad_to_capacity"} <= keys
    described = SCHEMA["$defs"]["measurement"]["properties"]["params"].get("properties", {})
    assert sorted(keys - set(described)) == []
    assert all(described[k].get("description") for k in keys)
    assert sorted(k for k in keys if f"`{k}`" not in DOC) == []


def test_an_imported_records_unknown_values_still_validate():
    record = {"record_type": "measurement", "run_id": "r", "collective": "moe_all_to_all", "backend": "nccl",
              "size_bytes": 8, "count": 4, "dtype": "bfloat16", "op": None, "in_place": False, "world_size": 2,
              "group_size": 2, "iters": 1, "warmup_iters": 0, "status": "ok",
              "params": {"tokens_per_rank": "unknown", "hidden": 128, "top_k": 2, "num_experts": 4, "seed": "unknown",
                         "preset": None, "routing": "uniform", "dispatch_mode": "per-expert", "dispatch_dtype": "bf16",
                         "combine_dtype": "bf16", "ep_size": 2, "experts_per_rank": "unknown", "expert_tp": "unknown",
                         "capacity_factor": 1.25, "pad_to_capacity": False, "trace_rows": "unknown",
                         "trace_recycled": "unknown"}}
    jsonschema.validate(record, SCHEMA)
    record["params"]["ep_size"] = "four"   # not a count, not "unknown"
    try:
        jsonschema.validate(record, SCHEMA)
    except jsonschema.ValidationError:
        return
    raise AssertionError("params.ep_size 'four' validated")
