"""`commbench nccl-tuner` on adversarial evidence: a rule only where a measured override beat NCCL's default
measured the same way, with enough iterations to say so (the plugin file is read with the reproduction of
NCCL's example plugin in tests/test_nccl_tuner.py)."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _record, reproduced_plugin_load


def _rules(tmp_path, records, *options) -> tuple[list[dict], str]:
    """The rules `nccl-tuner` writes from one run's records (header "a", 4 ranks on one host), and the file text."""
    index = len(list(tmp_path.glob("r*.jsonl")))  # a fresh file each call: JsonlWriter appends
    path, conf = tmp_path / f"r{index}.jsonl", tmp_path / "c.conf"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for record in records:
            writer.write(record)
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf), *options])
    assert result.exit_code == 0, result.output
    text = conf.read_text()
    return reproduced_plugin_load(text)[0], text


def _few(size, combo, samples):
    """A record of len(samples) iterations, with those samples."""
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    return dataclasses.replace(_record("a", size, combo, median), iters=len(samples), iter_times_us=list(samples),
                               time_us_p99=None, time_us_max=ordered[-1], time_us_min=ordered[0],
                               time_us_mean=sum(samples) / len(samples))


def test_a_few_iterations_give_no_95_percent_interval_and_make_no_rule(tmp_path):
    """With 2-5 iterations the median's 95% order-statistic interval does not exist (n < 6: both tails of
    Binomial(n, 1/2) hold more than 5%); median_interval falls back to (min, max), zero for equal samples, so
    three equal iterations 2% faster were a rule. Too few iterations say nothing about the noise: no rule."""
    configs, text = _rules(tmp_path, [_few(1024, DEFAULT, [20.0] * 3), _few(1024, RING_LL, [19.6] * 3)])
    assert configs == [] and "noise unknown" in text
    no_samples = [dataclasses.replace(_few(1024, combo, [t] * 5), iter_times_us=[]) for combo, t in
                  ((DEFAULT, 20.0), (RING_LL, 19.6))]  # older records: max == median read as zero spread
    assert _rules(tmp_path, no_samples)[0] == []
    enough = [_few(1024, DEFAULT, [20.0, 20.1] * 10), _few(1024, RING_LL, [10.0, 10.1] * 10)]
    assert [c["algo"] for c in _rules(tmp_path, enough)[0]] == ["ring"]  # 20 iterations: a 2x win is a rule


def test_points_of_aggregated_group_calls_make_no_rule(tmp_path):
    """-m N (agg_iters): commbench times N calls back to back per operation; nccl-tests' -m groups them, and NCCL
    then asks the tuner once for nBytes = N x the size with numPipeOps ceil(N / channels), not N (src/enqueue.cc
    ncclPrepareTasks, NVIDIA/nccl v2.30.7-1). Neither is the one call of the size a rule names: left out."""
    for key in ("agg_iters", "agg_iters_ungrouped"):   # nccl-tests' grouped -m, commbench's back-to-back calls
        records = [dataclasses.replace(r, params={**r.params, key: 4})
                   for r in (_record("a", 1024, DEFAULT, 20.0), _record("a", 1024, RING_LL, 10.0))]
        records.append(_record("a", 4096, DEFAULT, 30.0))  # one usable point, so the file is written
        configs, text = _rules(tmp_path, records)
        assert configs == [] and "aggregated" in text, key


def test_a_winner_is_compared_only_with_nccls_default_measured_the_same_way(tmp_path):
    """A default measured on torch-nccl against a ring/ll measured on cupy-nccl (no framework overhead), eagerly
    against a CUDA-graph replay (NCCL_GRAPH_REGISTER=0: regBuff 0 for both), in place against out of place, or
    blocking against not: the gain is the measurement's, not ring/ll's. Each way measured is its own comparison,
    and a rule needs a win in each, as with dtypes."""
    ways = {"backend": lambda r: dataclasses.replace(r, backend="cupy-nccl"),
            "graph": lambda r: dataclasses.replace(r, params={**r.params, "cuda_graph": True}),
            "in place": lambda r: dataclasses.replace(r, in_place=True),
            "blocking": lambda r: dataclasses.replace(r, params={**r.params, "blocking": True})}
    for name, other_way in ways.items():
        records = [_record("a", 1024, DEFAULT, 20.0), other_way(_record("a", 1024, RING_LL, 10.0))]
        assert _rules(tmp_path, records)[0] == [], name
        # NCCL's example plugin gets ring/ll/16 written anyway (its only explicit count), but not as a winner
        assert "faster than NCCL default" not in _rules(tmp_path, records, "--for", "example-plugin")[1], name
        both = records + [other_way(_record("a", 1024, DEFAULT, 20.0)), _record("a", 1024, RING_LL, 10.0)]
        assert {c["algo"] for c in _rules(tmp_path, both)[0]} == {"ring"}, name  # beaten both ways: a rule


def test_repeated_measurements_count_against_a_rule_whatever_their_order(tmp_path):
    """NCCL's default measured twice (20 us, then 25 us in a slower run) and ring/ll once at 22 us: the latest
    record counted, so file order made ring/ll a 1.14x winner although NCCL's default ran at 20 us. A rule must
    beat the fastest measurement of NCCL's default with the slowest of its own."""
    first, slow = _record("a", 1024, DEFAULT, 20.0), _record("a", 1024, DEFAULT, 25.0)
    ring = _record("a", 1024, RING_LL, 22.0)
    for order in ([first, ring, slow], [slow, ring, first]):
        assert _rules(tmp_path, order)[0] == []
    rings = [_record("a", 1024, RING_LL, 10.0), _record("a", 1024, RING_LL, 21.0)]
    for order in (rings, rings[::-1]):
        assert _rules(tmp_path, [first, *order])[0] == []  # ring/ll's own slow run: no rule either
    assert [c["algo"] for c in _rules(tmp_path, [first, slow, rings[0]])[0]] == ["ring"]


def test_a_size_measured_only_with_overrides_is_left_to_nccl_and_says_why(tmp_path):
    """ring/ll wins 1 KiB; 4 KiB has ring/ll (fast) but no NCCL default: nothing shows it beats NCCL there, so the
    rule stops at 1 KiB, and the file says the default was not measured (it said no combination was)."""
    configs, text = _rules(tmp_path, [_record("a", 1024, DEFAULT, 20.0), _record("a", 1024, RING_LL, 10.0),
                                      _record("a", 4096, RING_LL, 5.0)])
    assert [(c["min"], c["max"], c["algo"]) for c in configs] == [(1024, 1024, "ring")]
    assert "NCCL default kept at 4 KiB: NCCL default was not measured at this size" in text


def test_a_kept_default_says_the_best_was_slower_or_the_default_failed(tmp_path):
    """The kept-default comment said "within noise ... or below --min-gain" where the best combination measured was
    slower than NCCL's default (speed-up < 1), and "was not measured" where NCCL's default was measured and failed:
    it says which."""
    slower = [_record("a", 1024, DEFAULT, 10.0), _record("a", 1024, RING_LL, 20.0)]
    configs, text = _rules(tmp_path, slower)
    assert configs == [] and "best ring/ll/16 was slower than NCCL's default (0.50x, median)" in text, text
    assert "within noise" not in text
    failed = dataclasses.replace(_record("a", 4096, DEFAULT, 20.0), status="failed", error="NCCL timeout",
                                 time_us_median=None, time_us_mean=None, time_us_min=None, time_us_max=None,
                                 time_us_p99=None, iter_times_us=[], algbw_gbps=None, busbw_gbps=None, num_wrong=None)
    configs, text = _rules(tmp_path, [*slower, failed, _record("a", 4096, RING_LL, 5.0)])
    assert configs == [] and "NCCL default kept at 4 KiB: NCCL default FAILED at this size" in text, text
    assert "not measured" not in text


def test_predicted_rules_only_where_the_fastest_pair_leads_by_more_than_the_cost_models_error(tmp_path):
    """h100-hgx, 8 GPUs, all-reduce at 1 KiB: ring/ll 22.0 us against tree/ll 22.2 us predicted, a 1% lead far
    inside the model's 15% error (benchmarks/costmodel_accuracy.py); NCCL's own model may pick either, and a
    rule forcing the wrong one makes NCCL slower. Such sizes are left to NCCL; a clear lead stays a rule."""
    from commbench.cli.predict import resolve_fabric
    from commbench.workflows.nccl_tuner import PREDICTED_MARGIN, from_fabric

    fabric = resolve_fabric(None, "h100-hgx", None, 8)
    sizes = [1 << k for k in range(10, 34)]
    result = from_fabric(fabric, ranks=8, nodes=1, sizes_bytes=sizes)
    times: dict[tuple, list[float]] = {}
    for p in result.points:
        times.setdefault((p.collective, p.size_bytes), []).append(p.time_us)
    leads = {key: sorted(t)[1] / sorted(t)[0] - 1 for key, t in times.items() if len(t) > 1}
    assert PREDICTED_MARGIN >= 0.15 and leads[("allreduce", 1024)] < 0.05
    for rule in result.rules:
        for size in rule.sizes_bytes:
            assert leads.get((rule.collective, size), 1.0) > PREDICTED_MARGIN, (rule, size)
    assert result.rules and any("15%" in note for note in result.notes)
    conf = tmp_path / "p.conf"
    assert CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "8", "-O", str(conf)]).exit_code == 0
    assert "allreduce nodes=1 ranks=8 [1024-1536]: NCCL default kept at 1 KiB" in conf.read_text()
    assert "faster than NCCL default" not in conf.read_text()  # a predicted lead is over the next pair


def test_a_record_naming_no_valid_combination_is_one_error_line_never_a_rule(tmp_path):
    """A hand-edited or foreign results file: an unknown algorithm, a channel count NCCL cannot hold (100 > 64:
    it was written into a rule), or one that is not an integer ("16", true) was a traceback or a rule."""
    for field, value in (("nccl_algo", "bogus"), ("nccl_channels", 100), ("nccl_channels", "16"),
                         ("nccl_channels", True), ("nccl_channels", 0), ("nccl_proto", 3)):
        ring = _record("a", 1024, RING_LL, 10.0)
        path = tmp_path / f"bad-{field}-{value}.jsonl"
        with JsonlWriter(path) as writer:
            writer.write(_header("a", ["h"] * 4))
            writer.write(_record("a", 1024, DEFAULT, 20.0))
            writer.write(dataclasses.replace(ring, params={**ring.params, field: value}))
        result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(tmp_path / "c.conf")])
        assert result.exit_code == 2, (value, result.exception)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and f"params.{field}={value!r}" in lines[0], lines
        assert "allowed" in lines[0] and not (tmp_path / "c.conf").exists()
    odd = dataclasses.replace(_record("a", 1024, RING_LL, 10.0), params={**RING_LL.params(), "agg_iters": "x"})
    assert _rules(tmp_path, [_record("a", 1024, DEFAULT, 20.0), odd, _record("a", 4096, DEFAULT, 20.0)])[0] == []


def test_a_combination_measured_in_a_dtype_without_nccls_default_there_makes_no_rule(tmp_path):
    """ring/ll wins float32 (10 us against 20) but was measured in bfloat16 too (30 us) with no bfloat16 default:
    the plugin applies the rule to bfloat16 calls of those bytes, where nothing shows it beats NCCL (and 30 us
    hints it does not). Only the float32 comparison counted; now every way the combination was measured needs
    NCCL's default beside it."""
    records = [_record("a", 1024, DEFAULT, 20.0), _record("a", 1024, RING_LL, 10.0),
               _record("a", 1024, RING_LL, 30.0, dtype="bfloat16")]
    configs, text = _rules(tmp_path, records)
    # NCCL's default WAS measured at this size (float32): the comment names the dtype it lacks (probe P2)
    assert configs == [] and "NCCL default not measured in bfloat16, where ring/ll/16 was" in text, text
    both = [*records, _record("a", 1024, DEFAULT, 40.0, dtype="bfloat16")]
    assert [c["algo"] for c in _rules(tmp_path, both)[0]] == ["ring"]


def test_a_point_whose_run_forced_another_combination_than_its_record_names_makes_no_rule(tmp_path):
    """A record saying ring/ll/16 from a run whose header shows NCCL_ALGO=Tree (or 8 channels) ran tree (8
    channels): a rule would force what was not measured."""
    for env in ({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, {"NCCL_ALGO": "ring", "NCCL_MIN_NCHANNELS": "8"}):
        path, conf = tmp_path / f"env-{len(env)}-{sorted(env)[-1]}.jsonl", tmp_path / "c.conf"
        with JsonlWriter(path) as writer:
            writer.write(_header("a", ["h"] * 4))
            writer.write(_record("a", 1024, DEFAULT, 20.0))
            writer.write(dataclasses.replace(_header("b", ["h"] * 4), nccl_env=env))
            writer.write(_record("b", 1024, RING_LL, 10.0))
        result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf)])
        assert result.exit_code == 0, result.output
        assert reproduced_plugin_load(conf.read_text())[0] == [] and "contradict" in conf.read_text(), env
