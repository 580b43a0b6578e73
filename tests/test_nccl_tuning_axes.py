"""NCCL tuning axes: parsing, the process-per-combination launcher (with a fake rank that records the
environment each process saw), skipped combinations, and the refusal on gloo."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo, combo_from_params, parse_axes
from commbench.errors import CommbenchError
from commbench.measure.bench import BenchConfig, BenchOutcome
from commbench.measure.harness import LoopOptions
from commbench.results.records import JsonlWriter, Measurement, headers, measurements, read_records
from commbench.sweep.combos import combo_environ, skipped_header
from commbench.sweep.tuned_bench import run_tuned_bench, summary_lines

ENV_LOG = "COMMBENCH_TEST_ENV_LOG"


def fake_rank(rank_env, config: BenchConfig) -> BenchOutcome:
    """Stands in for run_bench_rank: logs what this process saw, refuses NVLS like NCCL would."""
    seen = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    with open(os.environ[ENV_LOG], "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "rank": rank_env.rank, "port": rank_env.master_port, "env": seen,
                              "params": config.params}) + "\n")
    if seen.get("NCCL_ALGO") == "NVLS":
        raise RuntimeError("NCCL error: invalid usage: no algorithm/protocol available\nmore detail")
    if rank_env.rank == 0:
        combo = combo_from_params(config.params)
        header = skipped_header(backend="nccl", world_size=rank_env.world_size, combo=combo, env=dict(os.environ),
                                argv=[], launcher="fake", reason="")
        with JsonlWriter(config.output_path) as writer:
            writer.write(header)
            for size in config.sizes_bytes:
                writer.write(Measurement(run_id=header.run_id, collective=config.collective, backend="nccl",
                                         size_bytes=size, count=size // 4, dtype="float32", op="sum", in_place=False,
                                         world_size=rank_env.world_size, group_size=rank_env.world_size, iters=1,
                                         warmup_iters=0, time_us_median=10.0 + size / 1e3,   # grows with size: a fit
                                         params=dict(config.params)))             # has a bandwidth to find
    return BenchOutcome(num_points=len(config.sizes_bytes), num_wrong=0, error=None)


def test_parse_axes_grid_with_baseline_first():
    combos = parse_axes("ring,tree", "ll,simple", None)
    assert combos[0] == TuningCombo()
    assert len(combos) == 5 and TuningCombo(algo="tree", proto="ll") in combos
    assert parse_axes(None, None, None) == []
    assert parse_axes("default,ring", None, "4,default") == [TuningCombo(), TuningCombo(channels=4),
                                                              TuningCombo(algo="ring", channels=4),
                                                              TuningCombo(algo="ring")]


@pytest.mark.parametrize("algo, proto, channels, message", [
    ("Ring2", None, None, "--nccl-algo='Ring2' is invalid"),  # echoed as typed (it was lower-cased)
    (None, "ll64", None, "--nccl-proto='ll64' is invalid"),
    (None, None, "0", "--nccl-channels='0' is invalid"),
    (None, None, "4,65", "--nccl-channels='65' is invalid: allowed channel counts from 1 to 64"),
])
def test_parse_axes_names_the_option(algo, proto, channels, message):
    with pytest.raises(CommbenchError, match=message):
        parse_axes(algo, proto, channels)


def test_channels_above_ncclmaxchannels_are_refused_in_one_line_on_bench_and_sweep():
    """NCCL has at most MAXCHANNELS = 64 channels (src/include/device.h): 65 is no setting it can honour."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    for args in (["sweep", "ci-small", "--dry-run", "--nccl-channels", "8,65"],
                 ["bench", "all_reduce", "--nccl-channels", "128"], ["sweep", "ci-small", "--nccl-channels", "100"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert "--nccl-channels=" in result.output and "from 1 to 64" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_combo_env_and_params():
    combo = TuningCombo(algo="nvls_tree", proto="ll128", channels=8)
    assert combo.env() == {"NCCL_ALGO": "NVLSTree", "NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "8",
                           "NCCL_MAX_NCHANNELS": "8"}
    assert combo_from_params(combo.params()) == combo
    assert combo_from_params({}) == TuningCombo()


def test_combo_environ_drops_inherited_settings_and_moves_the_port_under_a_launcher():
    base = {"NCCL_ALGO": "Tree", "NCCL_DEBUG": "INFO", "RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500",
            "TORCHELASTIC_USE_AGENT_STORE": "True"}
    env = combo_environ(TuningCombo(), base, port=40123)   # the port CombinationPorts shared
    assert "NCCL_ALGO" not in env and env["NCCL_DEBUG"] == "INFO"
    assert env["MASTER_PORT"] == "40123" and "TORCHELASTIC_USE_AGENT_STORE" not in env
    assert combo_environ(TuningCombo(proto="ll"), {"MASTER_PORT": "1"})["MASTER_PORT"] == "1"  # local: untouched


def _config(tmp_path, sizes=(1024, 4096)) -> BenchConfig:
    return BenchConfig(collective="all_reduce", sizes_bytes=sizes, backend="gloo", loop=LoopOptions(iters=1),
                       output_path=str(tmp_path / "tuned.jsonl"), timeout_s=30)


def _log(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "env.log").read_text().splitlines()]


def test_each_combination_runs_in_its_own_process_with_its_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_LOG, str(tmp_path / "env.log"))
    monkeypatch.setenv("NCCL_PROTO", "LL")  # a user's setting must not leak into the baseline
    combos = parse_axes("ring,nvls", None, "4")
    results = run_tuned_bench(_config(tmp_path), combos, nproc=1, start_method="fork", rank_fn=fake_rank)
    seen = _log(tmp_path)
    assert [s["env"].get("NCCL_ALGO") for s in seen] == [None, "Ring", "NVLS"]
    assert seen[0]["env"] == {} and seen[1]["env"]["NCCL_MAX_NCHANNELS"] == "4" == seen[1]["env"]["NCCL_MIN_NCHANNELS"]
    assert len({s["pid"] for s in seen} | {os.getpid()}) == 4  # a fresh process per combination
    assert [s["params"]["nccl_algo"] for s in seen] == ["default", "ring", "nvls"]
    assert [r.skipped_reason for r in results][:2] == [None, None]
    assert results[2].skipped_reason == "NCCL error: invalid usage: no algorithm/protocol available"
    records = read_records([tmp_path / "tuned.jsonl"])
    assert len(headers(records)) == 3  # one file, one header per combination
    skipped = [m for m in measurements(records) if m.status == "skipped"]
    assert [m.size_bytes for m in skipped] == [1024, 4096]
    assert all("NCCL refused nvls/*/4: NCCL error: invalid usage" in m.error for m in skipped)
    assert skipped[0].params["nccl_channels"] == 4
    assert headers(records)[-1].nccl_env["NCCL_ALGO"] == "NVLS"
    assert summary_lines(results)[2].startswith("skipped nvls/*/4: NCCL error")


def _outside_rank(rank: int, port: int, config: BenchConfig, log: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True", **{ENV_LOG: log})
    run_tuned_bench(config, [TuningCombo(), TuningCombo(proto="simple")], nproc=None, start_method="fork",
                    rank_fn=fake_rank)


def test_under_an_outside_launcher_every_rank_runs_each_combination_on_its_own_port(tmp_path):
    import multiprocessing

    import torch.distributed as dist

    from tests.distributed import free_port

    port = free_port()   # torchrun's agent serves the launch's store there (TORCHELASTIC_USE_AGENT_STORE)
    agent_store = dist.TCPStore("127.0.0.1", port, 2, True, wait_for_workers=False)
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=_outside_rank, args=(r, port, _config(tmp_path, sizes=(64,)),
                                                         str(tmp_path / "env.log"))) for r in (0, 1)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(60)
    assert [p.exitcode for p in ranks] == [0, 0]
    seen = sorted((s["env"].get("NCCL_PROTO", "-"), s["rank"], s["port"]) for s in _log(tmp_path))
    assert [(proto, rank) for proto, rank, _ in seen] == [("-", 0), ("-", 1), ("Simple", 0), ("Simple", 1)]
    ports = [port for _, _, port in seen]   # rank 0's picks, shared through the launch's store (CombinationPorts)
    assert ports[0] == ports[1] != ports[2] == ports[3] and port not in ports, seen
    del agent_store
    assert len(headers(read_records([tmp_path / "tuned.jsonl"]))) == 2  # rank 0 writes, once per combination


def test_axes_are_refused_on_gloo_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--backend", "gloo", "--nccl-algo", "ring",
                                      "-J", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert "need an NCCL backend, got --backend=gloo" in result.output
    assert not (tmp_path / "x.jsonl").exists()


def test_sweep_runs_once_per_combination_into_one_resumable_file(tmp_path):
    """The real sweep runner on gloo (the CLI refuses the axes there; the launcher itself does not care)."""
    from commbench.sweep import SweepJob, parse_sweep
    from commbench.sweep.tuned_sweep import run_tuned_sweep

    spec = parse_sweep({"sweep": {"nccl_proto": ["ll"]},
                        "run": [{"collective": "all_reduce", "sizes": ["1K", "4K"], "iters": 2, "warmup_iters": 0,
                                 "timeout_s": 30}]})
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(tmp_path / "s.jsonl"), show_progress=False)
    results = run_tuned_sweep(job, nproc=1, start_method="fork")
    assert [r.skipped_reason for r in results] == [None, None] and [r.num_recorded for r in results] == [2, 2]
    records = read_records([tmp_path / "s.jsonl"])
    assert [h.nccl_env.get("NCCL_PROTO") for h in headers(records)] == [None, "LL"]
    points = measurements(records)
    assert [m.params["nccl_proto"] for m in points] == ["default", "default", "ll", "ll"]
    assert len({m.point_key for m in points}) == 4
    again = run_tuned_sweep(SweepJob(sweep=spec, backend="gloo", output_path=job.output_path, resume=True,
                                     show_progress=False), nproc=1, start_method="fork")
    assert [r.num_recorded for r in again] == [0, 0]
    assert len(measurements(read_records([tmp_path / "s.jsonl"]))) == 4


def test_sweep_file_axes_are_checked_and_refused_on_gloo(tmp_path):
    from commbench.sweep import parse_sweep

    with pytest.raises(CommbenchError, match=r"\[sweep\] nccl_algo='rings' is invalid"):
        parse_sweep({"sweep": {"nccl_algo": ["rings"]}, "run": [{"collective": "all_reduce", "sizes": ["1K"]}]})
    sweep_file = tmp_path / "t.toml"
    sweep_file.write_text('[sweep]\nnccl_channels = [4, 8]\n[[run]]\ncollective = "all_reduce"\nsizes = ["1K"]\n')
    result = CliRunner().invoke(app, ["sweep", str(sweep_file), "--backend", "gloo", "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2 and "need an NCCL backend, got --backend=gloo" in result.output


def test_sweep_dry_run_refuses_axes_on_gloo_as_the_launch_does(tmp_path):
    """--dry-run validated a gloo sweep with NCCL axes (exit 0) that the launch then refused (exit 2)."""
    on_gloo = tmp_path / "g.toml"
    on_gloo.write_text('[sweep]\nbackend = "gloo"\nnccl_algo = ["ring"]\n[[run]]\ncollective = "all_reduce"\n'
                       'sizes = ["1K"]\n')
    for args in (["sweep", str(on_gloo), "--dry-run"], ["sweep", str(on_gloo), "--dry-run", "--json"],
                 ["sweep", "ci-small", "--dry-run", "--backend", "gloo", "--nccl-algo", "ring"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "need an NCCL backend, got --backend=gloo" in result.output, args
    result = CliRunner().invoke(app, ["sweep", str(on_gloo), "--dry-run", "--backend", "nccl"])
    assert result.exit_code == 0, result.output


def test_fit_keys_forced_algorithms_and_leaves_out_forced_channel_counts():
    from commbench.costmodel.fit_records import collect_points

    def record(combo):
        return Measurement(run_id="r", collective="all_reduce", backend="nccl", size_bytes=1 << 20, count=1 << 18,
                           dtype="float32", op="sum", in_place=False, world_size=4, group_size=4, iters=5,
                           warmup_iters=1, time_us_median=100.0, params=combo.params())

    _, skipped = collect_points([record(TuningCombo(algo="ring", proto="ll", channels=8))], {})
    assert any("forced NCCL channel count" in s for s in skipped)
    curves, skipped = collect_points([record(TuningCombo()), record(TuningCombo(algo="ring", proto="ll"))], {})
    assert not any("forced NCCL" in s for s in skipped) and curves


def test_summary_exits_1_only_when_the_baseline_failed(capsys):
    import typer

    from commbench.cli.nccl_tuner import print_combinations
    from commbench.sweep.combos import ComboResult

    refused = ComboResult(combo=TuningCombo(algo="nvls", proto="simple"), num_recorded=0, skipped_reason="no NVLS")
    print_combinations([ComboResult(combo=TuningCombo(), num_recorded=3, skipped_reason=None), refused], "r.jsonl")
    out = capsys.readouterr().out
    assert "skipped nvls/simple/*: no NVLS" in out and "done: 2 combination(s)" in out
    with pytest.raises(typer.Exit) as stop:
        print_combinations([ComboResult(combo=TuningCombo(), num_recorded=0, skipped_reason="boom")], "r.jsonl")
    assert stop.value.exit_code == 1


def test_too_many_local_ranks_fail_before_any_combination_starts(tmp_path):
    from commbench.sweep.tuned_bench import world_size_of

    # one NCCL rank per visible GPU; with none visible it cannot launch here ('allowed 1..0' was printed)
    with pytest.raises(CommbenchError, match=r"--nproc=999 (is invalid: allowed 1\.\.\d+ on nccl|cannot launch here: "
                                             r"nccl runs one rank per visible GPU, and this machine has none)"):
        world_size_of(999, "nccl")
    assert world_size_of(None, "gloo") == 2


def test_a_tuning_sweep_with_wrong_data_in_any_combination_exits_1(tmp_path, monkeypatch):
    """A tuning sweep ended 'done', exit 0, with wrong data in a forced combination (or NCCL's default):
    a refused combination is data, a wrong result is not."""
    import typer

    from commbench.cli.sweep import run_sweep_axes
    from commbench.sweep import SweepJob, parse_sweep
    from commbench.sweep import tuned_sweep
    from commbench.sweep.tuned_sweep import run_tuned_sweep, wrong_points

    spec = parse_sweep({"sweep": {"nccl_proto": ["ll"]},
                        "run": [{"collective": "all_reduce", "sizes": ["1K", "4K"], "iters": 2, "warmup_iters": 0,
                                 "timeout_s": 30}]})
    out = tmp_path / "s.jsonl"
    job = SweepJob(sweep=spec, backend="gloo", output_path=str(out), show_progress=False)
    results = run_tuned_sweep(job, nproc=1, start_method="fork")
    assert wrong_points(job, 1) == ()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    spoilt = next(i for i, r in enumerate(lines) if r.get("params", {}).get("nccl_proto") == "ll")
    lines[spoilt]["num_wrong"] = 3
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert wrong_points(job, 1) == ("*/ll/* 0:all_reduce float32 1 KiB: 3 wrong element(s)",)
    monkeypatch.setattr(tuned_sweep, "run_tuned_sweep", lambda job, nproc: results)
    monkeypatch.setattr("commbench.comm.nccl_tuning.refuse_on_backend", lambda backend, combos: None)
    with pytest.raises(typer.Exit) as stop:
        run_sweep_axes(job, 1, "")
    assert stop.value.exit_code == 1


def _wrong_under_ll(rank_env, config: BenchConfig) -> BenchOutcome:
    """fake_rank, whose records under a forced LL protocol found 3 wrong elements."""
    outcome = fake_rank(rank_env, config)
    if rank_env.rank == 0 and config.params.get("nccl_proto") == "ll":
        path = config.output_path
        lines = [json.loads(line) for line in open(path).read().splitlines()]
        lines[-1]["num_wrong"] = 3
        with open(path, "w") as out:
            out.write("".join(json.dumps(r) + "\n" for r in lines))
    return outcome


@pytest.mark.parametrize("rank_fn, exit_code", [(fake_rank, 0), (_wrong_under_ll, 1)])
def test_a_tuning_bench_with_wrong_data_in_any_combination_exits_1(tmp_path, monkeypatch, capsys, rank_fn, exit_code):
    """bench --nccl-proto ll ended 'done', exit 0, with wrong data in a forced combination (sweep exits 1 there);
    only this launch's records count (-J appends to a file that may hold an earlier run's wrong point)."""
    import typer

    from commbench.cli.bench import run_bench_axes
    from commbench.sweep import tuned_bench

    monkeypatch.setenv(ENV_LOG, str(tmp_path / "env.log"))
    config = _config(tmp_path)
    earlier = skipped_header(backend="nccl", world_size=1, combo=TuningCombo(), env={}, argv=[], launcher="fake", reason="")
    with JsonlWriter(config.output_path) as writer:
        writer.write(earlier)
        writer.write(Measurement(run_id=earlier.run_id, collective="all_reduce", backend="nccl", size_bytes=8, count=2,
                                 dtype="float32", op="sum", in_place=False, world_size=1, group_size=1, iters=1,
                                 warmup_iters=0, time_us_median=10.0, num_wrong=5))
    real = tuned_bench.run_tuned_bench
    monkeypatch.setattr(tuned_bench, "run_tuned_bench", lambda config, combos, nproc: real(
        config, combos, nproc=nproc, start_method="fork", rank_fn=rank_fn))
    if exit_code:
        with pytest.raises(typer.Exit) as stop:
            run_bench_axes(config, parse_axes(None, "ll", None), 1)
        assert stop.value.exit_code == 1
        err = " ".join(capsys.readouterr().err.split())
        assert "1 point(s) found wrong data" in err and "*/ll/* all_reduce float32 4 KiB: 3 wrong element(s)" in err, err
    else:
        run_bench_axes(config, parse_axes(None, "ll", None), 1)
        out = " ".join(capsys.readouterr().out.split())
        assert "done: 2 combination(s)" in out and "-O nccl_tuner.conf" in out, out


def _drop_combination(path, label: str) -> None:
    """The file as a launch stopped before `label` started leaves it: none of that combination's records."""
    lines = [json.loads(line) for line in open(path).read().splitlines()]
    gone = {r["run_id"] for r in lines if r["record_type"] == "header"
            and (r.get("nccl_tuning") or {}).get("combination") == label}
    assert gone, label
    with open(path, "w") as out:
        out.write("".join(json.dumps(r) + "\n" for r in lines if r["run_id"] not in gone))


def test_a_tuning_bench_cut_short_before_a_combination_started_says_which(tmp_path, monkeypatch):
    """bench --nccl-algo ring,tree stopped before tree started left default and ring, each whole: report, fit and
    nccl-tuner said nothing, and nccl-tuner's rules chose among two combinations as if tree had lost."""
    monkeypatch.setenv(ENV_LOG, str(tmp_path / "env.log"))
    config = _config(tmp_path)
    run_tuned_bench(config, parse_axes("ring,tree", None, None), nproc=2, start_method="fork", rank_fn=fake_rank)
    tuning = [h.nccl_tuning for h in headers(read_records([config.output_path]))]
    assert [t["combination"] for t in tuning] == ["NCCL default", "ring/*/*", "tree/*/*"]
    assert all(t["combinations"] == ["NCCL default", "ring/*/*", "tree/*/*"] for t in tuning)
    assert len({t["plan"] for t in tuning}) == 1
    whole = CliRunner().invoke(app, ["fit", config.output_path, "--json"])
    assert whole.exit_code == 0 and not any("tuning combination" in n for n in json.loads(whole.stdout)["notes"])
    _drop_combination(config.output_path, "tree/*/*")
    said = "plans 3 NCCL tuning combination(s) and holds 2: it was cut short before tree/*/* started"
    fit = CliRunner().invoke(app, ["fit", config.output_path, "--json"])
    assert any(said in n for n in json.loads(fit.stdout)["notes"]), fit.output
    report = CliRunner().invoke(app, ["report", config.output_path, "-O", str(tmp_path / "rep")])
    assert said in " ".join(report.output.split()), report.output
    conf = tmp_path / "t.conf"
    tuner = CliRunner().invoke(app, ["nccl-tuner", config.output_path, "-O", str(conf)])
    assert tuner.exit_code == 0, tuner.output
    out = " ".join(tuner.output.split())
    assert said in out and "a combination never measured may be faster than the one a rule names" in out
    assert "never measured may be faster" in conf.read_text()


def test_a_tuning_sweep_cut_short_is_said_until_resumed(tmp_path):
    """The real sweep runner on gloo: each combination's header (collect_header) names the launch's plan; a file
    missing a combination says so, and --resume (the same plan) measures it and the note goes."""
    from commbench.results.resumed import sweeps_cut_short
    from commbench.sweep import SweepJob, parse_sweep
    from commbench.sweep.tuned_sweep import run_tuned_sweep

    spec = parse_sweep({"sweep": {"nccl_proto": ["ll", "simple"]},
                        "run": [{"collective": "all_reduce", "sizes": ["1K"], "iters": 2, "warmup_iters": 0,
                                 "timeout_s": 30}]})
    out = str(tmp_path / "s.jsonl")
    run_tuned_sweep(SweepJob(sweep=spec, backend="gloo", output_path=out, show_progress=False, argv=("commbench",
                             "sweep", "t.toml")), nproc=1, start_method="fork")
    assert sweeps_cut_short(read_records([out])) == []
    _drop_combination(out, "*/simple/*")
    (line,) = sweeps_cut_short(read_records([out]))
    assert "plans 3 NCCL tuning combination(s) and holds 2: it was cut short before */simple/* started" in line
    assert "--resume` into the same file measures them" in line
    run_tuned_sweep(SweepJob(sweep=spec, backend="gloo", output_path=out, resume=True, show_progress=False),
                    nproc=1, start_method="fork")
    assert sweeps_cut_short(read_records([out])) == []


def test_sweep_dry_run_without_nproc_refuses_axes_where_auto_is_gloo_as_the_launch_does(tmp_path):
    """Probe Q 8: `sweep F --dry-run` (no --nproc; the file's nproc, backend auto) said 'valid' for a sweep with
    nccl_algo on a machine where auto is gloo, and listed it as a gloo sweep; `sweep F` then refused it (exit 2).
    --backend nccl and --world-size still plan for an NCCL machine from here."""
    from commbench.cli.sweep import dry_run_backend

    if dry_run_backend("auto") != "gloo":
        pytest.skip("auto resolves to NCCL on this machine")
    sweep_file = tmp_path / "nc.toml"
    sweep_file.write_text('[sweep]\nname = "t"\nnproc = 2\nnccl_algo = ["ring"]\n[[run]]\ncollective = "all_reduce"\n'
                          'sizes = ["4K"]\n')
    launch = CliRunner().invoke(app, ["sweep", str(sweep_file), "-O", str(tmp_path / "r.jsonl")])
    assert launch.exit_code == 2 and "need an NCCL backend" in launch.output, launch.output
    for args in (["--dry-run"], ["--dry-run", "--json"]):
        result = CliRunner().invoke(app, ["sweep", str(sweep_file), *args])
        assert result.exit_code == 2, (args, result.output)
        line = result.output.strip()
        assert line.startswith("error: ") and "need an NCCL backend" in line and "--backend=auto is gloo here" in line
        assert "\n" not in line, line
    for args in (["--dry-run", "--backend", "nccl"], ["--dry-run", "--world-size", "2"]):
        assert CliRunner().invoke(app, ["sweep", str(sweep_file), *args]).exit_code == 0, args
