"""verify-plan measures what the framework runs (probe P7): at the plan's rank count the PP send/recv was measured on
consecutive ranks ([0,1] [2,3]: the TP groups) where Megatron-Core's and TorchTitan's PP groups are [0,4] [1,5] ...
(PP outermost); every pipeline stage was sized a Megatron bucket, where stages after the first reduce-scatter their
whole buffer in one call (distributed_data_parallel.py core_v0.16.1:96-102); a TorchTitan plan with PP measured a
Megatron bf16 bucket where its FSDP2 reduce-scatters each block in fp32; a CP plan said nothing of its CP exchange."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.emit.plan import load_plan
from commbench.planner.layout.placement import place
from commbench.planner.models.counts import param_counts, step_vocab
from commbench.workflows.verify import plan_context, plan_items


def _doc(tmp_path, layout: str, *extra: str, model: str = "gpt-oss-20b", gpus: int = 8) -> dict:
    folder = tmp_path / "plan"
    planned = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus),
                                       "--precision", "bf16", "--layout", layout, "--allow-unfit", *extra,
                                       "-O", str(folder)])
    assert planned.exit_code == 0, planned.output
    return load_plan(str(folder / "plan.json"))


def test_pp_send_recv_is_measured_on_the_frameworks_adjacent_stages(tmp_path):
    doc = _doc(tmp_path, "tp=2,pp=2,vp=1,ep=4,etp=1,dispatcher=alltoall,mbs=1,gbs=64")
    (pp,) = [i for i in plan_items(doc, 8, 1 << 20)[0] if i.kind == "pp"]
    # Megatron-Core's RankGenerator order tp-cp-ep-dp-pp: PP groups stride over a stage's 4 ranks
    assert pp.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    ctx = plan_context(doc)
    assert {tuple(g) for g in place(ctx.layout, 8, 8).groups["pp"]} == set(pp.groups)


def test_pp4_pairs_stages_0_1_and_2_3_of_each_pp_group(tmp_path):
    doc = _doc(tmp_path, "tp=1,pp=4,vp=1,ep=2,mbs=1,gbs=64")
    (pp,) = [i for i in plan_items(doc, 8, 1 << 20)[0] if i.kind == "pp"]
    assert pp.groups == ((0, 2), (1, 3), (4, 6), (5, 7))


def test_megatron_buckets_the_first_stage_and_sends_later_stages_whole(tmp_path):
    doc = _doc(tmp_path, "tp=2,pp=2,vp=1,ep=4,etp=1,dispatcher=alltoall,mbs=1,gbs=64")
    ctx = plan_context(doc)
    dense = [i for i in plan_items(doc, 8, 1 << 20)[0] if i.kind == "dp_cp"]
    pc = param_counts(ctx.model, vocab=step_vocab(ctx.model, 2, ctx.framework))
    assert [(i.label, i.plan_size_bytes) for i in dense] == [
        ("DP grad bucket (first stage) reduce-scatter", 40_000_000 * 2),
        ("DP grad buffer (stages after the first: the whole buffer in one call) reduce-scatter",
         int(round(pc.non_expert / 4 * 2)))]


def test_torchtitan_with_pp_measures_an_fsdp2_block_in_fp32_and_says_so(tmp_path):
    doc = _doc(tmp_path, "tp=2,pp=2,vp=1,ep=2,mbs=1,gbs=64", "--framework", "torchtitan")
    ctx = plan_context(doc)
    items, flags = plan_items(doc, 8, 1 << 20)
    dense = next(i for i in items if i.kind == "dp_cp")
    pc = param_counts(ctx.model, vocab=step_vocab(ctx.model, 2, ctx.framework))
    assert dense.collective == "reduce_scatter" and "fp32" in dense.label
    assert dense.plan_size_bytes == int(round((pc.non_expert - pc.embeddings) / 2 / ctx.model.num_layers * 4))
    assert any(f.startswith("TorchTitan FSDP2: measured one mean TransformerBlock") and "not measured" in f
               for f in flags)


def test_a_cp_plan_says_its_cp_exchange_is_not_measured(tmp_path):
    doc = _doc(tmp_path, "tp=2,cp=2,pp=1,vp=1,mbs=1,gbs=64", model="llama3-8b")
    _, flags = plan_items(doc, 8, 1 << 20)
    assert any(f.startswith("CP: not measured") for f in flags)


def test_an_odd_pp_says_its_pairs_are_not_the_plans(tmp_path):
    doc = _doc(tmp_path, "tp=1,pp=3,vp=1,ep=2,etp=1,mbs=1,gbs=24", gpus=6)
    items, flags = plan_items(doc, 6, 1 << 20)
    (pp,) = [i for i in items if i.kind == "pp"]
    assert pp.groups == ((0, 1), (2, 3), (4, 5))   # every rank in one pair: pp=3 has no perfect pairing of stages
    assert any(f.startswith("PP send/recv: pp=3 is odd") and "[0, 2]" in f for f in flags)


def test_vp_chunks_after_the_first_send_their_chunk_whole(tmp_path):
    doc = _doc(tmp_path, "tp=2,pp=2,vp=2,ep=4,etp=1,mbs=1,gbs=64")
    ctx = plan_context(doc)
    pc = param_counts(ctx.model, vocab=step_vocab(ctx.model, 2, ctx.framework))
    dense = [i for i in plan_items(doc, 8, 1 << 20)[0] if i.kind == "dp_cp"]
    assert [i.plan_size_bytes for i in dense] == [40_000_000 * 2, int(round(pc.non_expert / 4 / 2 * 2))]
    assert "first chunk" in dense[0].label and "chunks after the first" in dense[1].label
