"""Planner: FLOPs and parameter counts, layout rules, hand-computed step and memory terms."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from commbench.errors import CommbenchError
from commbench.planner import (Calibration, Layout, LayoutArrays, active_params, check_layout, evaluate_layouts,
                               flops_breakdown, flops_per_token, layout_violations, load_model, param_counts,
                               parse_layout)
from commbench.planner.step import evaluate as step_module
from commbench.planner.layout.spec import RULE_BITS
from commbench.planner.layout.split import best_split, stage_weights
from commbench.data.reference import gpu_spec


@pytest.mark.parametrize("name, seq_len, gflop, mtp", [
    ("deepseek-v3", 4096, 260.0, True), ("deepseek-v3", 4096, 249.8, False), ("qwen3-235b-a22b", 4096, 148.0, True),
    ("qwen3-30b-a3b", 4096, 23.0, True), ("llama3.1-405b", 8192, 2524.0, True), ("llama3-8b", 8192, 51.47, True),
])
def test_flops_per_token_matches_check_values(name, seq_len, gflop, mtp):
    got = flops_per_token(load_model(name), seq_len, include_mtp=mtp) / 1e9
    assert got == pytest.approx(gflop, rel=0.005)


# Published FLOPs from Megatron-LM's hybrid_flops (megatron/training/training.py), which counts each MTP depth's
# layers and logits but not its 2h -> h projection; the step model charges that GEMM, so it is added back here.
MTP_PROJECTION_UNCOUNTED = {"nemotron-3.5-lightning-30b-a3b"}


def test_every_zoo_model_reproduces_its_published_flops():
    from commbench.planner import model_names
    from commbench.planner.models.counts import flops_breakdown
    for name in model_names():
        m = load_model(name)
        uncounted = flops_breakdown(m).mtp_proj if name in MTP_PROJECTION_UNCOUNTED else 0.0
        assert (flops_per_token(m) - uncounted) / 1e9 == pytest.approx(m.published_flops_per_token_gflop, rel=0.002
                                                                        if uncounted else 0.005), name


@pytest.mark.parametrize("name, total_b, active_b", [
    ("deepseek-v3", 671.0, 37.4), ("qwen3-235b-a22b", 235.1, 22.1), ("llama3.1-405b", 405.8, 405.8),
])
def test_param_counts_match_published_totals(name, total_b, active_b):
    m = load_model(name)
    assert param_counts(m).total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert active_params(m) / 1e9 == pytest.approx(active_b, rel=0.01)


def test_user_model_file_and_unknown_model(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[model.tiny]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nhead_dim = 16\n'
                    'dense_ffn = 128\nvocab = 1000\nseq_len = 128\n')
    m = load_model("tiny", model_file=path)
    assert m.num_dense_layers == 2 and not m.is_moe
    with pytest.raises(CommbenchError, match="known models"):
        load_model("nope")


def _bits(model, num_gpus, **kw):
    return int(layout_violations(model, LayoutArrays.from_columns(**kw), num_gpus)[0])


@pytest.mark.parametrize("rule, kw", [
    ("world", dict(tp=2, pp=2, dp=2, gbs=8)),
    ("expert_fold", dict(tp=1, pp=4, dp=4, ep=8, gbs=16)),
    ("heads", dict(tp=16, pp=1, dp=1, ep=1, etp=1, gbs=16)),
    ("experts", dict(tp=1, pp=1, dp=16, ep=16, etp=1, gbs=16)),  # with 120 experts (set below)
    ("pipeline", dict(tp=1, pp=1, vp=2, dp=16, gbs=16)),
    ("batch", dict(tp=1, pp=1, dp=16, mbs=3, gbs=16)),
    ("context", dict(tp=1, cp=16, pp=1, dp=1, mbs=1, gbs=16)),
    ("schedule", dict(tp=1, pp=2, vp=2, dp=8, mbs=1, gbs=24)),     # 3 micro-batches over pp 2, interleaved
    ("sequence", dict(tp=16, pp=1, dp=1, ep=1, etp=1, gbs=16)),   # with 32 heads and 16 KV heads (set below)
])
def test_each_layout_rule(rule, kw):
    model = load_model("qwen3-30b-a3b")  # 32 heads, 4 KV heads, 128 experts, 48 layers
    if rule == "experts":
        model = dataclasses.replace(model, num_routed_experts=120)
    if rule == "context":
        model = dataclasses.replace(model, seq_len=4104)
    if rule == "sequence":
        model = dataclasses.replace(model, seq_len=4104, num_kv_heads=16)   # 4104 = 8 * 513: not over tp 16
    bits = _bits(model, 16, **kw)
    assert bits == RULE_BITS[rule], (rule, bits)  # exactly this rule broken
    layout = LayoutArrays.from_columns(**kw).layout(0)
    with pytest.raises(CommbenchError, match=rule):
        check_layout(model, layout, 16)


def test_valid_layout_passes_and_pipeline_accounts_embedding_and_loss():
    m = load_model("llama3.1-405b")  # 126 layers: pp16 x vp8 = 128 slots with embedding + loss
    check_layout(m, Layout(tp=4, pp=16, vp=8, dp=4, gbs=1536), 256)
    assert _bits(m, 256, tp=4, pp=16, vp=8, dp=4, gbs=1536) == 0
    assert _bits(m, 512, tp=4, pp=32, vp=8, dp=4, gbs=1536) & RULE_BITS["pipeline"]


def test_parse_layout_derives_dp_and_rejects_bad_keys():
    lay = parse_layout("tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096,recompute=selective", 256)
    assert (lay.dp, lay.etp, lay.edp, lay.num_microbatches) == (128, 1, 4, 32)
    with pytest.raises(CommbenchError, match="--layout"):
        parse_layout("tp=1,bogus=2", 8)
    with pytest.raises(CommbenchError, match="recompute"):
        parse_layout("recompute=sometimes", 8)


# ------------------------------------------------------------------ hand-computed step terms

def _fabric(num_gpus=8, gpu="b200", domain_size=8):
    return SimpleNamespace(gpu=gpu_spec(gpu), domain_size=domain_size, num_gpus=num_gpus)


def _stand_in(monkeypatch, seconds_per_byte=0.0, rs_seconds=None):
    """Cost model stand-in: time = bytes x seconds_per_byte (reduce_scatter optionally fixed)."""
    def collective(fabric, collective, size_bytes, group_size, num_domains=1, imbalance=1.0):
        size, n = np.broadcast_arrays(np.asarray(size_bytes, float), np.asarray(group_size, float))
        if rs_seconds is not None and collective == "reduce_scatter":
            return np.where(n > 1, rs_seconds, 0.0)
        return np.where(n > 1, size * seconds_per_byte, 0.0)

    def a2a(fabric, bytes_per_rank, ep_size, num_domains=1, imbalance=1.0, *, phase=None):
        return collective(fabric, "all_to_all", bytes_per_rank, ep_size) * imbalance

    monkeypatch.setattr(step_module, "_costmodel", lambda: (collective, a2a))

    def hierarchical(fabric, size_bytes, group_size, ranks_per_domain):  # two stages, as the cost model does
        m = np.asarray(ranks_per_domain, float)
        return collective(fabric, "reduce_scatter", size_bytes, m) + \
            collective(fabric, "reduce_scatter", np.asarray(size_bytes, float) / m, np.asarray(group_size, float) / m)

    monkeypatch.setattr(step_module, "_hierarchical", lambda: hierarchical)


BARE = Calibration(layer_overhead_s=0.0, moe_sync_s=0.0, hbm_efficiency=1.0, gemm_traffic_factor=0.0)


def test_compute_and_bubble_hand_computed(monkeypatch):
    _stand_in(monkeypatch)
    m = load_model("llama3-8b")
    lay = Layout(tp=1, pp=4, vp=2, dp=2, mbs=1, gbs=16, precision="bf16", recompute="none")
    bd = evaluate_layouts(m, _fabric(), LayoutArrays.from_layouts([lay]), calibration=BARE)
    fl = flops_breakdown(m)
    # The busiest rank of the chosen layer split sets the pace: the output layer (loss) is ~2 layers
    # of FLOPs, so the split is uneven and the busiest rank carries more than 1/4 of the FLOPs.
    split = best_split(m, 4, 2)
    costs = split.rank_costs(stage_weights(m))
    busiest = max(costs) / (sum(costs) / 4)
    assert 1.0 < busiest < 1.1
    tokens = 8192 / 4 * busiest  # per micro-batch per GPU on the busiest rank (pp = 4)
    gemm = tokens * fl.gemm / (2250e12 * BARE.gemm_efficiency_blackwell)
    attn_tc = tokens * fl.attention_core / (2250e12 * BARE.attention_efficiency)
    # exp units: 32 layers x 32 heads x 4096 keys on average (causal) x 2 (forward + backward recompute)
    attn_sfu = tokens * 32 * 32 * 4096 * 2 / 5.0e12
    # forward (a third of the FLOPs, half the exps) and backward each the smooth max (p = 4) of their sides
    attn = ((attn_tc / 3) ** 4 + (attn_sfu / 2) ** 4) ** 0.25 + ((attn_tc * 2 / 3) ** 4 + (attn_sfu / 2) ** 4) ** 0.25
    n_mb = 16 // 2
    assert bd.gemm_s[0] == pytest.approx(n_mb * gemm, rel=1e-9)
    assert bd.attention_s[0] == pytest.approx(n_mb * attn, rel=1e-9)
    t_mb = bd.compute_s[0] / n_mb
    assert bd.bubble_s[0] == pytest.approx((4 - 1) / 2 * t_mb, rel=1e-9)
    assert bd.step_s[0] == pytest.approx(n_mb * t_mb + bd.bubble_s[0] + bd.optimizer_s[0], rel=1e-9)


def test_dp_overlap_window_hand_computed(monkeypatch):
    rs_s = 0.05
    _stand_in(monkeypatch, rs_seconds=rs_s)
    m = load_model("llama3-8b")
    base = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, precision="bf16", recompute="none")
    both = LayoutArrays.from_layouts([base, dataclasses.replace(base, dp_overlap=False)])
    bd = evaluate_layouts(m, _fabric(), both, calibration=BARE)
    window = bd.compute_s[0] * 2 / 3  # one micro-batch: the last backward is 2/3 of it
    local = param_counts(m).non_expert
    last_bucket = rs_s * BARE.dp_bucket_params / local
    expected = max(rs_s - BARE.overlap_efficiency * min(rs_s, window), 0.0) + last_bucket
    assert bd.dp_dense_rs_total_s[0] == pytest.approx(rs_s)
    assert bd.dp_dense_rs_exposed_s[0] == pytest.approx(min(expected, rs_s), rel=1e-9)
    assert bd.dp_dense_rs_exposed_s[1] == pytest.approx(rs_s)  # no overlap: all exposed


def test_dp_last_bucket_follows_dp_cp(monkeypatch):
    """Megatron-LM's bucket is max(40M, 1M x DP*CP) parameters (training.py core_v0.16.1): at DP128 the exposed last
    bucket is 128M of the local gradient, not 40M."""
    rs_s = 0.05
    _stand_in(monkeypatch, rs_seconds=rs_s)
    m = load_model("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=128, mbs=1, gbs=128, precision="bf16", recompute="none")
    local = param_counts(m).non_expert
    hidden = dataclasses.replace(BARE, overlap_efficiency=1.0)
    bd = evaluate_layouts(m, _fabric(num_gpus=128), LayoutArrays.from_layouts([lay]), calibration=hidden)
    window = bd.compute_s[0] * 2 / 3
    expected = max(rs_s - min(rs_s, window), 0.0) + rs_s * 128e6 / local
    assert bd.dp_dense_rs_exposed_s[0] == pytest.approx(min(expected, rs_s), rel=1e-9)
    assert bd.dp_dense_rs_exposed_s[0] > rs_s * 40e6 / local * 2    # not the fixed 40M bucket


def test_memory_terms_hand_computed(monkeypatch):
    _stand_in(monkeypatch)
    m = load_model("llama3-8b")
    lays = [Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, distributed_optimizer=True),
            Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, distributed_optimizer=False),
            Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, recompute="full")]
    bd = evaluate_layouts(m, _fabric(), LayoutArrays.from_layouts(lays), calibration=BARE)
    p = param_counts(m).total
    assert bd.mem_weights_bytes[0] == pytest.approx(2 * p)
    assert bd.mem_grads_bytes[0] == pytest.approx(2 * p)
    assert bd.mem_optimizer_bytes[0] == pytest.approx(12 * p / 8)
    assert bd.mem_optimizer_bytes[1] == pytest.approx(12 * p)
    # full recompute keeps each layer's input (h bf16 per token) plus the logits' fp32 softmax (the launch's native
    # fused cross entropy: step/loss_memory.py), and while a layer is re-run for its backward that layer's whole
    # saved activations (row 0, recompute none: 32 such layers + the logits) less its input
    logits = 8192 * 128256 * 4
    one_layer = (bd.mem_activations_bytes[0] - logits) / 32
    # the re-run layer and the logits never coexist (the loss's backward frees the logits first): the larger (fix-G11)
    assert bd.mem_activations_bytes[2] == pytest.approx(8192 * 4096 * 2 * 32
                                                        + max(one_layer - 8192 * 4096 * 2, logits))
    assert bd.mem_reserve_bytes[0] == pytest.approx(BARE.reserve_fixed_bytes + BARE.reserve_fraction * 178.35 * 2 ** 30)   # B200: what CUDA exposes
    assert bd.mem_total_bytes[0] == pytest.approx(
        bd.mem_weights_bytes[0] + bd.mem_grads_bytes[0] + bd.mem_optimizer_bytes[0]
        + bd.mem_activations_bytes[0] + bd.mem_reserve_bytes[0])


def test_fp8_weights_and_cpu_offload_memory(monkeypatch):
    """fp8 / mxfp8 hold the transformer layers' weights in fp8 (fp8_param_gather), nvfp4 and bf16 in bf16; mxfp8 adds
    the cached columnwise copy (1 B + an e8m0 scale per 32), nvfp4 both cached NVFP4 copies (2 x 0.5625 B); the
    embedding and output layer stay bf16 with no copies (step/module_precision.py);
    offloading N of a rank's layers to host keeps (L - N) / L of the per-layer activations, the logits stay."""
    _stand_in(monkeypatch)
    m = load_model("llama3-8b")
    base = dict(tp=1, pp=1, dp=8, mbs=1, gbs=8, recompute="full")
    lays = [Layout(**base, precision=p) for p in ("bf16", "fp8", "mxfp8", "nvfp4")]
    lays += [Layout(**base, cpu_offload_layers=8), Layout(**base, cpu_offload_layers=40)]
    bd = evaluate_layouts(m, _fabric(), LayoutArrays.from_layouts(lays), calibration=BARE)
    pc = param_counts(m)
    p, v = pc.total, pc.embeddings
    layers_p = p - v
    assert list(bd.mem_weights_bytes[:4]) == pytest.approx([2 * p, layers_p + 2 * v, (2 + 1 / 32) * layers_p + 2 * v,
                                                            (2 + 2 * 0.5625) * layers_p + 2 * v])
    assert list(bd.mem_grads_bytes[:4]) == pytest.approx([2 * p] * 4)
    layers, logits = 8192 * 4096 * 2 * 32, 8192 * 128256 * 4   # the launch's native loss: 4 B per logit
    # the layer full recompute re-runs is smaller than these logits, which it never meets: the logits are charged
    # (fix-G11: the loss's backward frees them before the re-run)
    assert bd.mem_activations_bytes[0] == pytest.approx(layers + logits)
    assert bd.mem_activations_bytes[4] == pytest.approx(layers * 24 / 32 + logits)
    assert bd.mem_activations_bytes[5] == pytest.approx(layers * 1 / 32 + logits)  # one layer stays


def test_step_time_falls_with_bandwidth_and_never_below_compute(monkeypatch):
    m = load_model("qwen3-30b-a3b")
    rng = np.random.default_rng(1)
    n = 400
    tp, pp = rng.choice([1, 2, 4], n), rng.choice([1, 2, 4], n)
    arr = LayoutArrays.from_columns(tp=tp, pp=pp, dp=64 // (tp * pp), ep=rng.choice([1, 8, 16], n), etp=1,
                                    vp=rng.choice([1, 2], n), mbs=1, gbs=1024, moe_a2a_overlap=rng.random(n) < .5,
                                    tp_comm_overlap=rng.random(n) < .5, dp_overlap=rng.random(n) < .5)
    steps = []
    for seconds_per_byte in (1e-9, 1e-10, 1e-11):
        _stand_in(monkeypatch, seconds_per_byte)
        bd = evaluate_layouts(m, _fabric(64), arr)
        ok = bd.valid
        assert ok.sum() > 50
        assert np.all(bd.step_s[ok] >= bd.compute_s[ok])
        steps.append(bd.step_s[ok])
    assert np.all(steps[1] <= steps[0]) and np.all(steps[2] <= steps[1])
    assert np.any(steps[1] < steps[0])


def test_invalid_layouts_are_marked_not_raised(monkeypatch):
    _stand_in(monkeypatch)
    arr = LayoutArrays.from_columns(tp=[1, 3], pp=1, dp=[8, 8], gbs=8)
    bd = evaluate_layouts(load_model("llama3-8b"), _fabric(), arr)
    assert bd.valid.tolist() == [True, False]
    assert np.isinf(bd.step_s[1]) and not bd.fits[1]


def test_layout_refuses_a_non_boolean_flag():
    from commbench.errors import CommbenchError
    from commbench.planner import Layout
    with pytest.raises(CommbenchError, match="moe_a2a_overlap='false' is invalid: true or false"):
        Layout(moe_a2a_overlap="false")
    assert Layout(moe_a2a_overlap=np.bool_(True)).moe_a2a_overlap


def test_block_recompute_charges_and_frees_its_share_of_each_chunk(monkeypatch):
    """recompute=full with recompute_layers=N (Megatron's --recompute-method block) recomputes N of each model
    chunk's layers and stores the rest: N / layers-per-chunk of full recompute's extra forward and of the
    activation memory it frees; a count of the whole chunk is all of it, and one beyond the largest chunk is outside
    megatron-core's documented 1..num_layers_per_pipeline_rank (rule recompute_layers)."""
    _stand_in(monkeypatch)
    m = load_model("llama3-8b")   # 32 layers
    base = dict(tp=1, dp=8, mbs=1, gbs=8)
    lays = [Layout(**base, recompute="none"), Layout(**base, recompute="full"),
            Layout(**base, recompute="full", recompute_layers=5), Layout(**base, recompute="full", recompute_layers=32),
            Layout(**base, pp=2, vp=2, recompute="full"), Layout(**base, pp=2, vp=2, recompute="full", recompute_layers=2)]
    bd = evaluate_layouts(m, _fabric(8), LayoutArrays.from_layouts([dataclasses.replace(x, dp=8 // x.pp) for x in lays]),
                          calibration=BARE)
    assert bd.valid.all() and bd.recompute_s[0] == 0 and bd.recompute_s[1] > 0
    assert bd.recompute_s[2] == pytest.approx(bd.recompute_s[1] * 5 / 32)
    assert bd.recompute_s[3] == pytest.approx(bd.recompute_s[1])
    assert bd.recompute_s[5] == pytest.approx(bd.recompute_s[4] * 2 / 8)   # 8 layers per chunk at pp 2 x vp 2
    act = bd.mem_activations_bytes
    assert act[1] < act[2] < act[0]
    # the layer being re-run holds its whole activations beside the stored ones (full and block alike), but never
    # beside the logits (native's fp32 softmax: 4 B per logit), larger here: the larger is charged (fix-G11)
    logits = 8192 * 128256 * 4
    assert act[1] == pytest.approx(8192 * 4096 * 2 * 32 + logits)
    assert act[2] == pytest.approx(5 / 32 * (act[1] - logits) + 27 / 32 * (act[0] - logits) + logits)
    assert act[3] == pytest.approx(act[1])
    beyond = evaluate_layouts(m, _fabric(8), LayoutArrays.from_layouts([Layout(**base, recompute="full",
                                                                               recompute_layers=33)]), calibration=BARE)
    assert not beyond.valid[0]


def test_block_recompute_needs_full_recompute_and_round_trips_through_megatron_args():
    from commbench.planner.emit.megatron import megatron_args, parse_megatron_args
    m = load_model("llama3-8b")
    with pytest.raises(CommbenchError, match="recompute_layers"):
        check_layout(m, Layout(tp=1, dp=8, mbs=1, gbs=8, recompute="selective", recompute_layers=5), 8)
    lay = Layout(tp=1, dp=8, mbs=1, gbs=128, recompute="full", recompute_layers=5)
    argv = megatron_args(lay, m)
    at = argv.index("--recompute-method")
    assert argv[at:at + 4] == ["--recompute-method", "block", "--recompute-num-layers", "5"]
    assert parse_megatron_args(argv, 8).recompute_layers == 5
    from commbench.planner.search.explain import short
    assert "recompute=full(5/chunk)" in short(lay) and "(" not in short(dataclasses.replace(lay, recompute_layers=0))
    uniform = megatron_args(dataclasses.replace(lay, recompute_layers=0), m)
    assert uniform[uniform.index("--recompute-method") + 1] == "uniform"
    assert parse_megatron_args(uniform, 8).recompute_layers == 0


def test_recipes_carry_their_recomputed_layer_count():
    from commbench.planner.layout.recipes import recipe_for
    sizes = dict(num_gpus=8, tp=1, pp=1, vp=1, ep=1, mbs=1, gbs=128)
    fp8 = recipe_for("25.11", "llama3-8b", "h100", "fp8", sizes)   # LLAMA3_8B_H100_FP8_CS_BASE_CONFIG: 5 layers
    assert fp8["recompute"] == "full" and fp8["recompute_layers"] == 5
    assert recipe_for("25.11", "llama3-8b", "h100", "bf16", sizes)["recompute_layers"] == 0
    moved = recipe_for("25.11", "llama3-8b", "h100", "fp8", dict(sizes, pp=2))   # another split: not carried over
    assert moved["recompute_layers"] == 0


def test_offload_rule_names_its_fields():
    m = load_model("llama3-8b")
    with pytest.raises(CommbenchError, match="cpu_offload_layers = 4, pp = 2"):
        check_layout(m, Layout(tp=1, pp=2, dp=4, mbs=1, gbs=8, cpu_offload_layers=4), 8)


def test_cached_quantized_weight_copies_by_recipe_and_framework():
    """Megatron (Transformer Engine) caches the block-scaled weight copies across micro-batches: mxfp8 with
    fp8 primary weights adds only the columnwise copy, bf16 primaries add both; torchtitan caches none."""
    from commbench.planner.layout.spec import PRECISIONS
    from commbench.planner.step.memory import quantized_weight_cache_bytes
    code = np.array([PRECISIONS.index(p) for p in ("bf16", "fp8", "mxfp8", "mxfp8", "nvfp4")])
    primary = np.array([2.0, 1.0, 1.0, 2.0, 2.0])
    assert list(quantized_weight_cache_bytes(code, primary)) == pytest.approx(
        [0.0, 0.0, 1 + 1 / 32, 2 * (1 + 1 / 32), 2 * 0.5625])
    assert not np.any(quantized_weight_cache_bytes(code, primary, "torchtitan"))


def test_a_variant_takes_its_base_models_fields_but_not_its_published_figures(tmp_path):
    """models.toml / --model-file `variant_of`: the base's fields, arch and arch_sources under the variant's own;
    the published parameter and FLOPs figures belong to one checkpoint and are not inherited; an unknown or
    cyclic base is one line naming it."""
    from commbench.errors import CommbenchError
    oss20, oss120 = load_model("gpt-oss-20b"), load_model("gpt-oss-120b")
    assert (oss20.num_layers, oss20.num_routed_experts, oss20.hidden, oss20.top_k) == (24, 32, 2880, 4)
    assert oss20.architecture.softmax_type == oss120.architecture.softmax_type == "learnable"
    assert oss20.architecture.source("load_balancing").path.endswith("gpt-oss-20b.sh")
    f = tmp_path / "m.toml"
    f.write_text('[model.half]\nvariant_of = "llama3-8b"\nlayers = 16\n')
    half = load_model("half", model_file=f)
    assert half.num_layers == 16 and half.hidden == load_model("llama3-8b").hidden
    assert half.published_flops_per_token_gflop is None and half.published_params_total_b is None
    for text, bad in (('[model.x]\nvariant_of = "nope"\nlayers = 2\n', "'nope'"),
                      ('[model.x]\nvariant_of = "y"\n[model.y]\nvariant_of = "x"\nlayers = 2\n', "x -> y -> x")):
        f.write_text(text)
        with pytest.raises(CommbenchError, match="variant_of") as exc:
            load_model("x", model_file=f)
        assert bad in str(exc.value) and "\n" not in str(exc.value)


# ------------------------------------------------------------------ DeepSeek-V4's hybrid attention (models/dsv4.py)

def test_deepseek_v4_flash_counts_the_published_totals_and_megatron_bridges_flops_by_part():
    """284B total (model card); Megatron-Bridge flop_utils.py (067f987) at 4,096 tokens, transcribed by hand:
    projections 44 x 106,956,288 + compressors 260,046,848 + indexer 225,705,984 MACs; core 44 (window only on
    W and H layers) ... as the docstring of models/dsv4.py lists. The attention parts must not trade places."""
    m = load_model("deepseek-v4-flash")
    assert param_counts(m).total / 1e9 == pytest.approx(284.0, rel=0.01)
    fl = flops_breakdown(m, 4096)
    proj = 44 * 106_956_288 + 21 * 4096 * 1024 * 2 + 20 * 4096 * 512 * 2 \
        + 21 * (4096 * 256 * 2 + 1024 * 64 * 128 + 4096 * 64)
    core = 23 * 64 * 128 * 512 * 2 + 21 * 64 * (128 + 384) * 512 * 2 + 4096 * (20 * 64 * 512 / 128 + 21 * 64 * 128 / 4)
    assert (fl.attention_proj, fl.attention_core) == (pytest.approx(6 * proj), pytest.approx(6 * core))
    # without the MTP layer (a W layer): one layer's projections and window fewer
    lean = flops_breakdown(m, 4096, include_mtp=False)
    assert fl.attention_proj - lean.attention_proj == pytest.approx(6 * 106_956_288)
    assert fl.attention_core - lean.attention_core == pytest.approx(6 * 64 * 128 * 512 * 2)


@pytest.mark.parametrize("changes, message", [
    (dict(csa_pattern="WC"), r"deepseek-v4-flash.csa_pattern='WC' is invalid: one of W/C/H per layer \(43 layers\)"),
    (dict(csa_pattern=""), 'csa_pattern.*set exactly when attention = "dsv4"'),
    (dict(o_groups=3), r"o_groups=3 is invalid: must divide heads \(64\)"),
    (dict(index_topk=0), r"index_topk=0 is invalid: > 0: compressed sparse \(C\) layers have an indexer"),
    (dict(hash_layers=50), "hash_layers=50 is invalid: 0..43"),
])
def test_a_deepseek_v4_spec_that_does_not_add_up_is_one_line(changes, message):
    with pytest.raises(CommbenchError, match=message):
        dataclasses.replace(load_model("deepseek-v4-flash"), **changes)


def test_deepseek_v4_layouts_keep_output_groups_whole_and_no_context_parallelism():
    m = load_model("deepseek-v4-flash")  # 8 output groups of 8 heads
    assert _bits(m, 128, tp=8, pp=1, dp=16, ep=8, gbs=256) == 0
    assert _bits(m, 128, tp=16, pp=1, dp=8, ep=8, gbs=256) & RULE_BITS["heads"]
    assert _bits(m, 128, tp=1, cp=2, pp=1, dp=64, ep=8, gbs=256) & RULE_BITS["heads"]
    with pytest.raises(CommbenchError, match="DeepSeek-V4's hybrid attention tp its output-projection groups and cp=1"):
        check_layout(m, Layout(tp=1, cp=2, dp=64, ep=8, gbs=256), 128)


def test_deepseek_v4_step_terms_follow_its_windows_streams_and_query_up_projection():
    m = load_model("deepseek-v4-flash")
    lay = LayoutArrays.from_layouts([Layout(tp=1, pp=1, dp=64, ep=64, gbs=2048, mbs=1, recompute=r)
                                     for r in ("none", "mla_up_proj")])
    plain = dataclasses.replace(m, hc_mult=0)
    from commbench.costmodel import load_preset
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    bd, bd_plain = (evaluate_layouts(x, fabric, lay) for x in (m, plain))
    # four residual streams: more HBM traffic and more stored activations than one
    assert np.all(bd.memory_bound_s > bd_plain.memory_bound_s) and np.all(bd.mem_total_bytes > bd_plain.mem_total_bytes)
    # mla_up_proj repeats the query up-projection's forward, nothing without it
    assert bd.recompute_s[0] == 0 and bd.recompute_s[1] > 0
    # the attention core's softmax covers the windows and the selected blocks, not half the sequence per layer
    from commbench.planner.step.kernels import EXPS_PER_SCORE, attention_exps_per_token
    keys = 3 * 128 + 21 * (128 + 384) + 20 * (128 + 4096 / 256)  # W (with MTP), C, H layers
    assert attention_exps_per_token(m, 4096) == pytest.approx(64 * keys * EXPS_PER_SCORE)


def test_neither_framework_launches_deepseek_v4_and_each_refusal_says_so_in_one_line():
    from commbench.planner.search.frameworks import framework_pins
    m = load_model("deepseek-v4-flash")
    with pytest.raises(CommbenchError, match=r"^TorchTitan 0.3.0 has no deepseek-v4-flash model .*: --framework megatron "
                                             r"predicts it, though Megatron-LM cannot launch it either$"):
        framework_pins("torchtitan", m, {})
    assert framework_pins("megatron", m, {"tp": 1}) == {"tp": 1}  # the search (the prediction) runs
    with pytest.raises(CommbenchError, match="^Megatron-LM core_v0.16.1 cannot build deepseek-v4-flash: its hybrid"):
        from commbench.planner.emit.megatron import model_args
        model_args(m)
