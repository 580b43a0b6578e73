"""nccl-tests flags that change what a row measures (probe H, F3, F4, F11c): -D N > 0 (nccl-tests' own device-API
kernels in place of ncclAllReduce) and -R (buffer registration) were dropped on import, so compare, fit and nccl-tuner
took them for default NCCL points; -z 2 and -z 3 were imported as the same blocking=True as -z 1 (different timings:
-z 3 times the collectives only); --collective on a log that names another collective was ignored without a word."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file
from commbench.results.importers.nccl_tests_flags import option_value
from commbench.results.records import Measurement
from tests.nccl_tests_inputs import json_file, text_log

runner = CliRunner()
Z1 = "# Blocking Enabled: wait and barrier after each inner iteration (-m) "
Z2 = "# Blocking Enabled: wait after each inner iteration (-m), no barrier "
Z3 = "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier "


def _params(path) -> list[dict]:
    return [m.params for m in import_file(str(path)).records if isinstance(m, Measurement)]


def _import(path, out, *extra):
    return runner.invoke(app, ["import", "nccl-tests", str(path), "-O", str(out), *extra])


def test_device_kernels_and_registration_are_keyed_and_refused_by_compare_and_tuner(tmp_path):
    from commbench.results.nccl_tuner import points_from_records

    (tmp_path / "d1.json").write_text(json_file(extra_args=("-R", "2", "-D", "1")))
    (tmp_path / "r1.json").write_text(json_file(extra_args=("--local_register=1",)))
    (tmp_path / "d0.json").write_text(json_file(extra_args=("-D", "0")))
    device = _params(tmp_path / "d1.json")
    assert device and all(p == {"buffer_register": "symmetric", "device_impl": 1} for p in device), device
    assert all(p == {"buffer_register": "local"} for p in _params(tmp_path / "r1.json"))
    assert all(p == {} for p in _params(tmp_path / "d0.json"))   # -D 0 is NCCL's own implementation
    records = import_file(str(tmp_path / "d1.json")).records
    assert any("device-API" in n for m in records if isinstance(m, Measurement) for n in m.notes)
    tuned, notes = points_from_records(records)
    assert tuned == [] and any("device-API kernels" in n for n in notes), notes
    for name in ("d1", "d0"):
        assert _import(tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl").exit_code == 0
    refused = runner.invoke(app, ["compare", str(tmp_path / "d0.jsonl"), str(tmp_path / "d1.jsonl")])
    assert refused.exit_code == 2 and "device_impl" in refused.output, refused.output


def test_a_text_logs_command_line_gives_its_flags():
    log = "+ ./build/all_reduce_perf -b 1M -e 16M -f 4 -R 2 -D2 -V 32\n" + text_log()
    import io
    from commbench.results.importers.nccl_tests import parse_text
    points = [m for m in parse_text(io.StringIO(log), "x.log").records if isinstance(m, Measurement)]
    assert points and all(m.params == {"buffer_register": "symmetric", "device_impl": 2, "device_ctas": 32}
                          for m in points), points[0].params


def test_option_value_reads_getopt_forms():
    assert option_value(["x", "-D", "1"], "D", "device_implementation") == "1"
    assert option_value(["x", "-D3"], "D", "device_implementation") == "3"
    assert option_value(["x", "--device_implementation=4", "-D", "5"], "D", "device_implementation") == "5"
    assert option_value(["x", "-b", "8"], "D", "device_implementation") is None


def test_blocking_modes_are_told_apart_and_compare_refuses_another_mode(tmp_path):
    for name, line in (("z1", Z1), ("z2", Z2), ("z3", Z3)):
        (tmp_path / f"{name}.log").write_text(text_log(extra_banner_lines=(line,)))
    assert {repr(p) for p in _params(tmp_path / "z1.log")} == {"{'blocking': True}"}
    assert {repr(p) for p in _params(tmp_path / "z2.log")} == {"{'blocking': 2}"}
    assert {repr(p) for p in _params(tmp_path / "z3.log")} == {"{'blocking': 3}"}
    for name in ("z1", "z3"):
        assert _import(tmp_path / f"{name}.log", tmp_path / f"{name}.jsonl", "--collective", "all_reduce").exit_code == 0
    refused = runner.invoke(app, ["compare", str(tmp_path / "z1.jsonl"), str(tmp_path / "z3.jsonl")])
    assert refused.exit_code == 2 and '"blocking": 3' in refused.output, refused.output
    # -J: one bool for every mode; the mode comes from its args where they name one, else it is unknown
    (tmp_path / "j3.json").write_text(json_file(blocking=True, extra_args=("-z", "3")))
    (tmp_path / "jx.json").write_text(json_file(blocking=True))
    assert all(p == {"blocking": 3} for p in _params(tmp_path / "j3.json"))
    assert all(p == {"blocking": "unknown"} for p in _params(tmp_path / "jx.json"))


def test_collective_option_that_the_log_contradicts_is_said(tmp_path):
    (tmp_path / "ar.log").write_text(text_log())
    result = _import(tmp_path / "ar.log", tmp_path / "o.jsonl", "--collective", "all_gather")
    assert result.exit_code == 0
    assert "--collective=all_gather ignored" in result.output and "all_reduce" in result.output, result.output
    (tmp_path / "ar.json").write_text(json_file())
    result = _import(tmp_path / "ar.json", tmp_path / "p.jsonl", "--collective", "all_gather")
    assert "--collective=all_gather ignored" in result.output, result.output
    points = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert {p["collective"] for p in points if p.get("record_type") != "header"} == {"all_reduce"}


def test_fit_refuses_to_merge_device_kernels_or_registered_buffers_with_default_points(tmp_path):
    for name, extra in (("d1", ("-R", "2", "-D", "1")), ("r1", ("-R", "1")), ("d0", ())):
        (tmp_path / f"{name}.json").write_text(json_file(extra_args=extra))
        assert _import(tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl").exit_code == 0
    for other in ("d1", "r1"):
        mixed = runner.invoke(app, ["fit", str(tmp_path / "d0.jsonl"), str(tmp_path / f"{other}.jsonl"),
                                    "-O", str(tmp_path / f"{other}-profile.json")])
        assert mixed.exit_code == 2 and "mix loop modes" in mixed.output, mixed.output
