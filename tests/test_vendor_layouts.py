"""benchmarks/vendor_layouts.py --why: what a predicted gain over a published layout is made of (each flag
the search would change on the published structure, switched alone)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import vendor_layouts  # noqa: E402

from commbench.planner.calibrate.published import _preset, published_runs  # noqa: E402
from commbench.planner.layout.spec import LayoutArrays  # noqa: E402
from commbench.planner.step.evaluate import evaluate_layouts  # noqa: E402


def _run(predicate):
    return next(r for r in published_runs() if r.layout is not None and predicate(r.layout))


def test_each_differing_flag_is_priced_alone_on_the_published_layout():
    run = _run(lambda lay: lay.cuda_graph == "none" and lay.cpu_offload_layers == 0 and not lay.fsdp)
    flagged = dataclasses.replace(run.layout, cuda_graph="layer", recompute="full")
    rows = [dict(run=run, rank=1, flagged=flagged)]
    per_flag = vendor_layouts.flag_gains(rows)
    assert set(per_flag) == {"cuda_graph", "recompute"}
    bd = evaluate_layouts(run.model, _preset(run.preset, int(run.row["num_gpus"])),
                          LayoutArrays.from_layouts([run.layout, dataclasses.replace(run.layout, cuda_graph="layer")]),
                          seq_len=int(run.row["seq_len"]))
    want = bd.tokens_per_s_per_gpu[1] / bd.tokens_per_s_per_gpu[0] - 1.0
    assert per_flag["cuda_graph"] == [pytest.approx(want)]
    assert per_flag["recompute"][0] < 0          # full recompute alone costs time
    assert [w.split()[0] for w in rows[0]["why"]] == ["recompute", "cuda_graph"]   # FLAG_FIELDS order


def test_a_switch_invalid_alone_is_named_and_left_out_of_the_table():
    run = _run(lambda lay: lay.cpu_offload_layers > 0 and lay.recompute == "none")
    rows = [dict(run=run, rank=1, flagged=dataclasses.replace(run.layout, recompute="full", cpu_offload_layers=0))]
    per_flag = vendor_layouts.flag_gains(rows)
    assert "recompute" not in per_flag and "cpu_offload_layers" in per_flag
    assert any(w.startswith("recompute none->full (invalid alone)") for w in rows[0]["why"])


def test_rows_without_a_flagged_layout_are_skipped():
    run = _run(lambda lay: True)
    rows = [dict(run=run, rank=None, flagged=None)]
    assert vendor_layouts.flag_gains(rows) == {} and rows[0]["why"] == []


def test_regime_of_the_planners_best_follows_the_calibration_coverage():
    """The regime split the summary prints: EP across scale-up domains is 'tested' where the calibration set
    has such a run on that system (B300: gpt-oss EP64), 'untested' where it has none (GB300: the held-out
    table, never in the calibration set); FSDP on a MoE model is untested everywhere."""
    import json

    runs = published_runs()
    moe_b300 = next(r for r in runs if r.layout is not None and r.preset == "b300-hgx" and r.model.is_moe)
    moe_h100 = next(r for r in runs if r.layout is not None and r.preset == "h100-hgx" and r.model.is_moe)
    dense = next(r for r in runs if r.layout is not None and not r.model.is_moe)
    held = published_runs(tuple(json.loads(vendor_layouts.HELD_OUT.read_text())))
    moe_gb300 = next(r for r in held if r.layout is not None and r.model.is_moe)

    def regime(run, **best):
        return vendor_layouts.regime_of(dict(run=run, best=dataclasses.replace(run.layout, **best)))

    assert regime(dense) == "dense"
    assert regime(moe_b300, ep=16, etp=1) == "EP across scale-up domains, tested"
    assert regime(moe_gb300, ep=128, etp=1) == "EP across scale-up domains, untested"
    assert regime(moe_h100, ep=8, etp=1, fsdp=False) == "MoE, EP inside a domain"
    assert regime(moe_h100, ep=8, etp=1, fsdp=True) == "FSDP on a MoE model, untested"


def test_a_later_releases_faster_layout_in_another_table_is_credited_as_measured():
    """later%: a calibration row whose run a newer release published with another structure, faster, gets that
    MEASURED gain even though the newer row lives in another table (the pool); a slower one, the same structure,
    or an older release does not count."""
    run = _run(lambda lay: lay.tp == 1 and lay.mbs == 1)

    def variant(tokens, rel, **change):
        return dataclasses.replace(run, row=dict(run.row, tokens_per_s_per_gpu=tokens, release=rel),
                                   layout=dataclasses.replace(run.layout, **change))

    mine = float(run.row["tokens_per_s_per_gpu"])
    pool = [variant(mine * 1.5, "99.01", mbs=2),          # later, other structure, faster: counts
            variant(mine * 3.0, "99.01"),                  # later, same structure: a software gain, not a layout
            variant(mine * 4.0, "24.01", mbs=2),           # older release
            variant(mine * 0.5, "99.02", mbs=4)]           # later, other structure, slower
    rows = [dict(run=run)]
    vendor_layouts.later_layout_gain(rows, pool)
    assert rows[0]["later"] == pytest.approx(0.5)
    rows = [dict(run=run)]
    vendor_layouts.later_layout_gain(rows)          # no pool: the row alone has nothing later
    assert rows[0]["later"] is None


def test_a_dense_published_structure_is_read_with_the_searchs_flags():
    """The 'structure, search's flags' reading pins the published tp/pp/vp/ep/cp/mbs (and a MoE row's expert TP):
    a dense row's etp (1 in the table beside tp 4) is no pin the search takes, so pinning it lost every dense TP
    row from that reading (61 of 87 calibration layouts, when the search began refusing etp pins on dense models)."""
    runs = [r for r in published_runs() if r.layout is not None and not r.model.is_moe and r.layout.tp > 1
            and r.layout.etp != r.layout.tp][:2]
    assert runs
    rows = vendor_layouts.rank_rows(runs)
    assert all(r["srank"] is not None and r["flagged"] is not None for r in rows), [r["run"].label for r in rows]
    assert all(r["flagged"].tp == r["run"].layout.tp and r["flagged"].pp == r["run"].layout.pp for r in rows)


def test_flags_are_published_only_where_a_recipe_or_the_row_gives_them():
    """A row of a family the recipe table does not read (Nemotron-3) takes the default recipe's flags, assumed: the
    summary counts it apart. The same row with its own recipe fields, and a row whose release's recipe has its sizes,
    are published facts; a row no recipe of its release has the sizes of (25.11 Llama3-8B H100: FSDP=8, the recipe
    none) takes the nearest recipe's flags, assumed."""
    runs = [r for r in published_runs() if r.layout is not None]
    nano = next(r for r in runs if r.model.name.startswith("nemotron-3-nano"))
    qwen = next(r for r in runs if r.model.name == "qwen3-30b-a3b" and r.row.get("release") == "26.02")
    assert not vendor_layouts.flags_published(nano)
    assert vendor_layouts.flags_published(qwen)
    told = dataclasses.replace(nano, row=dict(nano.row, recipe={"recompute": "none"}))
    assert vendor_layouts.flags_published(told)
    fsdp = next(r for r in runs if (r.row["release"], r.row["model"], r.row["gpu"]) == ("25.11", "Llama3-8B", "H100"))
    assert not vendor_layouts.flags_published(fsdp)


def test_a_scope_written_two_ways_or_an_overlap_that_cannot_run_is_no_differing_flag():
    """The --why list names only what the launch runs otherwise: row 7's published scope attn+moe_router+
    moe_preprocess is the scope '' stands for on a MoE model (graph_scope.default_scope), and TP comm overlap is off
    at TP 1 whatever the recipe sets (Megatron-Bridge comm_overlap.py:439-442)."""
    run = _run(lambda lay: lay.cuda_graph == "layer" and lay.cuda_graph_scope == "attn+moe_router+moe_preprocess"
               and lay.tp == 1)
    assert run.model.is_moe
    same = dataclasses.replace(run.layout, cuda_graph_scope="", tp_comm_overlap=not run.layout.tp_comm_overlap)
    assert vendor_layouts.differing_flags(run.model, run.layout, same) == []
    rows = [dict(run=run, rank=1, flagged=same)]
    assert vendor_layouts.flag_gains(rows) == {} and rows[0]["why"] == []
    narrower = dataclasses.replace(run.layout, cuda_graph_scope="moe_router+moe_preprocess")
    assert vendor_layouts.differing_flags(run.model, run.layout, narrower) == ["cuda_graph_scope"]
    eager = dataclasses.replace(run.layout, cuda_graph="none", cuda_graph_scope="")
    assert vendor_layouts.differing_flags(run.model, run.layout, eager) == ["cuda_graph"]


def test_tp_comm_overlap_differs_where_tp_runs_it():
    run = _run(lambda lay: lay.tp >= 2 and lay.sequence_parallel and lay.tp_comm_overlap)
    off = dataclasses.replace(run.layout, tp_comm_overlap=False)
    assert vendor_layouts.differing_flags(run.model, run.layout, off) == ["tp_comm_overlap"]


def test_steps_prints_published_best_and_the_runs_other_published_layouts_with_their_own_step_model():
    """--steps: the published layout (its measured figure beside), the planner's best (no measured figure), and the
    other published layouts of the same run, one per structure and release, a same-structure row left out; each
    column is evaluate_layouts of that layout, so its terms add up to its step and it is what predict_runs gives."""
    run = _run(lambda lay: lay.mbs == 1 and lay.ep > 1 and lay.cuda_graph == "none")

    def variant(tokens, rel, **change):
        return dataclasses.replace(run, row=dict(run.row, tokens_per_s_per_gpu=tokens, release=rel),
                                   layout=dataclasses.replace(run.layout, **change))

    faster, twin = variant(1e4, "99.01", mbs=2), variant(2e4, "99.02")
    best = dataclasses.replace(run.layout, mbs=2)
    columns = vendor_layouts.step_columns(dict(run=run, best=best), [run, faster, faster, twin])
    assert [c["name"] for c in columns] == [f"published {run.row['release']}", "planner's best", "published 99.01"]
    assert [c["measured"] for c in columns] == [float(run.row["tokens_per_s_per_gpu"]), None, 1e4]
    predicted = vendor_layouts.predict_runs([run, faster]).predicted_tokens
    assert [c["terms"]["tokens_per_s_per_gpu"] for c in columns[::2]] == [pytest.approx(p) for p in predicted]
    for c in columns:
        terms = c["terms"]
        exposed = sum(terms[k] for k in ("tp_exposed_s", "ep_exposed_s", "etp_exposed_s", "cp_exposed_s",
                                         "pp_exposed_s") + vendor_layouts.DP_EXPOSED)
        assert terms["step_s"] == pytest.approx(terms["compute_s"] + terms["bubble_s"] + terms["optimizer_s"]
                                                + terms["offload_exposed_s"] + exposed, rel=1e-6)


@pytest.mark.parametrize("text", ["x", "", "1,99999", "-5"])
def test_steps_refuses_a_row_the_step_model_does_not_cover_in_one_line(text, capsys):
    with pytest.raises(SystemExit) as exc:
        vendor_layouts.main(["--steps", text])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--steps {text}: allowed: comma-separated calibration row numbers" in err
