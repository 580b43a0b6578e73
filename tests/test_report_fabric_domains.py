"""report --fabric: the dashed (predicted) line of a curve is predicted on the scale-up domains its group crossed,
as `fit` reads them from the run's racks; a strided pair across two racks was predicted inside one NVLink domain."""

from __future__ import annotations

import numpy as np

from commbench.cli.report import fabric_predictor
from commbench.costmodel import collective_time_s, load_preset
from commbench.results.records import Measurement, RunHeader


def _header() -> RunHeader:
    return RunHeader(run_id="r", started_at="t", argv=[], commbench_version="0", python_version="3",
                     torch_version=None, nccl_version=None, cuda_version=None, cupy_version=None, backend="nccl",
                     world_size=16, hostnames=["a"] * 8 + ["b"] * 8, devices=["h100"] * 16, nccl_env={},
                     launcher="local", topology={"num_racks": 2, "ranks_per_rack": 8})


def _row(layout: str) -> Measurement:
    return Measurement(run_id="r", collective="all_reduce", backend="nccl", size_bytes=1 << 20, count=1 << 18,
                       dtype="float32", op="sum", in_place=True, world_size=16, group_size=2, group_layout=layout,
                       num_groups=8, iters=10, warmup_iters=2, time_us_median=50.0)


def test_a_strided_pair_across_racks_is_predicted_across_them(tmp_path):
    fabric = load_preset("h100-hgx", num_gpus=16)
    path = tmp_path / "fabric.json"
    path.write_text(fabric.to_json())
    sizes = np.array([1 << 20, 1 << 26], dtype=float)
    predict = fabric_predictor(str(path), {})
    strided = predict("all_reduce", sizes, 2, _row("strided"), _header())
    contiguous = predict("all_reduce", sizes, 2, _row("contiguous"), _header())
    assert np.allclose(strided, collective_time_s(fabric, "all_reduce", sizes, 2, 2))
    assert np.allclose(contiguous, collective_time_s(fabric, "all_reduce", sizes, 2, 1))
    assert (strided > contiguous).all()   # across the NICs, not NVLink


def test_a_curve_fitted_on_another_backend_draws_no_predicted_line(tmp_path):
    """report --fabric of a profile fitted on gloo (CPU ranks) drew a dashed 'predicted: nccl float32 n=2' line
    under an NCCL run, 60x below it: gloo's curve labelled with the NCCL curve's name. Now that curve gets no
    predicted line and a note naming the backends the profile describes; an NCCL run on a preset still does."""
    import dataclasses

    from commbench.costmodel.fabric import Fabric
    from commbench.costmodel.profile import fit_result_files
    from commbench.results.records import JsonlWriter

    results = tmp_path / "gloo.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(dataclasses.replace(_header(), backend="gloo", world_size=2, hostnames=["a", "a"],
                                         devices=["cpu"] * 2, topology=None))
        for s in (1 << 10, 1 << 14, 1 << 18, 1 << 22):
            writer.write(dataclasses.replace(_row("world"), backend="gloo", world_size=2, num_groups=1, size_bytes=s,
                                             count=s // 4, time_us_median=300.0 + s / 1e3))
    fitted, _, _ = fit_result_files([str(results)])
    assert isinstance(fitted, Fabric) and fitted.backends()["all_reduce"] == {"gloo"}
    path = tmp_path / "gloo.json"
    path.write_text(fitted.to_json())
    unpredicted: dict[str, str] = {}
    predict = fabric_predictor(str(path), unpredicted)
    sizes = np.array([1 << 20], dtype=float)
    nccl_row = dataclasses.replace(_row("world"), world_size=2, num_groups=1)
    assert np.isnan(predict("all_reduce", sizes, 2, nccl_row, None)).all()
    assert unpredicted == {"all_reduce on nccl": f"{path}'s all_reduce curves describe gloo, not nccl"}
    assert np.isfinite(predict("all_reduce", sizes, 2, dataclasses.replace(nccl_row, backend="gloo"), None)).all()
    preset = tmp_path / "h100.json"
    preset.write_text(load_preset("h100-hgx", num_gpus=16).to_json())
    assert np.isfinite(fabric_predictor(str(preset), {})("all_reduce", sizes, 2,
                                                          dataclasses.replace(nccl_row, backend="cupy-nccl"), None)).all()


def test_readme_names_the_curves_without_a_predicted_line(tmp_path):
    """README.md said 'dashed lines are predicted from fab.json' where no curve had one (a group larger than the
    profile's, another backend's curve): only the terminal said 'no predicted line for ...'. Now README says it too."""
    import dataclasses

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.results.records import JsonlWriter

    results = tmp_path / "nccl.jsonl"
    with JsonlWriter(results) as writer:
        writer.write(_header())
        for s in (1 << 20, 1 << 22):
            writer.write(dataclasses.replace(_row("world"), group_size=16, num_groups=1, size_bytes=s, count=s // 4,
                                             algbw_gbps=s / 50.0 / 1e3, busbw_gbps=s / 50.0 / 1e3 * 1.875,
                                             num_wrong=0))
    fabric = tmp_path / "h100.json"
    fabric.write_text(load_preset("h100-hgx", num_gpus=8).to_json())
    result = CliRunner().invoke(app, ["report", str(results), "-O", str(tmp_path / "rep"), "--fabric", str(fabric)])
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "rep" / "README.md").read_text()
    assert "## Not predicted" in readme
    assert "- all_reduce on 16 ranks across 2 domains: group_size=16 is invalid" in readme
