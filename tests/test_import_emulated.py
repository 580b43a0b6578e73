"""commbench's own --format nccl-tests text of a run on `commbench emulate`'s fabric, imported back: the header said
`"emulated": null, "topology": null` (the importer read the intro line for the backend only), so compare judged the
emulated run against a real one (REGRESSED x32, 'emulated' nowhere), fit merged emulated and real points into one
curve and called the 100 Mbit/s link a scale-up curve, and report headed it '(measured)' (found from outside, probe
AM F1). Now the intro line's EMULATED fabric and the '# topology:' line come back into the header as the JSONL has
them, and compare, fit and report refuse or label the import as they do the JSONL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import RunHeader

REPO = Path(__file__).resolve().parents[1]
EMULATED = {"emulated": True, "tool": "commbench emulate", "num_racks": 2, "ranks_per_rack": 1,
            "scale_out_rate_bits_per_s": 1e8,
            "scale_up": "loopback inside one network namespace per rack (no rate limit)",
            "scale_out": "veth per rack with a tbf rate limit (bandwidth only, no added latency)"}

# the text `commbench emulate --racks 2 --ranks-per-rack 1 --scale-out-rate 100mbit -- bench all_reduce -b 1M -e 2M
# -n 3 -w 1 --format nccl-tests` printed before this fix (emulate's own lines around it, as a `| tee` keeps them)
OLD_TEXT = """\
emulated fabric: 2 rack(s) x 1 rank(s); scale-up = loopback per namespace, scale-out = 100mbit tbf per rack uplink (EMULATED, bandwidth only)
# topology: 2 rack(s) x 1 rank(s) per scale-up domain (from COMMBENCH_RANKS_PER_RACK (commbench emulate)): 0;1
# commbench 0.1.0: all_reduce on gloo, 2 rank(s) on 1 host(s) (vm), devices: cpu (x86_64); EMULATED fabric: 2 racks joined at 0.1 Gbit/s
# nccl-tests version commbench-0.1.0 nccl-headers=0 nccl-library=0
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 1 iters: 3 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu (x86_64)
#  Rank  1 Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu (x86_64)
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1  85849.9    0.01    0.01       0  86859.7    0.01    0.01       0
     2097152        524288     float     sum      -1   189018    0.01    0.01       0   191084    0.01    0.01       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.011589
#
# Collective test concluded: all_reduce_perf
rack 0 uplink (measured veth counters): sent 38,185,150 B, received 38,167,852 B
rack 1 uplink (measured veth counters): sent 38,167,852 B, received 38,185,150 B
"""


def _header(text: str) -> RunHeader:
    return next(r for r in parse_text(text, "emu.txt").records if isinstance(r, RunHeader))


def _real(text: str) -> str:
    """The same sweep on a real fabric (loopback's times): no emulate lines, no EMULATED intro, no topology line."""
    for emulated, real in (("85849.9", "2702.1"), ("86859.7", "2735.2"), ("189018", "5893.0"), ("191084", "5920.4")):
        text = text.replace(emulated, real)
    return "\n".join(line.split("; EMULATED")[0] for line in text.splitlines()
                     if not line.startswith(("emulated fabric", "rack ", "# topology"))) + "\n"


def test_an_old_emulated_text_reads_back_emulated_with_its_racks():
    header = _header(OLD_TEXT)
    assert header.emulated is not None, "the intro line's EMULATED fabric was dropped"
    assert header.emulated["num_racks"] == 2 and header.emulated["ranks_per_rack"] == 1
    assert header.emulated["scale_out_rate_bits_per_s"] == 1e8
    assert header.topology is not None and header.topology["racks"] == [[0], [1]]
    assert header.topology["source"] == "COMMBENCH_RANKS_PER_RACK (commbench emulate)"
    # emulate's own lines around the text are known, not 'not an nccl-tests line'
    assert not parse_text(OLD_TEXT, "emu.txt").problems
    real = _header(_real(OLD_TEXT))
    assert real.emulated is None and real.topology is None


def test_compare_and_fit_refuse_an_imported_emulated_text_against_a_real_one(tmp_path):
    (tmp_path / "emu.txt").write_text(OLD_TEXT)
    (tmp_path / "real.txt").write_text(_real(OLD_TEXT))
    runner = CliRunner()
    for name in ("emu", "real"):
        done = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.txt"), "-O",
                                   str(tmp_path / f"{name}.jsonl")])
        assert done.exit_code == 0, done.output
    compared = runner.invoke(app, ["compare", str(tmp_path / "real.jsonl"), str(tmp_path / "emu.jsonl")])
    assert compared.exit_code == 2 and "fabrics" in compared.output and "EMULATED fabric" in compared.output, \
        compared.output
    fitted = runner.invoke(app, ["fit", str(tmp_path / "real.jsonl"), str(tmp_path / "emu.jsonl"), "-O",
                                 str(tmp_path / "fab.json")])
    assert fitted.exit_code == 2 and "EMULATED fabric" in fitted.output, fitted.output
    reported = runner.invoke(app, ["report", str(tmp_path / "emu.jsonl"), "-O", str(tmp_path / "rep")])
    assert reported.exit_code == 0, reported.output
    assert "EMULATED" in (tmp_path / "rep" / "README.md").read_text()


def test_the_text_of_an_emulated_bench_imports_to_the_jsonl_header_fabric(tmp_path):
    """Round trip: the header the import builds from the text carries the JSONL header's emulated fabric and racks,
    so compare sees the same setup (and the same run, with --allow-same-run)."""
    env = {**os.environ, "COMMBENCH_EMULATED": json.dumps(EMULATED), "COMMBENCH_RANKS_PER_RACK": "1",
           "PYTHONPATH": str(REPO)}
    jsonl, text = tmp_path / "emu.jsonl", tmp_path / "emu.txt"
    run = subprocess.run([sys.executable, "-m", "commbench", "bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e",
                          "4K", "-n", "2", "-w", "0", "--backend", "gloo", "--format", "nccl-tests", "-O", str(jsonl)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    text.write_text(run.stdout)
    original = next(json.loads(line) for line in jsonl.read_text().splitlines())
    imported = _header(run.stdout)
    assert imported.emulated == original["emulated"]
    assert imported.topology == original["topology"]
    runner = CliRunner()
    done = runner.invoke(app, ["import", "nccl-tests", str(text), "-O", str(tmp_path / "imp.jsonl")])
    assert done.exit_code == 0, done.output
    compared = runner.invoke(app, ["compare", "--allow-same-run", str(jsonl), str(tmp_path / "imp.jsonl")])
    assert "fabrics" not in compared.output, compared.output
