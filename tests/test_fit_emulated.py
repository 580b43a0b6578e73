"""Fit on `commbench emulate`'s two-tier fabric (netns, root): the scale-out rate comes back within 15%."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from commbench.costmodel.profile import fit_result_files

HAS_NETNS = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
RATE_BITS_PER_S = 400e6


@pytest.mark.netns
@pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2 (ip, tc) for network namespaces")
def test_fit_recovers_the_emulated_scale_out_rate(tmp_path):
    results = tmp_path / "emulated.jsonl"
    cmd = [sys.executable, "-m", "commbench", "emulate", "--racks", "2", "--ranks-per-rack", "2",
           "--scale-out-rate", "400mbit", "--netns-prefix", f"cbfit{os.getpid() % 10000}", "--",
           "bench", "all_reduce", "--backend", "gloo", "-b", "128K", "-e", "4M", "-n", "5", "-w", "1", "-c", "0",
           "-J", str(results)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=240)
    fabric, fits, notes = fit_result_files([str(results)])
    (fit,) = fits
    assert fit.key.num_domains == 2 and fit.tier == "scale_out"  # the rack topology came from the header
    (curve,) = [c for c in fabric.curves if c.tier == "scale_out" and c.min_bus_bytes == max(
        c2.min_bus_bytes for c2 in fabric.curves if c2.tier == "scale_out")]
    truth_gbps = RATE_BITS_PER_S / 8 / 1e9
    # the profile's scale-out rate is per rank; the emulator's 2 ranks per rack share one uplink
    per_rack = 2 * curve.busbw_gbps
    print(f"emulated uplink {truth_gbps:.4g} GB/s, fitted scale-out busbw {per_rack:.4g} GB/s per rack "
          f"({per_rack / truth_gbps - 1:+.1%}); held-out error {fit.heldout_median_rel_error:.1%}")
    assert per_rack == pytest.approx(truth_gbps, rel=0.15)
    assert any("emulated scale-out rate" in note for note in notes)
