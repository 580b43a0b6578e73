"""import nccl-tests: NCCL's own version line ("host:pid:tid [0] NCCL INFO NCCL version 2.18.1+cuda12.1", and the bare
"NCCL version 2.27.3+cuda12.9" NCCL prints under NCCL_DEBUG=WARN or VERSION: nccl src/init.cc showVersion, src/debug.cc
with no host prefix at NCCL_LOG_VERSION) was never read. Logs without nccl-tests' own version line (before v2.17.4) from
two NCCL releases imported with nccl_version None and fit merged them into one curve, though `fit --help` says such
runs are refused, not merged; the bare line was an unparsed line, so --strict failed on any NCCL_DEBUG=WARN log. Both
forms are read now, and a log whose sources disagree on the NCCL version is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.records import RunHeader

OLD = (Path(__file__).parent / "data" / "nccl-tests" / "all_reduce_perf-2018.log").read_text()   # no version line
INFO = "dgx1-01:31219:31219 [0] NCCL INFO NCCL version {}+cuda12.1"
TESTS_LINE = "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library={}"


def _with(lines: list[str], log: str = OLD) -> str:
    """`log` with `lines` after its device list, where nccl-tests' first ncclCommInitRank makes NCCL print them."""
    head, _, rest = log.partition("#\n#    ")
    return head + "\n".join(lines) + "\n#\n#    " + rest


def _versions(text: str) -> list[str | None]:
    result = parse_text(text, "all_reduce_perf.log")
    assert result.problems == [], result.problems
    return [r.nccl_version for r in result.records if isinstance(r, RunHeader)]


@pytest.mark.parametrize("line", [INFO.format("2.18.1"), "NCCL version 2.18.1+cuda12.1",
                                  "[2025-06-02 10:11:12] NCCL version 2.18.1+cuda12.1"],
                         ids=["info", "bare-warn", "bare-timestamped"])
def test_nccl_s_own_version_line_gives_the_run_its_nccl_version(line):
    assert _versions(_with([line])) == ["2.18.1"]
    assert _versions(_with([line, INFO.format("2.18.1").replace("31219 [0]", "31220 [1]")])) == ["2.18.1"]
    # NCCL flushes its lines at once, nccl-tests' piped printf output waits in its buffer: the line may come first
    assert _versions(line + "\n" + OLD) == ["2.18.1"]


def test_the_version_line_agreeing_with_nccl_tests_nccl_library_is_no_conflict():
    assert _versions(_with([INFO.format("2.27.3")], TESTS_LINE.format(22703) + "\n" + OLD)) == ["2.27.3"]


@pytest.mark.parametrize("lines, head", [([INFO.format("2.18.1")], TESTS_LINE.format(22703) + "\n"),
                                         ([INFO.format("2.18.1"), "NCCL version 2.21.5+cuda12.4"], "")],
                         ids=["nccl-library", "two-lines"])
def test_a_log_whose_sources_disagree_on_the_nccl_version_is_refused_in_one_line(lines, head):
    with pytest.raises(CommbenchError) as refused:
        parse_text(_with(lines, head + OLD), "all_reduce_perf.log")
    message = str(refused.value)
    assert "\n" not in message and "2.18.1" in message and ("2.27.3" in message or "2.21.5" in message), message


def test_logs_of_two_nccl_releases_are_not_fitted_together_and_strict_passes_a_warn_log(tmp_path):
    runner = CliRunner()
    outs = []
    for name, line in (("a", INFO.format("2.18.1")), ("b", "NCCL version 2.21.5+cuda12.4")):
        log = tmp_path / f"all_reduce_perf-{name}.log"
        log.write_text(_with([line]))
        outs.append(tmp_path / f"{name}.jsonl")
        out = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(outs[-1]), "--strict"])
        assert out.exit_code == 0, out.output
    fit = runner.invoke(app, ["fit", *map(str, outs), "-O", str(tmp_path / "fab.json")])
    assert fit.exit_code != 0 and "NCCL" in fit.output and "2.18.1" in fit.output, fit.output
