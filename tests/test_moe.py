"""MoE routing models, byte accounting, payload encoding, presets and bad input (pure numpy, no ranks)."""

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.moe.accounting import bytes_per_token, moe_traffic, split_rows
from commbench.moe.params import MoeParams, parse_tokens, sweep_params
from commbench.moe.payload import HEADER_CHANNELS, decode_header, dispatch_rows, encode, foreign_rows
from commbench.moe.routing import parse_routing, route


def _route(kind, n=4, tokens=256, experts=16, top_k=4, seed=0):
    return route(parse_routing(kind), num_ranks=n, tokens_per_rank=tokens, num_experts=experts, top_k=top_k, seed=seed)


ROUTINGS = ["balanced", "uniform", "zipf:1.2", "group-limited:4:2"]


@pytest.mark.parametrize("kind", ROUTINGS)
def test_every_token_picks_top_k_distinct_valid_experts(kind):
    ids = _route(kind, n=3, tokens=100, experts=12, top_k=3)
    assert ids.shape == (3, 100, 3)
    assert ids.min() >= 0 and ids.max() < 12
    ordered = np.sort(ids, axis=2)
    assert np.all(ordered[:, :, 1:] != ordered[:, :, :-1])


@pytest.mark.parametrize("kind", ROUTINGS)
def test_same_seed_same_routing_other_seed_other_routing(kind):
    assert np.array_equal(_route(kind, seed=7), _route(kind, seed=7))
    assert not np.array_equal(_route(kind, seed=7), _route(kind, seed=8))


@pytest.mark.parametrize("n,tokens,experts,top_k", [(4, 64, 16, 4), (3, 100, 12, 8), (2, 8, 256, 8)])
def test_balanced_gives_every_expert_equal_counts(n, tokens, experts, top_k):
    load = np.bincount(_route("balanced", n, tokens, experts, top_k).ravel(), minlength=experts)
    if n * tokens * top_k % experts == 0:
        assert np.all(load == n * tokens * top_k // experts)
    assert load.max() - load.min() <= 1


def test_balanced_uneven_total_stays_within_one():
    load = np.bincount(_route("balanced", 3, 7, 16, 3).ravel(), minlength=16)
    assert load.sum() == 63 and load.max() - load.min() <= 1


def test_imbalance_grows_with_zipf_alpha():
    imbalances = [moe_traffic(_route(f"zipf:{a}", 4, 1024, 64, 4), num_experts=64, hidden=64, mode="per-expert",
                              dispatch_dtype="bf16", combine_dtype="bf16").metrics()["imbalance_expert"]
                  for a in (0.0, 0.5, 1.0, 1.5)]
    assert all(b > a for a, b in zip(imbalances, imbalances[1:])), imbalances
    assert imbalances[0] < 1.3 and imbalances[-1] > 3


@pytest.mark.parametrize("experts,groups,topk_groups,top_k", [(256, 8, 4, 8), (16, 4, 1, 4), (12, 3, 2, 5)])
def test_group_limited_never_touches_more_than_topk_groups(experts, groups, topk_groups, top_k):
    ids = _route(f"group-limited:{groups}:{topk_groups}", 2, 500, experts, top_k)
    group = np.sort(ids // (experts // groups), axis=2)
    groups_touched = 1 + np.count_nonzero(group[:, :, 1:] != group[:, :, :-1], axis=2)
    assert groups_touched.max() == topk_groups  # reaches the limit, never exceeds it


def test_trace_replays_recorded_routing_cyclically(tmp_path):
    trace = np.array([[0, 1], [2, 3], [1, 3]])
    path = tmp_path / "router.npy"
    np.save(path, trace)
    ids = _route(f"trace:{path}", n=2, tokens=2, experts=4, top_k=2)
    assert np.array_equal(ids.reshape(-1, 2), trace[[0, 1, 2, 0]])
    text = tmp_path / "router.csv"
    text.write_text("0,1\n2,3\n")
    assert np.array_equal(_route(f"trace:{text}", n=1, tokens=2, experts=4, top_k=2)[0], [[0, 1], [2, 3]])


@pytest.mark.parametrize("content,message", [
    (np.array([[0, 1, 2]]), "shape"), (np.array([[0, 9]]), "expert ids"), (np.array([[1, 1]]), "repeats"),
    (np.array([[0.5, 1.0]]), "values"), (None, "cannot be read")])
def test_bad_trace_is_a_one_line_error(tmp_path, content, message):
    path = tmp_path / "bad.npy"
    if content is not None:
        np.save(path, content)
    with pytest.raises(CommbenchError, match=message):
        _route(f"trace:{path}", n=2, tokens=4, experts=4, top_k=2)


def test_bytes_per_token_counts_fp8_scales_as_deepep():
    assert bytes_per_token(7168, "bf16") == 14336
    assert bytes_per_token(7168, "fp8") == 7168 + 56 * 4  # 56 blocks of 128 channels, one fp32 scale each
    assert bytes_per_token(200, "fp8") == 200 + 2 * 4  # a partial block still carries a scale
    assert bytes_per_token(64, "fp32") == 256


# Hand-computed layer: 2 ranks, 4 experts (0,1 on rank 0; 2,3 on rank 1), top-2, 2 tokens per rank.
HAND_IDS = np.array([[[0, 1], [1, 2]],    # rank 0: token 0 -> rank 0 twice; token 1 -> ranks 0 and 1
                     [[2, 3], [0, 1]]])   # rank 1: token 0 -> rank 1 twice; token 1 -> rank 0 twice


def test_split_rows_per_expert_and_per_rank_by_hand():
    assert split_rows(HAND_IDS, 4, "per-expert").tolist() == [[3, 1], [2, 2]]
    assert split_rows(HAND_IDS, 4, "per-rank").tolist() == [[2, 1], [1, 1]]


def test_byte_metrics_by_hand_fp8():
    row = 7168 + 56 * 4
    m = moe_traffic(HAND_IDS, num_experts=4, hidden=7168, mode="per-expert", dispatch_dtype="fp8",
                    combine_dtype="bf16").metrics()
    assert m["bytes_sent_max"] == 4 * row and m["bytes_sent_mean"] == 4 * row
    assert m["bytes_received_max"] == 5 * row and m["bytes_received_mean"] == 4 * row
    assert m["remote_bytes_sent_max"] == 2 * row and m["remote_bytes_received_max"] == 2 * row
    assert m["imbalance_rank"] == 5 / 4
    assert m["imbalance_expert"] == 3 / 2  # loads 2, 3, 2, 1
    assert m["combine_bytes_max"] == 5 * 7168 * 2
    traffic = moe_traffic(HAND_IDS, num_experts=4, hidden=7168, mode="per-rank", dispatch_dtype="fp8",
                          combine_dtype="bf16")
    r = traffic.metrics()
    assert r["bytes_sent_max"] == 3 * row and r["bytes_received_max"] == 3 * row and r["bytes_sent_mean"] == 2.5 * row
    assert r["imbalance_rank"] == 3 / 2.5
    assert traffic.busiest_dispatch_bytes() == 3 * row  # the size_bytes of the point
    assert traffic.busiest_remote_bytes(row) == 1 * row
    assert traffic.busiest_logical_bytes() == 5 * row  # rank 0's experts hold 2 + 3 token copies


@pytest.mark.parametrize("kind", ROUTINGS + ["zipf:2.5"])
def test_per_rank_never_sends_more_than_per_expert(kind):
    for seed in range(3):
        ids = _route(kind, n=4, tokens=200, experts=16, top_k=4, seed=seed)
        per_rank, per_expert = split_rows(ids, 16, "per-rank"), split_rows(ids, 16, "per-expert")
        assert np.all(per_rank <= per_expert) and per_rank.sum() < per_expert.sum()
        assert per_expert.sum() == 4 * 200 * 4


def test_payload_rows_decode_and_foreign_rows_are_caught():
    ids = _route("uniform", n=3, tokens=20, experts=6, top_k=2)
    for mode in ("per-expert", "per-rank"):
        table = dispatch_rows(ids, 6, mode)
        assert np.array_equal(np.bincount(table.src * 3 + table.dst, minlength=9).reshape(3, 3), split_rows(ids, 6, mode))
        received = table.where(table.dst == 1)
        values = encode(received, 16).ravel().astype(np.float64)
        src, token, tag = decode_header(values, 16)
        assert np.array_equal(src, received.src) and np.array_equal(token, received.token)
        assert foreign_rows(values, 16, ids, 1, 6, mode) == 0
        assert foreign_rows(values, 16, ids, 2, 6, mode) == len(received)  # rank 2 holds none of them
        wrong = values.reshape(-1, 16).copy()
        wrong[0, HEADER_CHANNELS - 3:HEADER_CHANNELS] = 0  # tag 0: expert 0 (rank 0's) / an empty slot mask
        assert foreign_rows(wrong.ravel(), 16, ids, 1, 6, mode) == 1


def test_presets_and_explicit_options_override():
    (point,) = sweep_params({"preset": "deepseek-v3", "top_k": 4, "tokens_per_rank": [128]}, 8)
    assert (point.hidden, point.num_experts, point.top_k, point.routing) == (7168, 256, 4, "group-limited:8:4")
    assert (point.dispatch_mode, point.dispatch_dtype, point.combine_dtype) == ("per-rank", "fp8", "bf16")
    points = sweep_params({"preset": "mixtral-8x22b", "tokens_per_rank": [128, 4096]}, 2)
    assert [(p.tokens_per_rank, p.hidden, p.num_experts, p.top_k) for p in points] == [(128, 6144, 8, 2), (4096, 6144, 8, 2)]
    (qwen,) = sweep_params({"preset": "qwen3-235b", "tokens_per_rank": [1]}, 4)
    assert (qwen.hidden, qwen.num_experts, qwen.top_k) == (4096, 128, 8)


def test_params_validation():
    base = dict(tokens_per_rank=8, hidden=64, top_k=2, num_experts=8, routing="uniform", dispatch_mode="per-expert",
                dispatch_dtype="bf16", combine_dtype="bf16", seed=0)
    MoeParams(**base)
    for change, field in [({"tokens_per_rank": 0}, "--tokens"), ({"top_k": 9}, "--top-k"), ({"hidden": 4}, "--hidden"),
                          ({"dispatch_mode": "x"}, "--dispatch-mode"), ({"dispatch_dtype": "fp4"}, "--dispatch-dtype"),
                          ({"routing": "zipf:-1"}, "--routing"), ({"routing": "group-limited:8:1"}, "--top-k")]:
        with pytest.raises(CommbenchError, match=field):
            MoeParams(**{**base, **change})
    with pytest.raises(CommbenchError, match="--experts"):
        MoeParams(**base).check_ep_size(3)
    assert parse_tokens("128, 1024,4096") == [128, 1024, 4096]
    # sweep-file entries: same keys as Measurement.params; typos and wrong types are refused
    assert [p.tokens_per_rank for p in sweep_params({"tokens_per_rank": 64, "num_experts": 8}, 2)] == [64]
    with pytest.raises(CommbenchError, match="experts"):
        sweep_params({"experts": 8}, 2)
    with pytest.raises(CommbenchError, match="hidden"):
        sweep_params({"hidden": "big", "num_experts": 8}, 2)


@pytest.mark.parametrize("args,field", [
    (["--experts", "6"], "--experts"), (["--top-k", "9"], "--top-k"), (["--tokens", "0"], "--tokens"),
    (["--routing", "group-limited:4:5"], "topk_groups"), (["--routing", "group-limited:3:1"], "divisible by groups"),
    (["--routing", "pareto"], "--routing"), (["--routing", "trace:/no/such/file.npy"], "cannot be read"),
    (["--preset", "llama"], "--preset"), (["--tokens", "a,b"], "--tokens")])
def test_cli_bad_input_is_one_line_exit_2(args, field):
    result = CliRunner().invoke(app, ["bench", "moe_all_to_all", "--nproc", "4", "--experts", "8", "--top-k", "2", *args])
    assert result.exit_code == 2, result.output
    assert field in result.output and "Traceback" not in result.output


def test_cli_refuses_moe_options_for_other_collectives():
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "2", "--top-k", "2"])
    assert result.exit_code == 2 and "--top-k" in result.output


def test_moe_algbw_formula_is_stated_where_the_other_collectives_are():
    """README said algbw = size / median time for every collective, and moe_all_to_all's algbw "from the busiest
    rank's bytes": its algbw is (dispatch + combine bytes) / the whole iteration's median while size_bytes is the
    dispatch bytes alone, so size / time was half of it. The README and bench --help now say which bytes over
    which time (tests/test_moe_dist.py checks the numbers against the same formula)."""
    from pathlib import Path

    readme = " ".join((Path(__file__).parent.parent / "README.md").read_text().split())
    assert "`moe_all_to_all` is the one record whose algbw is not size / time" in readme
    assert ("algbw = (busiest dispatch bytes + busiest combine bytes) / the median time of the whole iteration "
            "(count exchange + dispatch + combine)") in readme
    assert "`dispatch_algbw_gbps` = busiest dispatch bytes / dispatch median" in readme
    help_text = " ".join(CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "algbw is the round trip's: (busiest dispatch + busiest combine bytes) / the whole iteration's median" \
        in help_text.replace("│ ", "").replace(" │", "")
