"""bench grad_reduce_scatter on racks of unequal size (hosts a,a,a,b: racks of 3 and 1) refused in one line, but only
after rank 0 had printed the banner, an empty table and '# Avg bus bandwidth : 0', and left a results file holding
a header alone. The racks are known once the ranks have started; the refusal now comes before anything is printed or
written."""

from __future__ import annotations

import pytest

from tests.launched import launch_cli


@pytest.mark.timeout(120)
def test_uneven_racks_are_refused_before_the_table_and_the_file(tmp_path):
    out = tmp_path / "u.jsonl"
    results = launch_cli(["bench", "grad_reduce_scatter", "-b", "64K", "-e", "64K", "-n", "2", "-w", "1",
                          "-J", str(out)], ("a", "a", "a", "b"))
    assert {code for code, _, _ in results} == {2}, results
    said = results[0][2]
    assert "spans racks unevenly" in said and "Avg bus bandwidth" not in said and "┏" not in said, said
    assert not out.exists()
