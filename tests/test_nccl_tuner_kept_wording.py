"""Probe P2 findings on what a tuner config says where it keeps NCCL's default or writes no rule:
- NCCL's default measured, but not in the same dtype / in-place way as the combination: the kept comment said "NCCL
  default was not measured at this size" (false); it now names which side lacks which dtype or way.
- every point of the only combination left out for wrong data: the note said "no combination names an algorithm and a
  protocol ... measure with --nccl-algo" (false: one was measured); it now says the wrong data.
- a run header with no topology: the nNodes note said "(topology from ?)"; it now says unknown in words."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.records import JsonlWriter
from tests.test_nccl_tuner import _header, _record

DEFAULT = TuningCombo()
RING_LL = TuningCombo(algo="ring", proto="ll", channels=16)


def _tune(tmp_path, records) -> str:
    path, conf = tmp_path / "r.jsonl", tmp_path / "c.conf"
    with JsonlWriter(path) as writer:
        writer.write(_header("a", ["h"] * 4))
        for record in records:
            writer.write(record)
    result = CliRunner().invoke(app, ["nccl-tuner", str(path), "-O", str(conf)])
    assert result.exit_code == 0, result.output
    return conf.read_text()


def _kept(text: str) -> list[str]:
    return [line for line in text.splitlines() if "NCCL default kept at" in line]


def test_default_measured_in_another_dtype_says_which_dtype_the_combination_lacks(tmp_path):
    text = _tune(tmp_path, [_record("a", 1024, DEFAULT, 20.0), _record("a", 1024, DEFAULT, 20.0, dtype="bfloat16"),
                            _record("a", 1024, RING_LL, 10.0)])
    (kept,) = _kept(text)
    assert "not measured at this size" not in kept, kept
    assert "ring/ll/16 not measured in bfloat16, where NCCL default was" in kept, kept


def test_default_measured_in_another_way_says_which_way_it_lacks(tmp_path):
    oop = _record("a", 1024, DEFAULT, 20.0)
    text = _tune(tmp_path, [oop, _record("a", 1024, RING_LL, 10.0),
                            dataclasses.replace(_record("a", 1024, RING_LL, 10.0), in_place=True)])
    (kept,) = _kept(text)
    assert "NCCL default not measured in nccl op=sum in-place, where ring/ll/16 was" in kept, kept
    assert "not measured at this size" not in kept and not kept.endswith("..."), kept


def test_default_not_measured_at_all_keeps_its_wording(tmp_path):
    text = _tune(tmp_path, [_record("a", 1024, DEFAULT, 20.0), _record("a", 4096, RING_LL, 10.0)])
    assert any("NCCL default was not measured at this size" in line for line in _kept(text)), text


def test_a_combination_left_out_for_wrong_data_is_said_not_asked_to_be_measured(tmp_path):
    text = _tune(tmp_path, [record for size in (1024, 4096) for record in (
        _record("a", size, DEFAULT, 20.0), _record("a", size, RING_LL, 10.0, num_wrong=5 if size == 4096 else 0))])
    assert "measure with --nccl-algo" not in text, text
    assert ("no combination naming an algorithm and a protocol is left to become a rule: ring/ll/16 gave wrong data "
            "(#wrong > 0)") in text, text


def test_no_topology_in_the_header_is_said_in_words():
    from commbench.results.nccl_nodes import header_node_count

    why = header_node_count(_header("a", ["h1", "h1"]))[2]
    assert "?" not in why and "topology unknown" in why, why
