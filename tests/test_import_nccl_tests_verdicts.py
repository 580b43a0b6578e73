"""Probe O-3: nccl-tests' own FAILED verdicts other than #wrong were dropped on import, so compare and report passed
the run: a nonzero #bitdiff cell (the bitwise repeatability check, -B: nccl-tests commit 3a3f1e8), its footer
'# Bitwise mismatches : N FAILED', and '# Avg bus bandwidth : X FAILED' (NCCL_TESTS_MIN_BW). The point (or, for a
footer, the run) is imported failed, said, and compare fails on it."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import Measurement


def _log(*, bitdiff_at=None, bitwise_footer=None, bw_footer="1.0", slow=1.0):
    column = " #bitdiff" if bitdiff_at is not None or bitwise_footer is not None else ""
    lines = ["# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 1024 maxBytes 8192 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
             "validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r} Group  0 Pid {1000 + r} on node1 device  {r} [0000:0{r}:00] NVIDIA H100 80GB HBM3"
              for r in range(2)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong" + column
              + "     time   algbw   busbw #wrong" + column, "#        (B)    (elements)                               (us)"]
    for k in range(10, 14):
        size, t = 2 ** k, (10 + 2 ** k / 5e4) * slow
        bits = (" 3" if size == bitdiff_at else " 0") if column else ""
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {t:8.2f} {size / t / 1e3:7.2f} "
                     f"{size / t / 1e3:7.2f}      0{bits} {t:8.2f} {size / t / 1e3:7.2f} {size / t / 1e3:7.2f}      0{bits}")
    lines += ["# Out of bounds values : 0 OK"]
    lines += [f"# Bitwise mismatches   : {bitwise_footer}"] if bitwise_footer else []
    lines += [f"# Avg bus bandwidth    : {bw_footer}", "#", "# Collective test concluded: all_reduce_perf"]
    return "\n".join(lines) + "\n"


def _points(text):
    return [r for r in parse_text(text, "all_reduce_perf.log").records if isinstance(r, Measurement)]


def test_a_nonzero_bitdiff_cell_is_a_failed_point_and_zero_is_kept():
    points = _points(_log(bitdiff_at=4096, bitwise_footer="6 FAILED"))
    failed = [(m.size_bytes, m.in_place) for m in points if m.status == "failed"]
    assert sorted(failed) == [(4096, False), (4096, True)]
    assert all("bitwise" in m.error and "#bitdiff" in m.error for m in points if m.status == "failed")
    assert all(m.metrics["nccl_tests_bitdiff"] == 0 for m in points if m.status == "ok") and len(points) == 8
    clean = _points(_log(bitdiff_at=None, bitwise_footer="0 OK"))
    assert all(m.status == "ok" for m in clean) and len(clean) == 8


def test_footers_that_fail_the_run_fail_every_point_of_it():
    placed_nowhere = _points(_log(bitwise_footer="6 FAILED"))   # the footer says FAILED, no row's #bitdiff does
    assert placed_nowhere and all(m.status == "failed" and "Bitwise mismatches" in m.error for m in placed_nowhere)
    low = _points(_log(bw_footer="1.0 FAILED"))
    assert low and all(m.status == "failed" and "Avg bus bandwidth" in m.error for m in low)
    assert all(m.status == "ok" for m in _points(_log(bw_footer="1.0 OK")) + _points(_log()))


def test_compare_fails_a_run_nccl_tests_failed_and_import_says_so(tmp_path):
    runner = CliRunner()
    outputs = {}
    for name, text in (("base", _log()), ("bit", _log(bitdiff_at=4096, bitwise_footer="6 FAILED", slow=1.01)),
                       ("bw", _log(bw_footer="1.0 FAILED", slow=1.01))):
        (tmp_path / f"{name}.log").write_text(text)
        done = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"{name}.log"), "-O", str(tmp_path / f"{name}.jsonl")])
        assert done.exit_code == 0, done.output
        outputs[name] = " ".join(done.output.split())
    assert "failed" in outputs["bit"] and "bitwise" in outputs["bit"], outputs["bit"]
    assert "Avg bus bandwidth" in outputs["bw"], outputs["bw"]
    for name in ("bit", "bw"):
        judged = runner.invoke(app, ["compare", str(tmp_path / "base.jsonl"), str(tmp_path / f"{name}.jsonl")])
        said = " ".join(judged.output.split())
        assert judged.exit_code == 1 and "newly failed" in said, said
