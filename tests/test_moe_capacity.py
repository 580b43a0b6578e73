"""moe_all_to_all's expert capacity (--capacity-factor, --pad-to-capacity; Megatron-Core 0.16.1 drop-and-pad):
the capacity formula and the counts against megatron-core's own functions, counts capped under skewed routing,
padding's fixed sizes, the data check on 2 and 4 gloo ranks, bad values in one line, and what records carry."""

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from collectives import REGISTRY
from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.measure.harness import LoopOptions, check_point, measure_point
from commbench.moe.accounting import split_rows, tokens_per_expert
from commbench.moe.capacity import drop_over_capacity, expert_capacity, padding_rows
from commbench.moe.params import MoeParams
from commbench.moe.routing import parse_routing, route
from commbench.results.render import moe_setup
from tests.distributed import run_ranks


def _zipf(n=4, tokens=256, experts=16, top_k=4, seed=3):
    return route(parse_routing("zipf:1.5"), num_ranks=n, tokens_per_rank=tokens, num_experts=experts, top_k=top_k,
                 seed=seed)


def test_capacity_is_megatrons_formula_by_hand():
    # ceil((T * k / E) * C): 256 tokens x top-4 over 16 experts = 64 per expert
    assert expert_capacity(tokens_per_rank=256, num_experts=16, top_k=4, capacity_factor=1.0) == 64
    assert expert_capacity(tokens_per_rank=256, num_experts=16, top_k=4, capacity_factor=1.25) == 80
    assert expert_capacity(tokens_per_rank=10, num_experts=16, top_k=3, capacity_factor=1.0) == 2  # ceil(1.875)
    assert expert_capacity(tokens_per_rank=1, num_experts=256, top_k=8, capacity_factor=0.1) == 1


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.5])
def test_counts_are_capped_at_capacity_under_zipf(factor):
    ids = _zipf()
    capacity = expert_capacity(tokens_per_rank=256, num_experts=16, top_k=4, capacity_factor=factor)
    kept = drop_over_capacity(ids, 16, capacity)
    routed, after = tokens_per_expert(ids, 16), tokens_per_expert(kept, 16)
    assert routed.max() > capacity  # zipf:1.5 overloads some expert on some rank: tokens were dropped
    assert np.array_equal(after, np.minimum(routed, capacity))
    # the kept slots are each expert's earliest tokens on its rank (the position policy)
    for s in range(4):
        for e in np.flatnonzero(routed[s] > capacity)[:3]:
            tokens = np.flatnonzero((ids[s] == e).any(axis=1))
            assert np.array_equal(np.flatnonzero((kept[s] == e).any(axis=1)), tokens[:capacity])
    # dropped slots move nothing: fewer per-expert rows, and fewer (or as many) per-rank rows
    assert split_rows(kept, 16, "per-expert").sum() == after.sum() < split_rows(ids, 16, "per-expert").sum()
    assert split_rows(kept, 16, "per-rank").sum() < split_rows(ids, 16, "per-rank").sum()


def test_padding_fills_every_rank_expert_pair_to_capacity_with_unrouted_tokens():
    ids = _zipf()
    capacity = expert_capacity(tokens_per_rank=256, num_experts=16, top_k=4, capacity_factor=1.0)
    kept = drop_over_capacity(ids, 16, capacity)
    pad = padding_rows(kept, 16, capacity)
    assert np.all(tokens_per_expert(kept, 16, pad) == capacity)
    # fixed splits: every rank sends every rank capacity x its 4 experts, whatever the routing
    assert np.all(split_rows(kept, 16, "per-expert", pad) == capacity * 4)
    chosen = ids[pad.src, pad.token]  # the padding tokens were not routed to the expert they pad
    assert not np.any(chosen == pad.tag[:, None])
    keys = (pad.src * 256 + pad.token) * 16 + pad.tag
    assert np.unique(keys).size == keys.size and pad.token.max() < 256


def test_counts_match_megatron_cores_own_token_dropping():
    """megatron-core 0.16.1 moe_utils.apply_router_token_dropping on one rank's routing, with probabilities that
    fall with the token index (so its `probs` policy keeps the earliest tokens, as here): the same per-expert
    counts, dropped and padded."""
    torch = pytest.importorskip("torch")
    moe_utils = pytest.importorskip("megatron.core.transformer.moe.moe_utils")
    ids = _zipf(n=2, tokens=96, experts=8, top_k=2)
    for factor in (0.5, 1.0, 1.25):
        capacity = expert_capacity(tokens_per_rank=96, num_experts=8, top_k=2, capacity_factor=factor)
        assert capacity == moe_utils.get_capacity(num_tokens=96 * 2, num_experts=8, capacity_factor=factor)
        kept = drop_over_capacity(ids, 8, capacity)
        pad = padding_rows(kept, 8, capacity)
        for rank in range(2):
            routing_map = torch.zeros(96, 8, dtype=torch.bool)
            routing_map[torch.arange(96)[:, None], torch.from_numpy(ids[rank])] = True
            probs = routing_map.float() * (1.0 - torch.arange(96, dtype=torch.float32)[:, None] / 192)
            for padded in (False, True):
                _, final = moe_utils.apply_router_token_dropping(probs, routing_map, router_topk=2,
                                                                  capacity_factor=factor, pad_to_capacity=padded)
                ours = tokens_per_expert(kept, 8, pad if padded else None)[rank]
                assert final.sum(dim=0).tolist() == ours.tolist(), (factor, rank, padded)
                if not padded:  # and the same tokens
                    mine = np.zeros((96, 8), dtype=bool)
                    token, slot = np.nonzero(kept[rank] >= 0)
                    mine[token, kept[rank][token, slot]] = True
                    assert np.array_equal(final.numpy(), mine)


@pytest.mark.parametrize("given,field,allowed", [
    ({"capacity_factor": 0}, "--capacity-factor", "> 0"), ({"capacity_factor": -1.0}, "--capacity-factor", "> 0"),
    ({"capacity_factor": math.inf}, "--capacity-factor", "> 0"), ({"capacity_factor": "1"}, "--capacity-factor", "> 0"),
    ({"pad_to_capacity": True}, "--pad-to-capacity", "--capacity-factor"),
    ({"pad_to_capacity": True, "capacity_factor": 1.0, "dispatch_mode": "per-rank"}, "--pad-to-capacity", "per-expert"),
    ({"pad_to_capacity": True, "capacity_factor": 5.0}, "--capacity-factor", "capacity <= tokens per rank"),
    ({"pad_to_capacity": "yes", "capacity_factor": 1.0}, "--pad-to-capacity", "true or false")])
def test_bad_capacity_values_are_refused_naming_the_option(given, field, allowed):
    base = {"tokens_per_rank": 16, "hidden": 32, "top_k": 2, "num_experts": 8, "routing": "uniform",
            "dispatch_mode": "per-expert", "dispatch_dtype": "bf16", "combine_dtype": "bf16", "seed": 0}
    with pytest.raises(CommbenchError) as err:
        MoeParams(**{**base, **given})
    assert str(err.value).startswith(f"{field}=") and allowed in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("args,field", [
    (["--capacity-factor", "0"], "--capacity-factor=0.0"), (["--capacity-factor", "-1"], "--capacity-factor=-1.0"),
    (["--pad-to-capacity"], "--pad-to-capacity"),
    (["--capacity-factor", "1", "--pad-to-capacity", "--dispatch-mode", "per-rank"], "--pad-to-capacity"),
    (["--capacity-factor", "9", "--pad-to-capacity"], "--capacity-factor=9.0")])
def test_cli_bad_capacity_is_one_line_exit_2(args, field):
    result = CliRunner().invoke(app, ["bench", "moe_all_to_all", "--nproc", "2", "--experts", "8", "--top-k", "2",
                                      "--tokens", "16", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}") and "allowed" in lines[0], result.output


def test_cli_refuses_capacity_for_other_collectives():
    for args in (["--capacity-factor", "1"], ["--pad-to-capacity"]):
        result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "2", *args])
        assert result.exit_code == 2 and args[0] in result.output and "moe_all_to_all only" in result.output


def test_title_and_help_state_the_capacity():
    layer = {"hidden": 64, "num_experts": 8, "top_k": 2, "routing": "uniform", "dispatch_mode": "per-expert",
             "dispatch_dtype": "bf16", "combine_dtype": "bf16"}
    assert "capacity" not in moe_setup(layer)  # dropless, as before
    assert moe_setup({**layer, "capacity_factor": 1.25}).endswith(", capacity factor 1.25 (tokens over capacity dropped)")
    assert moe_setup({**layer, "capacity_factor": 1.0, "pad_to_capacity": True}).endswith(
        ", capacity factor 1 (padded to capacity)")
    help_text = " ".join(CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "--capacity-factor" in help_text and "--pad-to-capacity" in help_text


def test_sweep_file_moe_entry_takes_capacity(tmp_path):
    from commbench.sweep.schema import load_sweep

    path = tmp_path / "s.toml"
    path.write_text('[[run]]\ncollective = "moe_all_to_all"\ntokens_per_rank = [16]\nnum_experts = 8\ntop_k = 2\n'
                    'hidden = 32\ncapacity_factor = 1.0\npad_to_capacity = true\n')
    (entry,) = load_sweep(str(path)).entries
    (spec, _), = REGISTRY["moe_all_to_all"].plan_specs(dict(entry.params), 2)
    assert spec.params["capacity_factor"] == 1.0 and spec.params["pad_to_capacity"] is True


def _specs(world, tokens=32, **params):
    base = {"hidden": 24, "num_experts": 4 * world, "top_k": 3, "seed": 5, "routing": "zipf:1.5"}
    return [spec for spec, _ in REGISTRY["moe_all_to_all"].plan_specs({**base, **params, "tokens_per_rank": [tokens]}, world)]


CASES = [{"capacity_factor": 1.0}, {"capacity_factor": 0.5, "dispatch_mode": "per-rank", "dispatch_dtype": "fp8"},
         {"capacity_factor": 1.0, "pad_to_capacity": True}, {"capacity_factor": 0.75, "pad_to_capacity": True,
                                                             "combine_dtype": "fp32", "routing": "uniform"}]


def _run_capacity(backend):
    moe = REGISTRY["moe_all_to_all"]
    world = backend.world_size
    out = {"wrong": [], "sizes": {}, "broken": []}
    for case in CASES:
        (spec,) = _specs(world, **case)
        prepared = moe.prepare(backend.world, backend, spec)
        out["wrong"].append(check_point(backend, prepared))
        out["sizes"][json.dumps(case)] = (prepared.size_bytes, [name for name, _ in prepared.stages],
                                          prepared.metrics)
    for routing in ("balanced", "uniform", "zipf:2.5"):  # padding: the same bytes whatever the routing
        (spec,) = _specs(world, capacity_factor=1.0, pad_to_capacity=True, routing=routing)
        out["sizes"][routing] = moe.prepare(backend.world, backend, spec).size_bytes
    for case in CASES[:3]:  # a missing stage is caught, padding or not
        (spec,) = _specs(world, **case)
        prepared = moe.prepare(backend.world, backend, spec)
        prepared.stages = [(name, stage) for name, stage in prepared.stages if name != "dispatch"]
        out["broken"].append(check_point(backend, prepared))
    out["measurement"] = measure_point(backend, backend.world, moe, _specs(world, **CASES[2])[0],
                                       LoopOptions(iters=3, warmup_iters=1), run_id="test")
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize("world", [2, 4])
def test_capacity_on_gloo(world):
    results = run_ranks(_run_capacity, world, timeout_s=120)
    res = results[0]
    assert all(r["wrong"] == [0] * len(CASES) for r in results), [r["wrong"] for r in results]
    assert all(b > 0 for b in res["broken"])
    experts_per_rank, top_k, tokens = 4, 3, 32
    row = 24 * 2
    for case in CASES:
        size, stages, metrics = res["sizes"][json.dumps(case)]
        capacity = math.ceil(tokens * top_k / (4 * world) * case["capacity_factor"])
        assert metrics["capacity_tokens"] == capacity and metrics["token_drop_policy"] == "position"
        if case.get("pad_to_capacity"):
            # every rank sends and receives capacity rows per expert from every rank: fixed, no count exchange
            width = row if case.get("dispatch_dtype", "bf16") == "bf16" else 24 + 4
            assert size == world * experts_per_rank * capacity * width
            assert metrics["tokens_received_per_rank"] == [world * experts_per_rank * capacity] * world
            assert stages == ["dispatch", "combine"] and metrics["padding_tokens"] > 0
        else:
            assert stages == ["count_exchange", "dispatch", "combine"] and metrics["padding_tokens"] == 0
            assert metrics["dropped_tokens"] > 0 and 0 < metrics["drop_fraction"] < 1  # zipf:1.5 overflows
            assert metrics["imbalance_expert"] < metrics["imbalance_expert_routed"]
    assert res["sizes"]["balanced"] == res["sizes"]["uniform"] == res["sizes"]["zipf:2.5"]

    m = res["measurement"]
    assert m.num_wrong == 0 and m.params["capacity_factor"] == 1.0 and m.params["pad_to_capacity"] is True
    assert list(m.stages_us_median) == ["dispatch", "combine"] and "count_exchange_us" not in m.metrics
    capacity = m.metrics["capacity_tokens"]
    assert m.size_bytes == world * experts_per_rank * capacity * row  # bytes actually moved, padding included
    round_trip = m.size_bytes + m.metrics["combine_bytes_max"]
    assert m.algbw_gbps == pytest.approx(round_trip / m.time_us_median / 1e3)
    assert m.busbw_gbps == pytest.approx(m.algbw_gbps * (world - 1) / world)
    assert m.metrics["dispatch_algbw_gbps"] == pytest.approx(m.size_bytes / m.metrics["dispatch_us"] / 1e3)


@pytest.mark.timeout(180)
def test_bench_records_and_header_carry_the_capacity(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "moe.jsonl"
    root = str(Path(__file__).parent.parent)
    proc = subprocess.run([sys.executable, "-m", "commbench", "bench", "moe_all_to_all", "--nproc", "2", "--tokens", "16",
                           "--hidden", "32", "--experts", "8", "--top-k", "2", "--routing", "zipf:1.5",
                           "--capacity-factor", "1.25", "--pad-to-capacity", "-n", "2", "-w", "1", "--timeout", "60",
                           "--format", "nccl-tests", "-O", str(out)], capture_output=True, text=True, timeout=150,
                          cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "capacity factor 1.25 (padded to capacity)" in proc.stdout  # the banner's MoE line
    header, *records = [json.loads(line) for line in out.read_text().splitlines()]
    assert any("capacity_factor=1.25, pad_to_capacity=true" in note for note in header["notes"])
    assert records and all(r["params"]["capacity_factor"] == 1.25 and r["params"]["pad_to_capacity"] is True
                           and r["num_wrong"] == 0 and r["metrics"]["capacity_tokens"] == 5 for r in records)


def test_dropless_points_record_no_capacity_keys():
    """A dropless point's params are what they were before the capacity existed, so compare and --resume still
    match its records with earlier ones; a capacity point carries both keys."""
    (dropless,) = _specs(2)
    assert "capacity_factor" not in dropless.params and "pad_to_capacity" not in dropless.params
    (capped,) = _specs(2, capacity_factor=1.0)
    assert capped.params["capacity_factor"] == 1.0 and capped.params["pad_to_capacity"] is False
