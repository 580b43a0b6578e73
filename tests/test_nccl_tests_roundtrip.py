"""commbench's --format nccl-tests text re-imports to the same points, world size and nccl-tests time
as its own JSONL: `compare imported ours` shows no difference (every -a mode)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.compare import compare
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import NCCL_TESTS_AVERAGE_MODES, headers, measurements, read_records

runner = CliRunner()


@pytest.mark.parametrize("collective,average", [("all_gather", 3)])  # -a 3: the mode travels too
def test_own_nccl_tests_text_round_trips(tmp_path, capfd, collective, average):
    ours = tmp_path / "ours.jsonl"
    result = runner.invoke(app, ["bench", collective, "--nproc", "3", "-b", "1K", "-e", "16K", "-f", "4", "-n", "5",
                                 "-w", "1", "--format", "nccl-tests", "-a", str(average), "-J", str(ours)])
    assert result.exit_code == 0, result.output
    log = tmp_path / "log.txt"
    log.write_text(capfd.readouterr().out)  # rank 0's stdout (a spawned process)
    imported = import_file(str(log))
    assert imported.problems == []
    (header,) = headers(imported.records)
    assert header.world_size == 3  # from the `#  Rank` lines
    mine = measurements(read_records([ours]))
    theirs = measurements(imported.records)
    mode = NCCL_TESTS_AVERAGE_MODES[average]
    assert [m.size_bytes for m in theirs] == [m.size_bytes for m in mine]
    assert all(set(m.loop_time_us) == {mode} for m in theirs)
    comparison = compare(theirs, mine, max_regression=0.1)
    assert len(comparison.points) == len(mine) and comparison.only_in_base == comparison.only_in_new == 0
    for point in comparison.points:
        assert point.statistic == f"nccl-{mode}" and point.verdict == "ok"
        assert point.ratio == pytest.approx(1.0, abs=0.006 / point.base_us + 1e-9)  # the text's 0.01 µs rounding


def test_all_gather_chunks_are_trimmed_to_16_bytes_as_nccl_tests():
    from collectives import get_collective

    all_gather = get_collective("all_gather")
    assert all_gather.count_for(1024, 4, 3) == (84, 1008)  # nccl-tests: 1008 B, not 1020 B
    assert all_gather.count_for(8, 4, 2) == (1, 8)  # below 16 B per rank: untrimmed (nccl-tests would run 0)
    assert get_collective("reduce_scatter").count_for(1000, 2, 4) == (120, 960)
