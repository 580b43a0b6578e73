"""`nccl-tuner --fabric` on a profile whose all_reduce curve was measured (fit --system on nccl-tests' default runs:
the curve is NCCL's own choice, algorithm "fitted") wrote no allreduce rule and said nothing of it, though the user
measured exactly that collective (probe CG F5): neither on NCCL's per-pair structure (uses_nccl_model is false once
a curve is fitted) nor on the per-algorithm curves (COST_MODEL_COMBOS), predicted_points skipped it. Now a note (and
so a comment of the file) names each collective the profile holds with no rule and why."""

from __future__ import annotations

from commbench.costmodel import load_preset
from commbench.costmodel.fit_records import fit_all
from commbench.costmodel.profile import fabric_from_fits
from commbench.workflows.nccl_tuner import from_fabric
from tests.test_fit import SIZES, _record


def test_a_collective_with_a_fitted_curve_and_no_rule_is_named(tmp_path):
    fits, _ = fit_all([_record("all_reduce", s, 20.0 + s / 3e5, 8, world=8) for s in SIZES], {})
    fabric = fabric_from_fits(fits, base=load_preset("h100-hgx", num_gpus=8), name="h100-hgx+fitted",
                              source="fitted:nt.jsonl", num_gpus=8, notes=[])
    result = from_fabric(fabric, ranks=8, nodes=1, sizes_bytes=[2 ** k for k in range(10, 31)])
    assert "allreduce" not in {c.collective for c in result.cells}
    said = [n for n in result.notes if n.startswith("allreduce: no rule")]
    assert len(said) == 1 and "measured curve" in said[0] and "NCCL decides" in said[0], result.notes
    # the bare preset predicts every collective: no such note
    bare = from_fabric(load_preset("h100-hgx", num_gpus=8), ranks=8, nodes=1, sizes_bytes=[2 ** k for k in range(10, 31)])
    assert "allreduce" in {c.collective for c in bare.cells}
    assert not any(": no rule" in n for n in bare.notes), bare.notes
