"""Two runs on `commbench emulate` with another link rate (or other racks) are two fabrics. compare's setup check read
only 'emulated fabric' / 'real fabric', so a 1 Gbit/s base against a 100 Mbit/s new failed as a slowdown (x9.5, no
word of the fabric) and the reverse passed, hiding a real slowdown behind a faster link; fit refused the same pair
but said 'the results mix emulated and real fabrics' of two emulated ones (found from outside, probe AM F3). Now
compare, fit and report read one setup text of the fabric (results/emulated.py setup_text: racks, ranks, rate)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.profile import fit_result_files
from commbench.errors import CommbenchError
from commbench.results.emulated import description
from commbench.results.records import JsonlWriter
from commbench.results.run_setup import labels_by_what_differs
from tests.test_compare import A, B
from tests.test_fit import SIZES, _header, _record

GBIT = description(2, 1, 1e9)
SLOW = description(2, 1, 1e8)


def _emulated(tmp_path, name: str, source, emulated: dict) -> str:
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    lines[0]["emulated"] = emulated
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("other", [SLOW, description(1, 2, None)])
def test_compare_refuses_another_emulated_fabric_as_a_setup_change(tmp_path, other):
    base, new = _emulated(tmp_path, "a.jsonl", A, GBIT), _emulated(tmp_path, "b.jsonl", B, other)
    for first, second in ((base, new), (new, base)):   # a faster link must not hide a slowdown either
        out = CliRunner().invoke(app, ["compare", first, second], env={"COLUMNS": "400"})
        assert out.exit_code == 2, out.output
        errors = [line for line in out.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "fabrics" in errors[0], out.output
        assert "1 Gbit/s" in errors[0] and ("0.1 Gbit/s" in errors[0] or "1 rack x 2 ranks" in errors[0]), errors[0]
    same = CliRunner().invoke(app, ["compare", base, _emulated(tmp_path, "c.jsonl", B, dict(GBIT))])
    assert same.exit_code == 0, same.output


def test_fit_names_two_emulated_fabrics_as_such(tmp_path):
    path = tmp_path / "two.jsonl"
    with JsonlWriter(path) as writer:
        for run_id, emulated in (("run_a", GBIT), ("run_b", SLOW)):
            writer.write(dataclasses.replace(_header(run_id, world_size=4), emulated=emulated))
            for size in SIZES[8 + (run_id == "run_b")::2]:
                writer.write(_record("all_reduce", size, 20.0 + size / 1e4, 4, world=4, run_id=run_id))
    with pytest.raises(CommbenchError) as caught:
        fit_result_files([str(path)])
    message = str(caught.value)
    assert "mix fabrics" in message and "emulated and real" not in message and "real fabric:" not in message, message
    assert "1 Gbit/s" in message and "0.1 Gbit/s" in message, message


def test_report_labels_two_emulated_fabrics_by_what_differs():
    base = _header("run_a", world_size=4)
    labels = labels_by_what_differs({"run_a": dataclasses.replace(base, emulated=GBIT),
                                     "run_b": dataclasses.replace(base, run_id="run_b", emulated=SLOW)})
    assert labels["run_a"] != labels["run_b"] and "0.1 Gbit/s" in labels["run_b"], labels
