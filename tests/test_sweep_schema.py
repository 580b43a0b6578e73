"""Sweep files: every kind of mistake is refused before launch with entry index, field, value, allowed."""

from __future__ import annotations

import glob
import pathlib

import pytest

from commbench.errors import CommbenchError
from commbench.sweep import load_sweep, parse_sweep, plan_sweep


def entry(**overrides):
    base = {"collective": "all_reduce", "sizes": ["1K", "64K"]}
    base.update(overrides)
    return base


def parse(*runs, defaults=None, sweep=None):
    data = {"run": list(runs)}
    if defaults is not None:
        data["defaults"] = defaults
    if sweep is not None:
        data["sweep"] = sweep
    return parse_sweep(data, "test.toml")


def test_good_file_applies_defaults_and_ranges():
    spec = parse(entry(), entry(collective="all_gather", sizes={"min": "8", "max": "64", "factor": 2}, dtypes=["float32", "bf16"]),
                 defaults={"iters": 7, "timeout_s": 9})
    first, second = spec.entries
    assert first.sizes_bytes == (1024, 65536) and first.iters == 7 and first.timeout_s == 9.0
    assert second.sizes_bytes == (8, 16, 32, 64) and second.dtypes == ("float32", "bfloat16")


@pytest.mark.parametrize("run, field, fragment", [
    (entry(collective="all_reduse"), "collective", "allowed: all_reduce"),
    ({"sizes": ["1K"]}, "collective", "required"),
    (entry(sizes=None) | {"sizes": "lots"}, "sizes", "a list"),
    (entry(sizes=["1K", "12Q"]), "sizes[1]", "byte count"),
    (entry(sizes=[]), "sizes", "at least one"),
    (entry(sizes={"min": "1M", "max": "1K"}), "sizes.min", "<= sizes.max"),
    (entry(sizes={"min": "1K", "max": "1M", "factor": 1}), "sizes.factor", "> 1"),
    (entry(sizes={"min": "1K", "max": "1M", "ratio": 2}), "sizes.ratio", "allowed keys"),
    (entry(dtypes=["float33"]), "dtypes", "float32"),
    (entry(op="mean"), "op", "allowed: sum"),
    (entry(collective="all_gather", op="sum"), "op", "does not reduce"),
    (entry(iters=0), "iters", ">= 1"),
    (entry(warmup_iters=-1), "warmup_iters", ">= 0"),
    (entry(check="yes"), "check", "true or false"),
    (entry(timeout_s=0), "timeout_s", "from 0.1"),
    (entry(routing="zipf:1.2"), "routing", "unknown key"),
])
def test_each_mistake_names_entry_field_and_value(run, field, fragment):
    with pytest.raises(CommbenchError) as info:
        parse(entry(), run)
    message = str(info.value)
    assert "run[1]" in message and f"{field}=" in message and fragment in message, message


@pytest.mark.parametrize("size, fragment", [
    ("1Mb", "b means bits"),               # megabits, read as 1 MiB before
    ("1MB", "MB is ambiguous"),            # 10^6 B as commbench prints it, 2^20 B as nccl-tests reads it
    ("64kb", "b means bits"),
    ("2GB", "2^30 B in nccl-tests"),
    ("1.3K", "not a whole number of bytes (1331.2 B)"),  # truncated to 1331 B before
    ("1.5", "not a whole number of bytes"),
])
def test_a_size_that_means_something_else_is_refused_with_why(size, fragment):
    with pytest.raises(CommbenchError) as info:
        parse(entry(sizes=["1K", size]))
    message = str(info.value)
    assert "run[0] (all_reduce): sizes[1]=" in message and repr(size) in message and fragment in message, message
    assert "\n" not in message


def test_sizes_in_bytes_binary_units_and_nccl_tests_letters_read_alike():
    for size, size_bytes in (("1M", 1 << 20), ("1MiB", 1 << 20), ("1m", 1 << 20), (1048576, 1 << 20),
                             ("1048576B", 1 << 20), ("0.5K", 512), ("1536KiB", 1536 << 10)):
        assert parse(entry(sizes=[size])).entries[0].sizes_bytes == (size_bytes,), size


def test_top_level_and_sweep_table_mistakes():
    with pytest.raises(CommbenchError, match=r"runs=.*unknown top-level key"):
        parse_sweep({"runs": [entry()]}, "x.toml")
    with pytest.raises(CommbenchError, match=r"backend='mpi'.*auto, nccl, gloo"):
        parse(entry(), sweep={"backend": "mpi"})
    with pytest.raises(CommbenchError, match=r"nproc=0"):
        parse(entry(), sweep={"nproc": 0})
    with pytest.raises(CommbenchError, match=r"\[defaults\]: collective="):
        parse(entry(), defaults={"collective": "all_reduce"})
    with pytest.raises(CommbenchError, match="no \\[\\[run\\]\\] entries"):
        parse()


def test_toml_syntax_error_names_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[run]]\ncollective = \n")
    with pytest.raises(CommbenchError, match="not valid TOML"):
        load_sweep(str(bad))


def test_entry_the_world_cannot_run_is_refused_at_planning():
    spec = parse(entry(), entry(collective="broadcast", root=5))
    with pytest.raises(CommbenchError, match=r"run\[1\] \(broadcast\) on 4 ranks: root=5 is invalid"):
        plan_sweep(spec, 4, backend="gloo")


@pytest.mark.parametrize("run, defaults, needle", [  # the file's keys, not `commbench bench`'s options
    (entry(group_sizes=[8]), {}, "run[0] (all_reduce) on 4 ranks: group_sizes=8 is invalid"),
    (entry(), {"ranks_per_rack": 3}, "on 4 ranks: ranks_per_rack=3 is invalid"),
    (entry(op="avg", dtype="int32"), {}, "op=avg with dtype int32 is not possible on gloo"),
])
def test_planning_errors_name_the_sweep_key(run, defaults, needle):
    with pytest.raises(CommbenchError) as info:
        plan_sweep(parse(run, defaults=defaults), 4, backend="gloo")
    assert needle in str(info.value) and "--" not in str(info.value), str(info.value)


def test_options_of_the_command_line_stay_options():
    with pytest.raises(CommbenchError, match=r"needs at least 2 ranks, got 1 \(use --nproc 2 or more\)"):
        plan_sweep(parse(entry(collective="sendrecv")), 1, backend="gloo")


def test_point_keys_are_unique_and_stable():
    spec = parse(entry(), entry(sizes=["64K", "1M"]))
    points = plan_sweep(spec, 2, backend="gloo")
    keys = [p.key for p in points]
    assert len(keys) == len(set(keys)) == 3  # 64K planned twice is measured once
    again = plan_sweep(parse(entry(sizes=["64K", "1M"]), entry()), 2, backend="gloo")
    assert {p.key for p in again} == set(keys)


@pytest.mark.parametrize("path", sorted(glob.glob("sweeps/*.toml")))
def test_shipped_files_plan_for_their_world(path):
    spec = load_sweep(path)
    assert spec.world_size and spec.description
    points = plan_sweep(spec, spec.world_size, backend=spec.backend if spec.backend != "auto" else "gloo")
    assert points


def test_dry_run_plans_for_the_nproc_the_launch_would_start():
    """`sweep F --nproc 3 --dry-run` passed (planned for the file's world_size, 4) while `sweep F --nproc 3`
    then failed: the dry run plans for --nproc when given, as the launch runs it."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    runner = CliRunner()
    refused = runner.invoke(app, ["sweep", "ci-small", "--dry-run", "--nproc", "3"])
    assert refused.exit_code == 2 and "on 3 ranks: ranks_per_rack=2 is invalid" in refused.output, refused.output
    assert len(refused.output.strip().splitlines()) == 1
    planned = runner.invoke(app, ["sweep", "ci-small", "--dry-run", "--json", "--nproc", "2"])
    assert planned.exit_code == 0 and '"world_size": 2' in planned.output, planned.output
    for args in (["--world-size", "4", "--nproc", "2"], []):  # --world-size first; else the file's world_size
        chosen = runner.invoke(app, ["sweep", "ci-small", "--dry-run", "--json", *args])
        assert chosen.exit_code == 0 and '"world_size": 4' in chosen.output, chosen.output


def header_of(path: str) -> str:
    """The comment block a shipped sweep file opens with (what it answers, how to launch it)."""
    lines = []
    for line in open(path).read().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


@pytest.mark.parametrize("path", sorted(glob.glob("sweeps/*.toml")))
def test_shipped_headers_state_what_their_files_set(path):
    """nvl72-rack's header promised 256 experts while every entry sets 288."""
    import re

    spec = load_sweep(path)
    head = header_of(path)
    experts = {e.params["num_experts"] for e in spec.entries if "num_experts" in e.params}
    for number in re.findall(r"\b(\d+) experts", head):
        assert int(number) in experts, f"{path}: header says {number} experts, entries set {sorted(experts)}"
    for number in re.findall(r"\b(\d+) launches of the whole file", head):
        assert int(number) == len(spec.tuning), f"{path}: header says {number} launches, {len(spec.tuning)} combinations"


def test_a_copied_entry_or_size_is_refused_not_dropped():
    """A pasted [[run]] left unchanged (or one differing only in what no point key holds, such as check)
    planned nothing and the dry run said 'valid'; a size listed twice was measured once."""
    with pytest.raises(CommbenchError) as info:
        plan_sweep(parse(entry(), entry(sizes=["64K"], check=False)), 2, backend="gloo")
    assert ("run[1] (all_reduce) adds no point: every point it plans on 2 ranks is already planned by run[0]"
            in str(info.value)), str(info.value)
    with pytest.raises(CommbenchError, match=r"run\[0\] \(all_reduce\): sizes\[2\]=65536 is invalid: the same size "
                                             r"as sizes\[1\] \('64K'\)"):
        parse(entry(sizes=["1K", "64K", 65536]))
    assert len(plan_sweep(parse(entry(), entry(sizes=["64K", "1M"])), 2, backend="gloo")) == 3  # overlaps are fine


def test_defaults_params_go_to_the_entries_that_take_them_and_a_stray_one_names_defaults():
    """[defaults] itres = 5 was reported as 'run[0] (all_reduce): itres=5', a key run[0] does not hold;
    and a MoE parameter in [defaults] refused every all_reduce entry of the file."""
    with pytest.raises(CommbenchError) as info:
        parse(entry(), defaults={"itres": 5})
    assert "test.toml: [defaults]: itres=5 is invalid: no [[run]] entry takes it" in str(info.value), str(info.value)
    assert "run[0]" not in str(info.value)
    with pytest.raises(CommbenchError, match=r"\[defaults\]: hidden=64 is invalid: no \[\[run\]\] entry takes it"):
        parse(entry(), defaults={"hidden": 64})  # a MoE parameter in a file without MoE entries
    moe = {"collective": "moe_all_to_all", "tokens_per_rank": [8], "num_experts": 4, "top_k": 2}
    spec = parse(entry(), moe, {**moe, "hidden": 32}, defaults={"hidden": 64, "iters": 3})
    assert [e.params.get("hidden") for e in spec.entries] == [None, 64, 32] and spec.entries[0].iters == 3
    with pytest.raises(CommbenchError, match=r"run\[0\] \(all_reduce\): hidden=64 is invalid: unknown key"):
        parse(entry(hidden=64), moe)  # in the entry itself it is still that entry's mistake


def test_dry_run_with_out_checks_the_file_as_the_launch_would(tmp_path):
    """`sweep F --dry-run -O FILE` said 'valid' where `sweep F -O FILE` then refused FILE (it held records,
    or another sweep's with --resume, or was not a file one can write); -O was ignored."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.results.records import JsonlWriter, Measurement, RunHeader
    from commbench.sweep import load_sweep, plan_sweep
    from commbench.sweep.resume import sweep_identity

    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nbackend = "gloo"\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K", "4K"]\n')
    spec = load_sweep(str(sweep_file))
    first = plan_sweep(spec, 2, backend="gloo")[0]
    out = tmp_path / "out.jsonl"
    header = RunHeader(run_id="r1", started_at="2025-01-01T00:00:00+00:00", argv=["commbench", "sweep"],
                       commbench_version="0", python_version="3", torch_version=None, nccl_version=None,
                       cuda_version=None, cupy_version=None, backend="gloo", world_size=2, hostnames=["h"],
                       devices=[], nccl_env={}, launcher="local", sweep_identity=sweep_identity(spec, 2, "gloo"))
    with JsonlWriter(str(out)) as writer:
        writer.write(header)
        writer.write(Measurement(run_id="r1", collective="all_reduce", backend="gloo", size_bytes=1024, count=256,
                                 dtype="float32", op="sum", in_place=False, world_size=2, group_size=2, iters=20,
                                 warmup_iters=5, time_us_median=10.0, point_key=first.key))
    runner = CliRunner()
    dry = ["sweep", str(sweep_file), "--dry-run", "--nproc", "2"]
    held = runner.invoke(app, [*dry, "-O", str(out)])
    assert held.exit_code == 2 and "already holds records: pass --resume" in held.output, held.output
    resumed = runner.invoke(app, [*dry, "-O", str(out), "--resume"])
    assert resumed.exit_code == 0 and "--resume: 1 of these point(s) are already in" in resumed.output, resumed.output
    other = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--nproc", "4", "-O", str(out), "--resume"])
    assert other.exit_code == 2 and "is refused: it holds sweep identity" in other.output, other.output
    blocked = runner.invoke(app, [*dry, "-O", str(sweep_file / "x.jsonl")])
    assert blocked.exit_code == 2 and "is a file, not a folder" in blocked.output, blocked.output
    fresh = tmp_path / "new" / "out.jsonl"
    assert runner.invoke(app, [*dry, "-O", str(fresh)]).exit_code == 0 and not fresh.parent.exists()  # touches nothing
    json.loads(runner.invoke(app, [*dry, "--json", "-O", str(out), "--resume"]).output)


def _sweep_header(run_id: str, backend: str, identity: str):
    from commbench.results.records import RunHeader
    return RunHeader(run_id=run_id, started_at="2025-01-01T00:00:00+00:00", argv=["commbench", "sweep"],
                     commbench_version="0", python_version="3", torch_version=None, nccl_version=None,
                     cuda_version=None, cupy_version=None, backend=backend, world_size=2, hostnames=["h"],
                     devices=[], nccl_env={}, launcher="local", sweep_identity=identity)


def test_dry_run_json_counts_every_tuning_combination_and_what_resume_skips(tmp_path):
    """Probe Q: `sweep --dry-run --json` left out the NCCL tuning combinations the text lists (the launch runs every
    point once per combination) and the --resume count; estimated_total_s was one pass. And `sweep F --resume` of
    a tuned sweep refused the file its own launch wrote: each combination's header carries the combination's
    sweep identity (runner.run_sweep_on_backend hashes combo_sweep), not the file's."""
    import json

    import jsonschema
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.results.records import JsonlWriter, Measurement
    from commbench.sweep.resume import sweep_identity
    from commbench.sweep.tuned_sweep import combo_sweep

    schema = json.loads((pathlib.Path(__file__).resolve().parents[1] / "commbench" / "data" / "schemas"
                         / "sweep-plan.schema.json").read_text())
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nbackend = "nccl"\nnccl_algo = ["ring", "tree"]\n'
                          '[[run]]\ncollective = "all_reduce"\nsizes = ["1K", "4K", "16K"]\n')
    dry = ["sweep", str(sweep_file), "--dry-run", "--world-size", "2", "--json"]
    runner = CliRunner()
    result = runner.invoke(app, dry)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    assert doc["tuning_combinations"] == ["NCCL default", "ring/*/*", "tree/*/*"]
    assert len(doc["points"]) == 3 and doc["num_points_total"] == 9 and doc["resume"] is None
    assert doc["estimated_pass_s"] == pytest.approx(sum(p["estimated_s"] for p in doc["points"]))
    assert doc["estimated_total_s"] == pytest.approx(3 * doc["estimated_pass_s"])

    # a file one combination's launch wrote: its header's identity is the combination's sweep
    spec = load_sweep(str(sweep_file))
    tree = combo_sweep(spec, spec.tuning[2])
    first = plan_sweep(tree, 2, backend="nccl")[0]
    out = tmp_path / "out.jsonl"
    with JsonlWriter(str(out)) as writer:
        writer.write(_sweep_header("r1", "nccl", sweep_identity(tree, 2, "nccl")))
        writer.write(Measurement(run_id="r1", collective="all_reduce", backend="nccl", size_bytes=1024, count=256,
                                 dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, iters=20,
                                 warmup_iters=5, time_us_median=10.0, point_key=first.key,
                                 params=dict(tree.entries[0].params)))
    resumed = runner.invoke(app, [*dry, "-O", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    doc = json.loads(resumed.stdout)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    assert doc["resume"] == {"out": str(out), "num_points_recorded": 1, "num_points_to_measure": 8}
    text = runner.invoke(app, [*dry[:-1], "-O", str(out), "--resume"])
    assert text.exit_code == 0 and "--resume: 1 of the 9 point(s) of all 3 combinations" in text.output, text.output
    assert "x 3 NCCL tuning combination(s) = 9 point(s)" in text.output


@pytest.mark.parametrize("written_by", ["this", "earlier"])
def test_resume_survives_reordered_entries_as_the_point_keys_do(tmp_path, written_by):
    # the point keys name what was measured, not where the entry sits (plan.py), but the sweep identity hashed
    # the entries in order: a sweep file with its entries reordered was refused on --resume as another sweep.
    # A file written before (its identity of the entries in order) still resumes with its entries in that order.
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.results.records import JsonlWriter, RunHeader
    from commbench.sweep.resume import sweep_identity

    a = '[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n'
    b = '[[run]]\ncollective = "all_gather"\nsizes = ["2K"]\n'
    first, reordered = tmp_path / "ab.toml", tmp_path / "ba.toml"
    first.write_text('[sweep]\nbackend = "gloo"\n' + a + b)
    reordered.write_text('[sweep]\nbackend = "gloo"\n' + b + a)
    identity = sweep_identity(load_sweep(str(first)), 2, "gloo", ordered=written_by == "earlier")
    out = tmp_path / "out.jsonl"
    with JsonlWriter(str(out)) as writer:
        writer.write(RunHeader(run_id="r1", started_at="2025-01-01T00:00:00+00:00", argv=["commbench", "sweep"],
                               commbench_version="0", python_version="3", torch_version=None, nccl_version=None,
                               cuda_version=None, cupy_version=None, backend="gloo", world_size=2, hostnames=["h"],
                               devices=[], nccl_env={}, launcher="local", sweep_identity=identity))
    runner = CliRunner()
    for sweep_file in ((first, reordered) if written_by == "this" else (first,)):
        resumed = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--nproc", "2", "-O", str(out),
                                      "--resume"])
        assert resumed.exit_code == 0, resumed.output
    changed = tmp_path / "changed.toml"
    changed.write_text('[sweep]\nbackend = "gloo"\n' + b + a.replace("1K", "4K"))
    refused = runner.invoke(app, ["sweep", str(changed), "--dry-run", "--nproc", "2", "-O", str(out), "--resume"])
    assert refused.exit_code == 2 and "is refused: it holds sweep identity" in refused.output, refused.output


@pytest.mark.parametrize("collective", ["all_reduce", "broadcast", "reduce"])
def test_the_point_says_the_form_it_measures_and_out_of_place_is_asked_as_bench_asks_it(collective):
    """all_reduce, broadcast and reduce are in-place unless asked otherwise (bench --out-of-place): a sweep entry
    without in_place measured in-place but its point key and dry run said out-of-place; out_of_place = true now
    measures that form, and the key, the description and the planned spec agree with what is measured."""
    from collectives import get_collective
    from commbench.sweep.plan import how_measured
    plain, oop = parse(entry(collective=collective), entry(collective=collective, out_of_place=True)).entries
    points = plan_sweep(parse(entry(collective=collective), entry(collective=collective, out_of_place=True)), 4,
                        backend="gloo")
    by_entry = {p.entry.index: p for p in points}
    first, second = (by_entry[e.index] for e in (plain, oop))
    measured = get_collective(collective)
    assert measured.is_in_place(first.point.spec) and not measured.is_in_place(second.point.spec)
    assert "/ip/" in first.key and "/oop/" in second.key
    assert "in-place" in how_measured(first) and "out-of-place" in how_measured(second)


@pytest.mark.parametrize("run, fragment", [
    (dict(collective="all_gather", out_of_place=True), "remove out_of_place"),
    (dict(collective="all_to_all", in_place=True), "has no in-place form"),
    (dict(collective="all_reduce", in_place=True, out_of_place=True), "exclude each other"),
])
def test_a_form_the_collective_does_not_have_is_refused_by_entry_and_field(run, fragment):
    with pytest.raises(CommbenchError, match=fragment):
        parse(entry(**run))


def test_op_is_read_in_either_case_as_bench_reads_it():
    """`op = "SUM"` (as nccl-tests users type it) is sum, as bench's -o and a sweep's dtype take either case."""
    assert [e.op for e in parse(entry(op="SUM"), entry(op="Max")).entries] == ["sum", "max"]


def test_a_dry_run_refuses_the_local_ranks_the_launch_refuses(tmp_path):
    # --dry-run --nproc 100000 said "valid" on a 2-core host whose launch refuses more than max(8, 4 x cores) gloo
    # ranks; --world-size still plans for another machine
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.comm.backends import max_local_ranks

    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nbackend = "gloo"\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n')
    too_many = max_local_ranks("gloo")[0] + 1
    runner = CliRunner()
    refused = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--nproc", str(too_many)])
    assert refused.exit_code == 2 and refused.output.startswith(f"error: --nproc={too_many} is invalid"), refused.output
    planned = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--world-size", str(too_many)])
    assert planned.exit_code == 0 and "valid:" in planned.output, planned.output
    # NCCL tuning axes with backend auto: on this CPU host auto is gloo, which the launch refuses them on
    auto = tmp_path / "auto.toml"
    auto.write_text('[sweep]\nbackend = "auto"\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n')
    tuned = runner.invoke(app, ["sweep", str(auto), "--dry-run", "--nproc", "2", "--nccl-algo", "ring"])
    if max_local_ranks("nccl")[0] == 0:   # no GPU here
        assert tuned.exit_code == 2 and "need an NCCL backend" in tuned.output, tuned.output
    elsewhere = runner.invoke(app, ["sweep", str(auto), "--dry-run", "--world-size", "2", "--nccl-algo", "ring"])
    assert elsewhere.exit_code == 0, elsewhere.output


def test_root_on_a_collective_without_one_is_refused_and_a_default_root_skips_it():
    """A run of all_reduce with root = 1 was accepted: the dry run listed it as 'sum, in-place, root 1', and beside a
    run without root the same all_reduce point was measured twice (two point keys, root0 and root1): two identical
    rows in the report. root is now refused where the collective has none (as op where it does not reduce), and a
    [defaults] root goes to broadcast and reduce only."""
    with pytest.raises(CommbenchError, match=r"run\[0\] \(all_reduce\): root=1 is invalid: all_reduce has no root"):
        parse(entry(root=1))
    spec = parse(entry(), entry(collective="broadcast"), defaults={"root": 1})
    assert [e.root for e in spec.entries] == [0, 1]
    assert parse(entry(collective="reduce", root=1)).entries[0].root == 1


@pytest.mark.parametrize("collective", ["all_reduce", "broadcast", "reduce"])
def test_in_place_false_asks_for_the_out_of_place_form_and_neither_form_is_refused(collective):
    """`in_place = false` on a collective in-place by default was accepted and measured in place (the dry run said
    'in-place'); it now asks for the out-of-place form, from an entry or [defaults], and beside out_of_place = false
    (neither form) it is refused naming the entry."""
    from commbench.sweep.plan import how_measured
    spec = parse(entry(collective=collective, in_place=False), entry(collective="all_gather", in_place=False))
    assert [(e.in_place, e.out_of_place) for e in spec.entries] == [(False, True), (False, False)]
    point = next(p for p in plan_sweep(spec, 2, backend="gloo") if p.entry.index == 0)
    assert "/oop/" in point.key and "out-of-place" in how_measured(point)
    assert parse(entry(collective=collective), defaults={"in_place": False}).entries[0].out_of_place
    assert not parse(entry(collective=collective, in_place=True)).entries[0].out_of_place
    with pytest.raises(CommbenchError) as info:
        parse(entry(), entry(collective=collective, in_place=False, out_of_place=False))
    assert "run[1]" in str(info.value) and "in_place=false is invalid" in str(info.value), info.value


@pytest.mark.parametrize("defaults, field", [
    ({"iters": 0}, "iters"),
    ({"warmup_iters": -1}, "warmup_iters"),
    ({"dtypes": ["float33"]}, "dtypes"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"sizes": []}, "sizes"),
    ({"check": "yes"}, "check"),
    ({"in_place": True}, "in_place"),   # all_to_all has no in-place form: the entry takes it from [defaults]
])
def test_a_value_from_defaults_is_named_in_defaults(defaults, field):
    """`[defaults] iters = 0` was reported as `run[0] (all_reduce): iters=0`, a key that entry never wrote; the
    same value in the entry still names the entry."""
    runs = [{"collective": "all_to_all", "sizes": ["1K"]}] if field == "in_place" else [{"collective": "all_reduce"}]
    if field != "sizes":
        runs[0].setdefault("sizes", ["1K"])
    with pytest.raises(CommbenchError) as info:
        parse(*runs, defaults=defaults)
    message = str(info.value)
    assert message.startswith("sweep test.toml: [defaults], for run[0] (") and f": {field}=" in message, message
    with pytest.raises(CommbenchError) as info:
        parse({**runs[0], **defaults})
    assert str(info.value).startswith("sweep test.toml: run[0] ("), info.value


def test_the_files_nproc_is_checked_by_the_dry_run_and_named_by_the_launch(tmp_path):
    """`[sweep] nproc = 1000` passed --dry-run as 'valid' and the launch then refused `--nproc=1000`, an option never
    given; both now refuse it as the file's [sweep] nproc (--world-size still plans for another machine)."""
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.comm.backends import max_local_ranks

    too_many = max_local_ranks("gloo")[0] + 1
    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text(f'[sweep]\nbackend = "gloo"\nnproc = {too_many}\n[[run]]\ncollective = "all_reduce"\n'
                          'sizes = ["1K"]\n')
    runner = CliRunner()
    said = f"error: sweep {sweep_file}: [sweep] nproc={too_many} is invalid: allowed 1..{too_many - 1} on gloo"
    for args in (["--dry-run"], ["-O", str(tmp_path / "out.jsonl")]):
        refused = runner.invoke(app, ["sweep", str(sweep_file), *args])
        assert refused.exit_code == 2 and refused.output.startswith(said), refused.output
    assert not (tmp_path / "out.jsonl").exists()
    planned = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--world-size", "4"])
    assert planned.exit_code == 0 and "valid:" in planned.output, planned.output


def test_dry_run_lists_the_size_the_run_records_for_moe_points(tmp_path):
    # found from outside: the dry run listed moe_all_to_all's nominal tokens x top-k rows (4096 B) and estimated its
    # time from them, the run recorded the busiest rank's routed bytes (7424 B; 1680 -> 1920 B with a capacity)
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app

    runner = CliRunner()
    sweep_file = tmp_path / "mo.toml"
    sweep_file.write_text('[sweep]\nname="mo"\nbackend="gloo"\nnproc=3\n[defaults]\niters=2\nwarmup_iters=0\n'
                          'timeout_s=20\n[[run]]\ncollective="moe_all_to_all"\ntokens_per_rank=[16]\nhidden=64\n'
                          'num_experts=6\ntop_k=2\nrouting="zipf:1.2"\n[[run]]\ncollective="moe_all_to_all"\n'
                          'tokens_per_rank=[16]\nhidden=64\nnum_experts=6\ntop_k=2\nrouting="zipf:1.2"\n'
                          'capacity_factor=1.1\n')
    planned = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--json"])
    assert planned.exit_code == 0, planned.output
    points = json.loads(planned.output)["points"]
    assert all(p["size_basis"].startswith("recorded") for p in points)
    out = tmp_path / "mo.jsonl"
    ran = runner.invoke(app, ["sweep", str(sweep_file), "-O", str(out)])
    assert ran.exit_code == 0, ran.output
    recorded = [json.loads(line)["size_bytes"] for line in out.read_text().splitlines()
                if json.loads(line)["record_type"] == "measurement"]
    assert [p["size_bytes"] for p in points] == recorded and recorded != [16 * 2 * 64 * 2] * 2


def test_dry_run_names_a_moe_size_too_costly_to_route_as_nominal(tmp_path):
    """Routing 288 experts x 288 ranks x 4096 tokens takes about 20 s per point: the dry run lists such a point at its
    nominal size and says so (table and JSON), rather than routing it (the shipped multi-rack dry run ran past 300 s)."""
    import json

    from typer.testing import CliRunner

    from collectives.moe_all_to_all import DRY_RUN_ROUTED_SCORES
    from commbench.cli.app import app

    tokens = DRY_RUN_ROUTED_SCORES // (64 * 64) + 1   # 64 ranks x 64 experts: one score past the budget
    sweep_file = tmp_path / "big.toml"
    sweep_file.write_text('[sweep]\nname="big"\nbackend="gloo"\n[[run]]\ncollective="moe_all_to_all"\n'
                          f'tokens_per_rank=[{tokens}]\nhidden=16\nnum_experts=64\ntop_k=2\n')
    runner = CliRunner()
    planned = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--json", "--world-size", "64"])
    assert planned.exit_code == 0, planned.output
    (point,) = json.loads(planned.output)["points"]
    assert point["size_basis"].startswith("nominal") and point["size_bytes"] == tokens * 2 * 16 * 2
    table = runner.invoke(app, ["sweep", str(sweep_file), "--dry-run", "--world-size", "64"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and " nominal" in table.output and "sizes marked nominal" in table.output, table.output


@pytest.mark.parametrize("key, value", [("dtype", "int8"), ("dtypes", ["float32"]), ("dtype", "bf16")])
def test_moe_entry_refuses_dtype_as_bench_does(key, value):
    """Probe Q 5: a dtype/dtypes key on a moe_all_to_all entry was silently ignored (the dry run listed the point as
    bfloat16), while bench -d refuses it and the same entry refuses op and in_place. Refused now, naming the field,
    its value and the keys that set the rows' dtypes."""
    moe = {"collective": "moe_all_to_all", "tokens_per_rank": [8], "hidden": 64, "num_experts": 4, "top_k": 2}
    with pytest.raises(CommbenchError) as info:
        parse(entry(), {**moe, key: value})
    message = str(info.value)
    assert f"run[1] (moe_all_to_all): {key}=" in message and "dispatch_dtype" in message, message
    assert "combine_dtype" in message and f"remove {key}" in message, message


def test_defaults_dtype_goes_to_entries_that_take_one_and_is_refused_where_none_does():
    """A [defaults] dtype goes to the entries that take one (as [defaults] op); in a file of MoE entries only, no entry
    takes it: refused naming [defaults] rather than ignored."""
    moe = {"collective": "moe_all_to_all", "tokens_per_rank": [8], "hidden": 64, "num_experts": 4, "top_k": 2}
    spec = parse(entry(), moe, defaults={"dtypes": ["bf16"]})
    assert spec.entries[0].dtypes == ("bfloat16",)
    with pytest.raises(CommbenchError, match=r"\[defaults\]: dtype='bf16' is invalid: no \[\[run\]\] entry takes it"):
        parse(moe, defaults={"dtype": "bf16"})


MOE = {"collective": "moe_all_to_all", "hidden": 64, "num_experts": 4, "top_k": 2}


@pytest.mark.parametrize("value", [0, [], False, "", [64, 0]])
def test_a_given_tokens_per_rank_is_checked_never_read_as_the_default(value):
    """tokens_per_rank = 0 / [] / false / "" planned the default 128, 512, 2048 (`options.get(...) or DEFAULT` in
    moe.params.sweep_params); only a key left out takes the default (probe U, session 33)."""
    with pytest.raises(CommbenchError) as info:
        plan_sweep(parse({**MOE, "tokens_per_rank": value}), 2, backend="gloo")
    message = str(info.value)
    assert "run[0] (moe_all_to_all) on 2 ranks: tokens_per_rank=" in message and "--" not in message, message
    left_out = plan_sweep(parse(dict(MOE)), 2, backend="gloo")
    assert [p.point.spec.params["tokens_per_rank"] for p in left_out] == [128, 512, 2048]


@pytest.mark.parametrize("run, needle", [
    ({**MOE, "preset": ""}, "preset='' is invalid: allowed: deepseek-v3"),
    ({**MOE, "preset": False}, "preset=False is invalid: allowed: deepseek-v3"),
    (entry(group_sizes=""), "group_sizes='' is invalid"),
])
def test_a_given_empty_value_is_refused_not_taken_as_the_default(run, needle):
    """preset = "" / false planned no preset, group_sizes = "" planned pow2: a given value is checked."""
    with pytest.raises(CommbenchError) as info:
        plan_sweep(parse(run), 2, backend="gloo")
    assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize("layout", [[], "", False, 0, ["contiguous", ""]])
def test_a_given_group_layout_that_names_no_layout_is_refused(layout):
    """group_layout = [] (or false, 0, "") measured the contiguous layout (`group_layout or "contiguous"` in
    measure.subgroups.rack_specs); only a layout left out is contiguous (probe U, session 33)."""
    with pytest.raises(CommbenchError, match=r"run\[0\] \(all_reduce\): group_layout=.* is invalid"):
        parse(entry(group_sizes=[2], group_layout=layout))
    assert parse(entry(group_sizes=[2])).entries[0].subgroups.layouts == ("contiguous",)


@pytest.mark.parametrize("dtypes, index, given", [(["float32", "fp32"], 1, "fp32"), (["bf16", "float16", "bfloat16"], 2,
                                                                                   "bfloat16")])
def test_a_dtype_given_twice_or_by_an_alias_is_refused_as_a_copied_size_is(dtypes, index, given):
    """dtypes = ["float32", "fp32"] planned one point and the dry run said nothing: the alias was merged silently."""
    with pytest.raises(CommbenchError, match=rf"dtypes\[{index}\]='{given}' is invalid: the same dtype as dtypes\["):
        parse(entry(dtypes=dtypes))


def test_a_toml_file_saved_with_a_byte_order_mark_is_named_as_such(tmp_path):
    """tomllib refuses a leading U+FEFF as 'Invalid statement (at line 1, column 1)', which names no cause."""
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf[[run]]\ncollective = \"all_reduce\"\nsizes = [\"1K\"]\n")
    with pytest.raises(CommbenchError, match="byte-order mark .*save it as UTF-8 without BOM"):
        load_sweep(str(bom))
