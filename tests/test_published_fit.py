"""Every published layout ran on its hardware, so the planner must predict that it fits in memory, each
modelled with its release's Megatron-Bridge recipe (issue 24): a published run predicted not to fit is a
memory-model error the search would act on (it would never propose that layout)."""

import json
from pathlib import Path

import numpy as np

from commbench.planner.calibrate.published import predict_runs, published_runs

HELD_OUT = Path(__file__).parent.parent / "benchmarks" / "data" / "heldout-gb300-runs.json"


def _not_fitting(runs) -> list[str]:
    p = predict_runs(runs)
    return [f"{r.index} {r.label}: {p.mem_total_bytes[j] / 1e9:.1f} GB > {p.mem_capacity_bytes[j] / 1e9:.0f} GB"
            for j, r in enumerate(p.runs) if not p.fits[j]]


# Published layouts predicted over HBM, each with its reason: none, against the HBM CUDA exposes (hardware.toml
# hbm_cuda_gib). Nemotron-3-Nano on 16 H100 in fp8 (flags assumed, selective recompute standing in for its recipes'
# whole-MoE-block recompute) was 0.5 GB over the 80e9 B it was given; an H100 exposes 79.11 GiB (84.9e9 B).
KNOWN_OVER = ()


def test_every_published_calibration_layout_fits():
    runs = published_runs()
    assert sum(r.layout is not None for r in runs) >= 90   # the check covers the calibration set
    assert not [r.index for r in runs if "offload" in r.skip_reason]   # a recipe's offload never drops a row
    assert [row.split(":")[0] for row in _not_fitting(runs)] == list(KNOWN_OVER)


def test_every_held_out_gb300_layout_fits():
    runs = published_runs(tuple(json.loads(HELD_OUT.read_text())))
    assert all(r.layout is not None for r in runs) and len(runs) >= 9
    assert _not_fitting(runs) == []


def test_recipe_offload_and_fp8_weights_are_what_makes_the_fsdp_rows_fit():
    """The Llama3-70B GB200 FSDP rows fit because their recipe offloads 40 layers' activations to host
    (cpu_offloading_num_layers=40) and keeps fp8 weights: without the offload they would not."""
    import dataclasses
    runs = [r for r in published_runs() if r.layout is not None and r.layout.fsdp
            and r.row["model"].startswith("Llama3-70B") and r.row["gpu"] == "GB200"]
    assert runs and all(r.layout.cpu_offload_layers == 40 for r in runs)
    bare = [dataclasses.replace(r, layout=dataclasses.replace(r.layout, cpu_offload_layers=0)) for r in runs]
    assert np.all(predict_runs(runs).fits) and not np.any(predict_runs(bare).fits)


def test_a_self_contradicting_row_takes_its_release_recipe_mbs_and_says_so():
    runs = published_runs()
    noted = [r for r in runs if "GA=" in r.layout_note]
    assert noted, "rows whose GA contradicts gbs / (mbs x dp) are modelled with the recipe's mbs"
    # the other notes: a release older than the recipe table (the 24.07 NeMo rows) took the default flags, the
    # row's recipe flags are assumed (flags_assumed), or a later commit's recipe models it; none changes the mbs
    assert all(("older than the recipe table" in r.layout_note or "recipe flags assumed" in r.layout_note
                or "modelled with Megatron-Bridge commit" in r.layout_note
                or "contradicts its release" in r.layout_note)
               and r.layout.mbs == int(r.row["mbs"]) for r in runs if r.layout_note and r not in noted)
    for r in noted:
        assert r.layout.mbs != int(r.row["mbs"]) and "GA=" in r.layout_note and "recipe" in r.layout_note
        assert r.layout.gbs % (r.layout.mbs * r.layout.dp) == 0


def test_a_ga_contradiction_note_says_whether_the_recipes_mbs_resolves_it():
    """The 25.11 gpt-oss-120b H100 row (TP1 PP4 on 64 GPUs: dp 16, gbs 512) publishes mbs 4 and GA=2: 4 x 16 x 2 is
    128, not 512. Its release recipe (workload_base_configs.py@7af9601 GPT_OSS_120B_H100_BF16_BASE_CONFIG) runs mbs 1,
    which gives GA 32, not 2 either (GA=2 would need mbs 16): the note says so, not that the recipe reconciles the
    row. The 25.09 Llama3-70B GB200 MXFP8 row's recipe mbs 1 does give its published GA=16."""
    runs = {r.index: r for r in published_runs()}
    gpt = next(r for r in runs.values() if r.row["release"] == "25.11" and r.row["gpu"] == "H100"
               and r.row["model"] == "gpt-oss-120b")
    assert gpt.layout.mbs == 1 and "GA=2" in gpt.layout_note
    assert "gives GA 32, not GA=2 either (GA=2 would need mbs 16)" in gpt.layout_note
    assert "cannot both be right" in gpt.layout_note
    llama = next(r for r in runs.values() if r.row["release"] == "25.09" and r.row["gpu"] == "GB200"
                 and r.row["model"] == "Llama3-70B" and "GA=" in r.layout_note)
    assert llama.layout.mbs == 1 and "gives GA=16 as published" in llama.layout_note


def test_a_row_whose_release_contradicts_its_ep_is_modelled_at_the_recipes():
    """The 25.11 table publishes gpt-oss-120b on 64 B200 (BF16, mbs 4, gbs 512) at EP 8 and 8,213 tokens/s/GPU. Its
    release recipe (workload_base_configs.py@7af9601 GPT_OSS_120B_B200_BF16_BASE_CONFIG) has every other size of the
    row and EP 64; 26.02 publishes the EP 64 run at 8,047 (2% off), 26.02.01 the EP 8 one at 13,722 (+67%): the
    throughput is the EP 64 run's, so EP 64 is modelled, its flags the recipe's own, and the note says why. The rule
    catches no other row of the calibration, held-out GB300 (25.11, 26.02, 26.02.01) or newer-release tables; the
    published row is kept."""
    from commbench.data.reference import calibration_runs
    from commbench.planner.calibrate.published import flags_assumed, recipe_size_if_release_contradicts
    root = Path(__file__).parent.parent / "benchmarks" / "data"
    for rows in (None, json.loads(HELD_OUT.read_text()), json.loads((root / "newer-release-runs.json").read_text()),
                 json.loads((root / "heldout-gb300-2602-runs.json").read_text())):
        caught = [r for r in published_runs(None if rows is None else tuple(rows))
                  if "contradicts its release" in r.layout_note]
        assert [r.label for r in caught] == (["gpt-oss-120b 64x B200 BF16 25.11"] if rows is None else [])
    run = next(r for r in published_runs() if "contradicts its release" in r.layout_note)
    assert (run.layout.ep, run.row["ep"], run.modelled_row["ep"]) == (64, 8, 64)
    assert "GPT_OSS_120B_B200_BF16_BASE_CONFIG" in run.layout_note and "@7af9601" in run.layout_note
    assert "26.02 EP64 gbs 1280: 8,047" in run.layout_note and "26.02.01 EP8 gbs 1280: 13,722" in run.layout_note
    assert flags_assumed(run.modelled_row, run.preset, run.model.name) == ""
    assert "recipe flags assumed" in flags_assumed(run.row, run.preset, run.model.name)
    table = tuple(calibration_runs())
    row, name, preset = table[run.index], run.model.name, run.preset
    assert recipe_size_if_release_contradicts(row, preset, name, table)[:2] == ("ep", 64)
    # no evidence: the EP 64 run beyond 5% of the row's, or only an older release's
    evidence = next(r for r in table if r is not row and r["model"] == row["model"] and r["gpu"] == row["gpu"]
                    and r["ep"] == 64 and r["seq_len"] == row["seq_len"] and r["release"] == "26.02")
    far = tuple(dict(r, tokens_per_s_per_gpu=row["tokens_per_s_per_gpu"] * 1.06) if r is evidence else r for r in table)
    older = tuple(dict(r, release="25.09") if r is evidence else r for r in table)
    # the EP 8 run published since at the row's throughput: the row's column is not contradicted
    same = tuple(dict(r, tokens_per_s_per_gpu=row["tokens_per_s_per_gpu"]) if r.get("release") == "26.02.01" and
                 r["model"] == row["model"] and r["gpu"] == row["gpu"] else r for r in table)
    for rows in (far, older, same):
        assert recipe_size_if_release_contradicts(row, preset, name, rows) is None


def test_recipe_flags_are_facts_only_where_the_recipe_is_the_runs_configuration():
    """One rule for a row's recipe flags: they are the run's own only where its release's recipe has the row's sizes
    (num_gpus, tp, pp, vp, ep, the modelled mbs, gbs) and Megatron-FSDP. Otherwise another configuration gave them
    (the nearest recipe of the release, or the default recipe where none is read): the row's layout_note says so and
    names the recipe and what differs, and vendor_layouts counts it apart. The flags themselves are the same either
    way (no prediction moves)."""
    from commbench.planner.calibrate.published import flags_assumed
    runs = [r for r in published_runs() if r.layout is not None]
    assumed = [r for r in runs if flags_assumed(r.modelled_row, r.preset, r.model.name)]
    # 18 whose release has no recipe of their sizes, 3 Nemotron-3-Nano, 2 from 24.07 (the 26.02.01 gpt-oss B300 /
    # B200 rows have the sizes of a later commit's recipe: tests/test_recipe_scripts.py; the 25.11 gpt-oss B200 row is
    # modelled at its recipe's EP 64: test_a_row_whose_release_contradicts_its_ep_is_modelled_at_the_recipes)
    assert len(assumed) == 23
    for r in assumed:   # said where the row is printed (the 24.07 rows' stand-in note already says default flags)
        assert "recipe flags assumed" in r.layout_note or "the default recipe flags" in r.layout_note, r.label
    facts = [r for r in runs if r not in assumed]
    assert not any("assumed" in r.layout_note for r in facts)

    def note(release, model, gpu):
        return next(r.layout_note for r in runs if (r.row["release"], r.row["model"], r.row["gpu"]) ==
                    (release, model, gpu))
    # 25.11 Llama3-8B H100 FP8-CS: the table's FSDP=8; LLAMA3_8B_H100_FP8_CS_BASE_CONFIG (v0.2.0 workload_base_configs.py
    # lines 229-233: recompute_num_layers=5, no use_megatron_fsdp) does not run Megatron-FSDP
    assert "LLAMA3_8B_H100_FP8_CS_BASE_CONFIG" in note("25.11", "Llama3-8B", "H100")
    assert "Megatron-FSDP off vs the row's FSDP=8" in note("25.11", "Llama3-8B", "H100")
    # 25.11 Llama3.1-405B GB200: 256 GPUs at TP4 PP16; the release's only recipe is 128 GPUs, TP2, FSDP
    assert "num_gpus 128 vs the row's 256" in note("25.11", "Llama3.1-405B", "GB200")
    # a row with its own recipe fields states its flags
    told = dict(assumed[0].row, recipe={"recompute": "none"})
    assert flags_assumed(told, assumed[0].preset, assumed[0].model.name) == ""
