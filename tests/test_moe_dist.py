"""moe_all_to_all on 2, 3 and 4 gloo ranks: dispatch and combine return exactly the right rows for every
routing model and mode, ranks that receive nothing work, a broken stage is caught, and each Measurement
records the parameters and metrics the cost model fits against.

Rank start-up dominates on a loaded CI machine, so each world size runs all its cases in one launch.
"""

import numpy as np
import pytest

from collectives import REGISTRY, PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, check_point, measure_point
from tests.distributed import run_ranks

PARAMS_KEYS = {"tokens_per_rank", "hidden", "top_k", "num_experts", "routing", "dispatch_mode", "dispatch_dtype",
               "combine_dtype", "seed", "ep_size"}
METRIC_KEYS = {"bytes_sent_max", "bytes_sent_mean", "bytes_received_max", "bytes_received_mean", "imbalance_rank",
               "imbalance_expert", "tokens_sent_max", "tokens_received_max", "dispatch_us", "combine_us",
               "count_exchange_us", "round_trip_us", "dispatch_algbw_gbps", "dispatch_busbw_gbps",
               "dispatch_logical_gbps", "dispatch_remote_gbps"}


def _cases(world, trace_path):
    experts = 4 * world
    common = {"hidden": 24, "num_experts": experts, "top_k": 3, "seed": 5}
    cases = []
    for routing, mode, dispatch_dtype, combine_dtype in [
            ("balanced", "per-expert", "bf16", "bf16"), ("uniform", "per-rank", "fp8", "bf16"),
            ("zipf:1.5", "per-expert", "fp8", "fp32"), ("zipf:1.5", "per-rank", "bf16", "fp32"),
            (f"group-limited:{world}:1", "per-rank", "fp8", "bf16"), (f"group-limited:{2 * world}:2", "per-expert", "bf16", "bf16")]:
        cases.append({**common, "routing": routing, "dispatch_mode": mode, "dispatch_dtype": dispatch_dtype,
                      "combine_dtype": combine_dtype})
    # every token picks experts 0..2, all on rank 0: the other ranks receive (and return) nothing
    for mode in ("per-expert", "per-rank"):
        cases.append({**common, "routing": f"trace:{trace_path}", "dispatch_mode": mode, "dispatch_dtype": "bf16",
                      "combine_dtype": "bf16"})
    return cases


def _specs(params, world, tokens):
    return REGISTRY["moe_all_to_all"].plan_specs({**params, "tokens_per_rank": tokens}, world)


def _run_cases(backend, cases):
    moe = REGISTRY["moe_all_to_all"]
    world = backend.world_size
    out = {"wrong": [], "received": [], "broken": {}}
    for params in cases:
        for spec, _ in _specs(params, world, [1, 37]):
            prepared = moe.prepare(backend.world, backend, spec)
            out["wrong"].append((params["routing"], params["dispatch_mode"], spec.params["tokens_per_rank"],
                                 check_point(backend, prepared)))
            out["received"].append(prepared.metrics["tokens_received_per_rank"])
    spec, _ = _specs(cases[1], world, [16])[0]
    for dropped in ("dispatch", "combine", "count_exchange"):
        prepared = moe.prepare(backend.world, backend, spec)
        prepared.stages = [(name, stage) for name, stage in prepared.stages if name != dropped]
        out["broken"][dropped] = check_point(backend, prepared)
    out["measurement"] = measure_point(backend, backend.world, moe, _specs(cases[2], world, [64])[0][0],
                                       LoopOptions(iters=3, warmup_iters=1), run_id="test")
    return out


@pytest.mark.parametrize("world", [2, 3, 4])
def test_moe_all_to_all_on_gloo(world, tmp_path):
    trace_path = tmp_path / "to_rank0.npy"
    np.save(trace_path, np.array([[0, 1, 2], [2, 0, 1]]))
    results = run_ranks(_run_cases, world, timeout_s=120, args=(_cases(world, trace_path),))
    wrong = results[0]["wrong"]
    assert len(wrong) == 16 and all(r == wrong for r in (res["wrong"] for res in results))
    assert [case for case in wrong if case[3] != 0] == []
    received = results[0]["received"]
    assert received[-1][0] > 0 and received[-1][1:] == [0] * (world - 1)  # the zero-token ranks were exercised
    broken = results[0]["broken"]
    assert broken["dispatch"] > 0 and broken["combine"] > 0 and broken["count_exchange"] > 0

    m = results[0]["measurement"]
    assert m.collective == "moe_all_to_all" and m.num_wrong == 0 and m.group_size == world
    assert PARAMS_KEYS <= set(m.params) and m.params["tokens_per_rank"] == 64 and m.params["ep_size"] == world
    assert METRIC_KEYS <= set(m.metrics)
    assert list(m.stages_us_median) == ["count_exchange", "dispatch", "combine"]
    assert m.size_bytes == max(m.metrics["bytes_sent_max"], m.metrics["bytes_received_max"])
    assert m.metrics["bytes_sent_max"] == m.metrics["tokens_sent_max"] * m.metrics["dispatch_bytes_per_token"]
    assert m.metrics["dispatch_bytes_per_token"] == 24 + 4  # fp8: 24 channels + one fp32 scale
    assert m.metrics["imbalance_expert"] > 1.2  # zipf:1.5
    assert m.metrics["round_trip_us"] == pytest.approx(m.metrics["dispatch_us"] + m.metrics["combine_us"])
    assert m.metrics["dispatch_algbw_gbps"] == pytest.approx(m.size_bytes / m.metrics["dispatch_us"] / 1e3)
    assert m.metrics["dispatch_busbw_gbps"] == pytest.approx(m.metrics["dispatch_algbw_gbps"] * (world - 1) / world)
    # as README states: the record's algbw is the round trip's bytes over the whole iteration's median
    # (count exchange + dispatch + combine); each stage's algbw is its own bytes over its own median
    round_trip = m.size_bytes + m.metrics["combine_bytes_max"]
    assert m.metrics["round_trip_bytes_max"] == round_trip
    assert m.algbw_gbps == pytest.approx(round_trip / m.time_us_median / 1e3)
    assert m.busbw_gbps == pytest.approx(m.algbw_gbps * (world - 1) / world)
    assert m.metrics["combine_algbw_gbps"] == pytest.approx(m.metrics["combine_bytes_max"] / m.metrics["combine_us"] / 1e3)


def test_plan_specs_sweep_tokens_and_label_points():
    specs = _specs({"hidden": 64, "num_experts": 8, "top_k": 2}, 4, [128, 1024])
    assert [label for _, label in specs] == ["128 tok/rank", "1024 tok/rank"]
    assert [spec.params["tokens_per_rank"] for spec, _ in specs] == [128, 1024]
    assert isinstance(specs[0][0], PointSpec) and specs[0][0].dtype == get_dtype("bfloat16")
    assert specs[0][0].size_bytes == 128 * 2 * 64 * 2


def _run_etp(backend, params):
    moe = REGISTRY["moe_all_to_all"]
    spec, _ = _specs(params, backend.world_size, [37])[0]
    prepared = moe.prepare(backend.world, backend, spec)
    return {"wrong": check_point(backend, prepared), "received": prepared.metrics["tokens_received_per_rank"],
            "sent_max": prepared.metrics["tokens_sent_max"]}


def test_expert_tp_sends_every_token_to_each_etp_rank_of_its_ep_ranks():
    """Megatron-Core's flex dispatcher with ETP 2 on 4 ranks (EP 2): one exchange over all 4, each token reaching
    both ETP ranks of each EP rank it routes to (routing replicated over ETP), data checked."""
    import collectives.moe_all_to_all as mod
    params = {"hidden": 24, "num_experts": 8, "top_k": 3, "seed": 5, "routing": "uniform", "dispatch_mode": "per-rank",
              "expert_tp": 2}
    results = run_ranks(_run_etp, 4, timeout_s=120, args=(params,))
    assert [r["wrong"] for r in results] == [0, 0, 0, 0]
    received = results[0]["received"]
    assert received[0] == received[1] and received[2] == received[3]      # ETP siblings get the same tokens
    from commbench.moe.routing import parse_routing, route
    routed = route(parse_routing("uniform"), num_ranks=4, tokens_per_rank=37, num_experts=8, top_k=3, seed=5)
    ep_ranks = [[len(set((routed[r, t] // 4).tolist())) for t in range(37)] for r in range(4)]
    assert results[0]["sent_max"] == max(2 * sum(row) for row in ep_ranks)  # ETP x distinct EP ranks per token
    assert mod.replicate_over_etp(np.array([[[5, -1]]]), 2, 2).tolist() == [[[9, 11, -1, -1]]]


class _Spy:
    """The real comm, remembering each call's name and element counts."""

    def __init__(self, comm) -> None:
        self.comm, self.calls = comm, []
        self.rank, self.size, self.global_ranks = comm.rank, comm.size, comm.global_ranks

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def all_gather(self, out, inp):
        self.calls.append(("all_gather", out.numel(), inp.numel()))
        self.comm.all_gather(out, inp)

    def all_to_all(self, out, inp, out_splits=None, in_splits=None):
        self.calls.append(("all_to_all", out.numel(), inp.numel()))
        self.comm.all_to_all(out, inp, out_splits, in_splits)


def _count_stage_calls(backend):
    moe, out = REGISTRY["moe_all_to_all"], {}
    for mode in ("per-expert", "per-rank"):
        params = {"hidden": 32, "num_experts": 4 * backend.world_size, "top_k": 2, "routing": "zipf:1.2",
                  "dispatch_mode": mode}
        spec = _specs(params, backend.world_size, [16])[0][0]
        spy = _Spy(backend.world)
        prepared = moe.prepare(spy, backend, spec)
        spy.calls.clear()  # only the stage's own calls
        dict(prepared.stages)["count_exchange"]()
        out[mode] = (list(spy.calls), check_point(backend, prepared))
    return out


def test_the_per_expert_count_exchange_all_gathers_every_experts_count_as_megatron():
    # found from outside: megatron-core 0.16.1 MoEAlltoAllTokenDispatcher.preprocess all-gathers num_local_tokens_per_
    # expert (E int64 per rank) over the tp_ep group (token_dispatcher.py, gather_from_sequence_parallel_region); the
    # stage timed an all_to_all of 1 + E/n counts per destination, n x E x 8 B received at EP n here, not n x (1 + E/n)
    world = 3
    result = run_ranks(_count_stage_calls, world, timeout_s=120)[0]
    experts = 4 * world
    assert result["per-expert"][0] == [("all_gather", world * experts, experts)]
    assert result["per-rank"][0] == [("all_to_all", world * (1 + experts // world), world * (1 + experts // world))]
    assert result["per-expert"][1] == 0 and result["per-rank"][1] == 0
