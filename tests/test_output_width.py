"""Every table fits 80, 100, 120 and 200 columns without cutting a number (issue 19)."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from collectives import REGISTRY
from commbench.cli.app import app
from commbench.cli.verify_plan import verify_columns, verify_rows
from commbench.results.records import JsonlWriter, Measurement
from commbench.results.render import measurement_table, run_title
from commbench.results.tables import Col, fitted_table, print_table

WIDTHS = (80, 100, 120, 200)
NUMBER = re.compile(r"(?<![\w.])[-+±]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:x|%)?(?![\w.])")
# a command to copy and the one-line error on stderr: soft-wrapped by the terminal, never folded
TOO_LONG_ON_PURPOSE = ("Megatron-LM: ", "error: ")


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


def check_fits(narrow: str, wide: str, width: int) -> None:
    """No line is wider than `width`; every number in the narrow rendering is a whole number of the wide one
    (a number cut or folded across lines would leave a fragment the wide rendering does not have)."""
    for line in narrow.splitlines():
        if not line.startswith(TOO_LONG_ON_PURPOSE):
            assert cell_len(line) <= width, f"{cell_len(line)} > {width}: {line!r}"
    assert "…" not in narrow
    fragments = numbers(narrow) - numbers(wide)
    assert not fragments, f"numbers cut at {width} columns: {sorted(fragments)}"


def render(renderable, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(renderable)
    return console.file.getvalue()


def measurement(collective: str, size: int, **extra) -> Measurement:
    base = dict(run_id="r1", collective=collective, backend="nccl", size_bytes=size, count=size // 4, dtype="float32",
                op="sum" if collective in ("all_reduce", "reduce_scatter", "grad_reduce_scatter") else None,
                in_place=False, world_size=576, group_size=576, iters=20, warmup_iters=5,
                time_us_median=131072.55 * size / (1 << 30) + 12.5, time_us_p99=262144.75 * size / (1 << 30) + 25.0,
                algbw_gbps=size / 1e3 / (131072.55 * size / (1 << 30) + 12.5), busbw_gbps=1234.567 * size / (1 << 30),
                num_wrong=0)
    base.update(extra)
    return Measurement(**base)


def records_for(collective: str) -> list[Measurement]:
    sizes = [8, 131072, 256 << 10, 16 << 20, 1 << 30, 8 << 30]
    if collective == "moe_all_to_all":
        return [measurement(collective, t * 7168 * 8, count=t * 7168 * 8, dtype="uint8", op=None, group_size=64,
                            params={"tokens_per_rank": t, "hidden": 7168, "num_experts": 256, "top_k": 8,
                                    "routing": "group-limited:8:4", "dispatch_mode": "per-rank", "dispatch_dtype": "fp8",
                                    "combine_dtype": "bf16", "preset": "deepseek-v3"},
                            metrics={"imbalance_rank": 1.37, "tokens_received_max": 9 * t, "tokens_received_mean": 6.5 * t,
                                     "dispatch_busbw_gbps": 312.125, "combine_busbw_gbps": 287.5},
                            stages_us_median={"count_exchange": 25.5, "dispatch": 1234.5, "combine": 1530.25})
                for t in (128, 4096, 131072)]
    if collective == "grad_reduce_scatter":
        return [measurement(collective, s, group_size=144, group_layout="contiguous", num_groups=4,
                            params={"algorithm": algo},
                            stages_us_median={"intra_rs": 1500.25, "inter_rs": 13107.5})
                for s in sizes[3:] for algo in ("flat", "hierarchical-allreduce")]
    rows = [measurement(collective, s) for s in sizes]
    rows.append(measurement(collective, 64 << 20, status="failed", time_us_median=None, time_us_p99=None,
                            algbw_gbps=None, busbw_gbps=None, num_wrong=None,
                            error="NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"))
    return rows


@pytest.mark.parametrize("collective", list(REGISTRY))
@pytest.mark.parametrize("width", WIDTHS)
def test_measurement_tables_fit(collective, width):
    rows = records_for(collective)
    title = run_title(collective, 576, rows[0].params)
    narrow, wide = render(measurement_table(title, rows, width), width), render(measurement_table(title, rows, 400), 400)
    check_fits(narrow, wide, width)
    for m in rows:  # the columns nobody may drop keep every value whole
        if m.status == "ok":
            assert f"{m.time_us_median:.1f}" in narrow.replace(",", "")
            value = m.metrics.get("dispatch_busbw_gbps", m.busbw_gbps)
            assert f"{value:.3f}" in narrow


def test_moe_table_shows_what_moe_users_read():
    out = render(measurement_table(None, records_for("moe_all_to_all"), 200), 200)
    for header in ("tok/rank", "imbalance", "recv tok max/mean", "dispatch busbw", "combine busbw"):
        assert header in out
    assert "uint8" not in out and "redop" not in out and "1.37" in out and "1179648/851968" in out
    title = run_title("moe_all_to_all", 64, records_for("moe_all_to_all")[0].params)
    assert "preset deepseek-v3" in title and "group-limited:8:4 routing" in title and "per-rank dispatch in fp8" in title


def test_plain_collective_drops_columns_that_say_nothing():
    out = render(measurement_table(None, records_for("all_gather"), 200), 200)
    assert "point" not in out and "redop" not in out and "busbw" in out
    assert "NCCL error: unhandled system error" in out  # a failed point's error prints under the table


def test_fitted_table_drops_low_value_columns_first_and_says_so():
    cols = [Col(name="label", numeric=False), Col(name="keep me (GB/s)"), Col(name="low value", keep=1)]
    rows = [["a long label that wraps " * 3, "123456789.123", "987654321.987"]]
    out = render(fitted_table("t", cols, rows, 36), 36)
    assert "123456789.123" in out and "987654321.987" not in out and "narrow terminal: low value not" in out


def test_too_narrow_for_the_numbers_keeps_them_whole():
    console = Console(width=20, file=io.StringIO(), color_system=None)
    print_table(console, "t", [Col(name="size"), Col(name="busbw (GB/s)"), Col(name="x", keep=1)],
                [["128 MiB", "123456.789", "1"]])
    assert "123456.789" in console.file.getvalue()


VERIFY_POINTS = [{"collective": "EP all-to-all (dispatch)", "group_size": 4, "plan_group_size": 32,
                  "size_bytes": 4 << 20, "measured_size_bytes": 4 << 20, "plan_size_bytes": 939524096, "measured_time_us": 131072.5,
                  "predicted_time_us": 1234.5, "measured_over_predicted": 106.2, "plan_predicted_time_us": 20480.0,
                  "num_wrong": 0},
                 {"collective": "DP grad bucket reduce-scatter", "group_size": 4, "plan_group_size": 64,
                  "size_bytes": 1 << 20, "measured_size_bytes": 1 << 20, "plan_size_bytes": 1 << 30, "measured_time_us": 8192.25,
                  "predicted_time_us": None, "measured_over_predicted": None, "plan_predicted_time_us": None,
                  "num_wrong": 0}]


@pytest.mark.parametrize("width", WIDTHS)
def test_verify_plan_table_fits_and_uses_size_units(width):
    cols = verify_columns(VERIFY_POINTS)
    narrow = render(fitted_table("verify-plan", cols, verify_rows(VERIFY_POINTS), width), width)
    wide = render(fitted_table("verify-plan", cols, verify_rows(VERIFY_POINTS), 400), 400)
    check_fits(narrow, wide, width)
    assert "4.00" in narrow and "131,072.5" in narrow and "4194304" not in narrow
    assert "size measured (MiB)" in " ".join(wide.split()) and "896.00" in wide   # 939,524,096 B: plan size, in MiB


def cli(args: list[str], width: int) -> str:
    """The command's output at `width` columns, less the search timing (it differs between runs)."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code in (0, 1), result.output
    return re.sub(r"in\s+[\d.]+\s+s\s+\(\s*[\d,]+\s+layouts/s\)", "", result.output)


@pytest.fixture(scope="module")
def results_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cmp")
    paths = []
    for name, scale in (("base", 1.0), ("new", 1.3)):
        path = folder / f"{name}.jsonl"
        with JsonlWriter(path) as writer:
            for collective in ("all_reduce", "moe_all_to_all", "grad_reduce_scatter"):
                for m in records_for(collective):
                    if m.status == "ok":   # busbw = algbw x the bus factor, as every reader checks (record_checks)
                        factor = {"all_reduce": 2 * 575 / 576, "moe_all_to_all": 63 / 64}.get(collective)
                        writer.write(Measurement(**{**m.__dict__, "time_us_median": m.time_us_median * scale,
                                                    "time_us_p99": m.time_us_median * scale * 1.01,
                                                    "algbw_gbps": m.algbw_gbps / scale,
                                                    "busbw_gbps": m.algbw_gbps / scale * factor if factor else m.busbw_gbps}))
        paths.append(str(path))
    return paths


CLI_TABLES = {
    "predict": ["predict", "-c", "all_reduce", "-g", "144", "--system", "gb300-nvl72", "--racks", "2", "-b", "8",
                "-e", "8G", "-f", "8"],
    "plan-pinned": ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "mxfp8",
                    "--layout", "tp=1,pp=4,vp=16,ep=32,mbs=2,gbs=4096"],
    "plan-search": ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256", "--precision", "mxfp8",
                    "--top", "5"],
    "sweep-dry-run": ["sweep", "nvl72-multirack", "--dry-run"],
    "systems": ["systems", "--checks"],
}


@pytest.mark.parametrize("name", list(CLI_TABLES))
def test_cli_tables_fit(name, search_once):   # plan's searches are made once, for the wide and every narrow table
    wide = cli(CLI_TABLES[name], 400)
    for width in WIDTHS:
        check_fits(cli(CLI_TABLES[name], width), wide, width)


def test_compare_report_fit_env_tables_fit(results_pair, tmp_path, monkeypatch):
    from commbench.results.report import ReportFiles

    # the report's tables are what is checked here; its figures are tests/test_plots.py's
    monkeypatch.setattr("commbench.results.report.write_report",
                        lambda *args, **kwargs: ReportFiles(markdown=tmp_path / "README.md", plots=[]))
    base, new = results_pair
    for args in (["compare", base, new], ["report", new, "-O", str(tmp_path / "rep")], ["fit", base], ["env"]):
        wide = cli(args, 400)
        for width in WIDTHS:
            check_fits(cli(args, width), wide, width)


def test_piped_output_without_columns_uses_the_piped_width(monkeypatch):
    from commbench.results.render import stdout_console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("os.get_terminal_size", lambda fd=0: (_ for _ in ()).throw(OSError()))
    assert stdout_console(piped_width=160).width == 160 and stdout_console().width == 200
    monkeypatch.setenv("COLUMNS", "93")
    assert stdout_console(piped_width=160).width == 93


def test_compare_json_has_a_verdict_per_point(results_pair):
    result = CliRunner().invoke(app, ["compare", *results_pair, "--json"])
    assert result.exit_code == 1  # 30% slower everywhere: a regression, as without --json
    doc = json.loads(result.stdout)  # the regression's one-line error goes to stderr
    assert doc["passed"] is False and {p["verdict"] for p in doc["points"]} <= {"REGRESSED", "slower (within noise)"}
    assert any(c["regressed"] for c in doc["collectives"]) or any(p["verdict"] == "REGRESSED" for p in doc["points"])


def test_help_keeps_bracketed_names():
    """rich markup ate "[model.NAME]" from plan --help ("TOML file of  tables"): brackets are escaped."""
    assert "TOML file of [model.NAME] tables" in cli(["plan", "--help"], 200)
    assert "the file's [sweep] nproc" in cli(["sweep", "--help"], 200)


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_backends_table_fits(width, monkeypatch, capsys):
    from commbench.measure.compare_backends import print_comparison

    rows = [[measurement("all_reduce", s, backend="torch-nccl", metrics={"time_ratio_to_baseline": 1.0625}),
             measurement("all_reduce", s, backend="cupy-nccl")] for s in (8, 1 << 20, 8 << 30)]
    texts = []
    for columns in (width, 400):
        monkeypatch.setenv("COLUMNS", str(columns))
        print_comparison(rows, ["torch-nccl", "cupy-nccl"], ["8 B", "1 MiB", "8 GiB"])
        texts.append(capsys.readouterr().out)
    check_fits(texts[0], texts[1], width)
    assert "1.062" in texts[0] or "1.063" in texts[0]


def test_notes_on_a_redirected_stderr_are_as_wide_as_tables_not_80_columns(monkeypatch):
    """rich's own stderr Console wrapped notes at 80 columns in CI logs, mid-sentence, where the README says 200
    (found from outside); the stderr console takes stdout's width rule."""
    from commbench.cli.base import err_console
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("os.get_terminal_size", lambda fd=0: (_ for _ in ()).throw(OSError()))
    assert err_console.width == 200 and err_console.stderr
    monkeypatch.setenv("COLUMNS", "93")
    assert err_console.width == 93
