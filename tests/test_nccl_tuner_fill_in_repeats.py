"""`nccl-tuner --for example-plugin` judges its FILL-IN combinations by the rule the winner step uses
(docs/nccl-tuner.md section 2.1: "a point measured more than once counts at its least favourable to a rule: NCCL's
default at its fastest, a combination at its slowest (whatever the file order)"). The fill-in step took the last
record of a point measured twice in one run (probe AG: ring/simple/16 at 130 us, then 60 us, NCCL's default at
100 us): slow copy first wrote a FILL-IN "1.66x ... within the noise of NCCL's default" and NCCL's example plugin
forced a pair one of the file's own measurements shows 1.3x slower than no config; the other order was refused."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _record, reproduced_plugin_load

SIZES = (64 << 10, 128 << 10, 256 << 10, 512 << 10)


def _invoke(tmp_path, records, *options):
    """nccl-tuner on one run's records (header "a", 4 ranks on one host): (exit code, one-line output, file text)."""
    index = len(list(tmp_path.glob("r*.jsonl")))
    path, conf = tmp_path / f"r{index}.jsonl", tmp_path / f"c{index}.conf"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for record in records:
            writer.write(record)
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf), *options], env={"COLUMNS": "300"})
    return result.exit_code, " ".join(result.output.split()), conf.read_text() if conf.exists() else ""


def _copy(ring_us):
    return [r for size in SIZES for r in (_record("a", size, DEFAULT, 100.0), _record("a", size, RING_LL, ring_us))]


def test_a_fill_in_measured_twice_is_judged_at_its_slowest_whatever_the_file_order(tmp_path):
    """One run id, every point recorded twice: ring/ll/16 at 130 us in one copy and 60 us in the other, NCCL's
    default at 100 us in both. commbench's plugin keeps NCCL's default (ring at its slowest: 0.77x); NCCL's example
    plugin cannot keep it, and its fill-in is ring/ll/16 at 130 us, 1.3x slower: refused in both orders."""
    for first, second in ((130.0, 60.0), (60.0, 130.0)):
        code, said, text = _invoke(tmp_path, _copy(first) + _copy(second), "--for", "example-plugin")
        assert code == 2, (first, said, text)
        assert "no combination beat NCCL's default" in said and "(ring/ll/16, 130.0 us) is 1.30x slower" in said, said
        code, said, text = _invoke(tmp_path, _copy(first) + _copy(second))
        assert code == 0 and reproduced_plugin_load(text)[0] == [], said
        assert "best ring/ll/16 was slower than NCCL's default (0.77x, median)" in text, text


def test_a_fill_in_says_what_it_was_judged_at(tmp_path):
    """A fill-in within the noise (101 us against 100 us, 1% noise each) says so, at the speed it was judged at
    (its slowest copy); one faster beyond the noise but below --min-gain says that, never "within the noise"."""
    code, said, text = _invoke(tmp_path, _copy(100.5) + _copy(101.0), "--for", "example-plugin")
    assert code == 0, said
    fill_ins = [line for line in text.splitlines() if "FILL-IN" in line]
    assert fill_ins and all("no winner (none beat NCCL default, 0.99x; within the noise of NCCL's default there)"
                            in line for line in fill_ins), text
    assert "within the noise of NCCL's default there; measured 0.99x of NCCL's default's speed" in said, said
    code, said, text = _invoke(tmp_path, _copy(50.0) + _copy(52.0), "--for", "example-plugin", "--min-gain", "2")
    assert code == 0, said
    fill_ins = [line for line in text.splitlines() if "FILL-IN" in line]
    assert fill_ins and all("(none beat NCCL default, 1.92x; faster by less than --min-gain)" in line
                            for line in fill_ins), text
    assert "within the noise" not in text and "within the noise" not in said, said
    assert "faster by less than --min-gain; measured 1.92x of NCCL's default's speed" in said, said
