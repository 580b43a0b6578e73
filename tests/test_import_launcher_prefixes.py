"""Logs captured through `mpirun --tag-output` ("[1,0]<stdout>:" before each line) or `srun -l` (" 0: ") were refused
line by line as "not an nccl-tests line": common ways to run nccl-tests. The prefix is dropped, the log read as is."""

from __future__ import annotations

from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import Measurement, RunHeader
from tests.nccl_tests_inputs import text_log


def test_tag_output_and_srun_label_prefixes_are_read():
    plain = parse_text(text_log(), "all_reduce_perf.log")
    for prefix in ("[1,0]<stdout>:", " 0: ", "12: "):
        tagged = parse_text("".join(prefix + line + "\n" for line in text_log().splitlines()), "all_reduce_perf.log")
        assert tagged.problems == [] and tagged.stopped == [], (prefix, tagged.problems[:2])
        points = [(m.size_bytes, m.in_place, m.loop_time_us) for m in tagged.records if isinstance(m, Measurement)]
        assert points == [(m.size_bytes, m.in_place, m.loop_time_us) for m in plain.records if isinstance(m, Measurement)]
        (header,) = [r for r in tagged.records if isinstance(r, RunHeader)]
        assert header.hostnames == ["node-a", "node-a"] and header.nccl_version == "2.28.4"
