"""bench under `commbench emulate`: the table was titled 'all_reduce (measured, 2 ranks)' and closed with
'# Avg bus bandwidth : ... (GB/s, measured)' like a real network's, only the intro line above saying EMULATED;
now the title and the closing line say the fabric was emulated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

EMULATED = {"emulated": True, "tool": "commbench emulate", "num_racks": 2, "ranks_per_rack": 1,
            "scale_out_rate_bits_per_s": 1e9}


def test_bench_table_title_and_footer_say_emulated(tmp_path):
    env = {**os.environ, "COMMBENCH_EMULATED": json.dumps(EMULATED), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "1K",
                             "-e", "1K", "-n", "2", "-w", "0", "--backend", "gloo", "-O", str(tmp_path / "e.jsonl")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    title = next(line for line in lines if line.startswith("all_reduce ("))
    assert "EMULATED" in title, title
    footer = next(line for line in lines if "Avg bus bandwidth" in line)
    assert "EMULATED" in footer, footer


def test_sweep_lines_say_emulated(tmp_path):
    """sweep under `commbench emulate` printed '[1/33] tp-all-reduce float32 1 KiB: 5973.0 µs (median, measured)'
    like a real network's; now its title and each point's line say the fabric was emulated."""
    sweep = tmp_path / "tiny.toml"
    sweep.write_text('[sweep]\nname = "tiny"\nbackend = "gloo"\nnproc = 2\n[defaults]\niters = 2\nwarmup_iters = 0\n'
                     '[[run]]\nname = "ar"\ncollective = "all_reduce"\nsizes = ["1K"]\n')
    env = {**os.environ, "COMMBENCH_EMULATED": json.dumps(EMULATED), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "commbench", "sweep", str(sweep), "-O", str(tmp_path / "s.jsonl")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "EMULATED" in next(line for line in lines if line.startswith("sweep tiny"))
    point = next(line for line in lines if line.startswith("[1/1]"))
    assert "measured on an EMULATED fabric" in point, point
