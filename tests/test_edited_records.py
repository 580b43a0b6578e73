"""Probe P3 (session 46): a record edited to another size (its bandwidths scaled, its count left) passed report and
fit; a header edited to another world size, records and all, with 3 host names, devices, torch threads, racks
[[0,1,2]] and --nproc 3 beside world_size 4, fitted a 4-rank curve."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.records import iter_records
from tests.test_compare import header_for, write
from tests.test_shared_with_base import _points


def _bad(path):
    bad: list = []
    kept = list(iter_records(path, on_bad_line=lambda n, why: bad.append((n, why))))
    return kept, bad


def test_a_record_edited_to_another_size_is_refused(tmp_path):
    points = _points((4096, 16384, 65536), "r", 4)
    edited = dataclasses.replace(points[1], size_bytes=4 * points[1].size_bytes, algbw_gbps=4 * points[1].algbw_gbps,
                                 busbw_gbps=4 * points[1].busbw_gbps)   # count left, as P3's Asz.jsonl
    path = write(tmp_path / "sz.jsonl", [header_for(points[0]), points[0], edited, points[2]])
    kept, bad = _bad(path)
    assert [n for n, _ in bad] == [3] and "size_bytes=65536 but count=4096 x 4 B (float32) gives 16384" in bad[0][1]
    fitted = CliRunner().invoke(app, ["fit", str(path), "-O", str(tmp_path / "f.json")])
    assert fitted.exit_code == 2 and "contradict themselves" in fitted.output, fitted.output
    # count edited too: the size is still none the run's header planned (its sweep_entries, as nccl-tests aligns them)
    entries = [{"collective": "all_reduce", "dtypes": ["float32"], "sizes_bytes": [4096, 16384, 65536]}]
    header = dataclasses.replace(header_for(points[0]), sweep_entries=entries)
    both = dataclasses.replace(edited, size_bytes=32768, count=8192, algbw_gbps=2 * points[1].algbw_gbps,
                               busbw_gbps=2 * points[1].busbw_gbps)
    kept, bad = _bad(write(tmp_path / "planned.jsonl", [header, points[0], both, points[2]]))
    assert [n for n, _ in bad] == [3] and "header plans all_reduce float32 at 4096, 16384, 65536 B" in bad[0][1], bad
    # the chunked collectives count one rank's chunk (nccl-tests): an all_gather of 4096 B on 2 ranks counts 512
    gathered = dataclasses.replace(points[0], collective="all_gather", count=512, busbw_gbps=points[0].algbw_gbps / 2)
    kept, bad = _bad(write(tmp_path / "ag.jsonl", [header_for(gathered), gathered,
                                                   dataclasses.replace(gathered, count=1024)]))
    assert len(kept) == 2 and [n for n, _ in bad] == [3] and "x 2 ranks gives 8192 (all_gather)" in bad[0][1], bad
    # an nccl-tests import whose log lists no ranks (group 1): any whole number of chunks, as the importer allows
    imported = dataclasses.replace(gathered, group_size=1, world_size=1, busbw_gbps=0.0)
    header = dataclasses.replace(header_for(imported), launcher="nccl-tests")
    kept, bad = _bad(write(tmp_path / "imported.jsonl", [header, imported]))
    assert len(kept) == 2 and bad == [], bad


def test_a_header_edited_to_another_world_size_is_refused(tmp_path):
    points = [dataclasses.replace(p, world_size=4, group_size=4, busbw_gbps=p.algbw_gbps * 1.5)
              for p in _points((4096, 16384, 65536), "w", 5)]
    header = dataclasses.replace(header_for(points[0]), hostnames=["vm"] * 3, devices=["cpu"] * 3,
                                 torch_threads=[1, 1, 1], argv=["commbench", "bench", "all_reduce", "--nproc", "3"],
                                 topology={"tiers": ["scale-up", "scale-out"], "num_racks": 1, "ranks_per_rack": 3,
                                           "racks": [[0, 1, 2]]})
    path = write(tmp_path / "w.jsonl", [header, *points])
    kept, bad = _bad(path)
    assert kept == [] and [n for n, _ in bad] == [1, 2, 3, 4], bad
    assert ("world_size=4 but hostnames lists 3, devices lists 3, torch_threads lists 3, topology racks hold ranks "
            "0..2, argv's --nproc says 3") in bad[0][1], bad
    fitted = CliRunner().invoke(app, ["fit", str(path), "-O", str(tmp_path / "f.json")])
    said = " ".join(fitted.output.split())
    assert fitted.exit_code == 2 and "contradicts its own world_size" in said, said
    # a launcher's own one-entry lists (a refused tuning combination's header) and a whole header are read
    fine = dataclasses.replace(header, hostnames=["vm"], devices=[], torch_threads=None, topology=None,
                               argv=["commbench", "bench", "all_reduce", "--nproc", "4"])
    kept, bad = _bad(write(tmp_path / "ok.jsonl", [fine, *points]))
    assert len(kept) == 4 and bad == [], bad
