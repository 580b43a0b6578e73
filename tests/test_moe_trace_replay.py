"""A routing trace replayed for more tokens than it holds is recorded as recycled, and a per-rank trace replays on its
own rank count only (found from outside: a 64-token trace replayed for 2 x 100 tokens, and a (4, 16, 2) per-rank trace
replayed on 2 ranks at 64 tokens -- rank 1 replaying rank 0's tokens -- both exited 0 recording only 'trace:...')."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from commbench.errors import CommbenchError
from commbench.moe.params import sweep_params
from commbench.moe.routing import load_trace, parse_routing, route, trace_replay

REPO = Path(__file__).resolve().parents[1]


def _trace(shape: tuple[int, ...], experts: int = 8, top_k: int = 2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(experts)[:top_k] for _ in range(int(np.prod(shape)))]
    return np.array(rows).reshape(*shape, top_k)


def test_a_per_rank_trace_gives_each_rank_its_own_tokens_and_refuses_another_rank_count(tmp_path):
    path = tmp_path / "t3.npy"
    trace = _trace((4, 16))
    np.save(path, trace)
    ids = route(parse_routing(f"trace:{path}"), num_ranks=4, tokens_per_rank=32, num_experts=8, top_k=2, seed=0)
    for rank in range(4):   # its own 16 tokens, twice: never another rank's
        assert np.array_equal(ids[rank], np.concatenate([trace[rank], trace[rank]]))
    with pytest.raises(ValueError, match="per-rank trace of 4 ranks: it replays on 4 ranks only, not 2"):
        route(parse_routing(f"trace:{path}"), num_ranks=2, tokens_per_rank=64, num_experts=8, top_k=2, seed=0)
    with pytest.raises(CommbenchError, match="per-rank trace of 4 ranks"):
        sweep_params({"routing": f"trace:{path}", "num_experts": 8, "top_k": 2, "tokens_per_rank": [64]}, 2)


def test_recycling_is_counted_in_params_and_a_note(tmp_path):
    flat = _trace((64,))
    params, notes = trace_replay(flat, 2, 100)
    assert params == {"trace_rows": 64, "trace_recycled": True} and "200 tokens needed" in notes[0]
    assert trace_replay(flat, 2, 32) == ({"trace_rows": 64, "trace_recycled": False}, [])
    per_rank = _trace((2, 16))
    assert trace_replay(per_rank, 2, 17)[0] == {"trace_rows": 16, "trace_recycled": True}
    np.save(tmp_path / "p.npy", per_rank)
    assert load_trace(str(tmp_path / "p.npy"), num_experts=8, top_k=2, per_rank=True).shape == (2, 16, 2)


@pytest.mark.timeout(120)
def test_bench_records_a_recycled_trace(tmp_path):
    np.save(tmp_path / "t.npy", _trace((64,)))
    run = subprocess.run([sys.executable, "-m", "commbench", "bench", "moe_all_to_all", "--nproc", "2", "--experts",
                          "8", "--top-k", "2", "--hidden", "64", "-n", "2", "-w", "1", "--routing",
                          f"trace:{tmp_path / 't.npy'}", "--tokens", "100,32", "-O", str(tmp_path / "r.jsonl")],
                         capture_output=True, text=True, timeout=100, env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    seen = {r["params"]["tokens_per_rank"]: (r["params"]["trace_recycled"], any("cyclically" in n for n in r["notes"]))
            for r in records if r["record_type"] == "measurement"}
    assert seen == {100: (True, True), 32: (False, False)}
