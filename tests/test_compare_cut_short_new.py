"""A run of NEW cut short: --allow-cut-short alone judges it on the points it holds (its help says so); the points it
planned and never reached were "missing ... --allow-missing permits that", so both options were needed (probe
H-F8). And NEW = a cut all_reduce run followed by a complete all_gather run: the all_gather run was blamed for the
all_reduce points too, doubling the count (probe H-F11b)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from tests.test_compare import as_collective, header_for, record, write
from tests.test_compare_runs import run_cli

SIZES = (1024, 4096, 16384, 65536)


def _run(run_id, collective, sizes, seed, planned=len(SIZES)):
    rng = np.random.default_rng(seed)
    records = [as_collective(record(size, 50 * np.exp(rng.normal(0, 0.01, 30)), run_id=run_id), collective)
               for size in sizes]
    header = dataclasses.replace(header_for(records[0]), planned_points=planned,
                                 argv=["commbench", "bench", collective])
    return [header, *records]


def test_allow_cut_short_alone_judges_a_cut_run_on_the_points_it_holds(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b", "all_reduce", SIZES, 1))
    new = write(tmp_path / "new.jsonl", _run("n", "all_reduce", SIZES[:2], 2))
    refused = run_cli(base, new)
    assert refused.exit_code == 1 and "cut short" in refused.output, refused.output
    assert "--allow-missing permits" not in refused.output, refused.output
    allowed = run_cli(base, new, "--allow-cut-short")
    assert allowed.exit_code == 0, allowed.output
    assert "2 not reached by a run cut short" in " ".join(allowed.output.split())
    document = json.loads(run_cli(base, new, "--allow-cut-short", "--json").stdout)
    assert document["passed"] and document["missing"] == [] and len(document["cut_short_not_reached"]) == 2
    assert {p["verdict_code"] for p in document["points"] if p["size_bytes"] >= 16384} == {"not_reached"}


def test_a_cut_run_beside_a_complete_run_of_another_collective_is_blamed_alone(tmp_path):
    base = write(tmp_path / "base.jsonl", _run("b1", "all_reduce", SIZES, 1) + _run("b2", "all_gather", SIZES, 2))
    for planned in (len(SIZES), None):   # None: a header from before planned_points, its loss not known as a cut
        new = write(tmp_path / f"new{planned}.jsonl", _run("n1", "all_reduce", SIZES[:2], 3, planned)
                    + _run("n2", "all_gather", SIZES, 4, planned))
        document = json.loads(run_cli(base, new, "--json").stdout)
        named = document["cut_short_not_reached"] if planned else document["missing"]
        assert len(named) == 2 and all(x.endswith("(run 1/2)") for x in named), (planned, named)
