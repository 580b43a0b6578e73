"""Which NCCL a run's header names (the library measured: CuPy's own for --backend cupy-nccl), and what
`commbench nccl-tuner` writes when no header names one. GPU-free: stand-in backends, results built here."""

from __future__ import annotations

import dataclasses
import types

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results import provenance
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _write_runs


def _backend(name: str, **extra):
    return types.SimpleNamespace(name=name, rank=0, world_size=1, local_rank=0, device="cpu", **extra)


def test_a_cupy_nccl_run_names_cupys_nccl_not_torchs():
    """CuPy loads its own NCCL (cupy.cuda.nccl.get_version(), kept by CupyNcclBackend as nccl_version), which may
    differ from the one torch was built with: the header named torch's for every backend."""
    assert provenance.measured_nccl_version(_backend("cupy-nccl", nccl_version=22805), "2.27.3") == "2.28.5"
    assert provenance.measured_nccl_version(_backend("cupy-nccl", nccl_version=2804), None) == "2.8.4"
    assert provenance.measured_nccl_version(_backend("cupy-nccl"), "2.27.3") is None  # unknown, never torch's
    assert provenance.measured_nccl_version(_backend("nccl"), "2.27.3") == "2.27.3"


def test_collect_header_records_the_measured_librarys_version(monkeypatch):
    monkeypatch.setattr(provenance, "torch_versions", lambda: {"torch": "2.9", "cuda": "12.8", "nccl": "2.27.3"})
    monkeypatch.setattr(provenance, "gather_strings", lambda backend, value: [value])
    cupy = provenance.collect_header(_backend("cupy-nccl", nccl_version=22805), run_id="c", argv=[],
                                     launcher="torchrun")
    torch = provenance.collect_header(_backend("nccl"), run_id="t", argv=[], launcher="torchrun")
    assert (cupy.nccl_version, torch.nccl_version) == ("2.28.5", "2.27.3")


def test_a_config_without_a_known_nccl_version_says_so(tmp_path):
    """No header names an NCCL version: no `requires: nccl` line can be written, so commbench's plugin applies the
    rules under any NCCL; the file and the command say so (before: silence)."""
    runs = [(dataclasses.replace(_header(run_id, ["h"] * 4), nccl_version=None), combo, time_us)
            for run_id, combo, time_us in (("d", DEFAULT, 40.0), ("r", RING_LL, 10.0))]
    conf = tmp_path / "c.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", _write_runs(tmp_path, "v.jsonl", runs), "-O", str(conf)])
    assert result.exit_code == 0, result.output
    text = conf.read_text()
    assert "# requires: nccl" not in text
    assert "# NCCL version unknown" in text and "NCCL version unknown" in result.output
    known = [(_header("d", ["h"] * 4), DEFAULT, 40.0), (_header("r", ["h"] * 4), RING_LL, 10.0)]
    result = CliRunner().invoke(app, ["nccl-tuner", _write_runs(tmp_path, "k.jsonl", known), "-O", str(conf)])
    assert result.exit_code == 0 and "NCCL version unknown" not in conf.read_text() + result.output
