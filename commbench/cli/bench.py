"""`commbench bench COLLECTIVE`: nccl-tests-style sweep of one collective over message sizes."""

from __future__ import annotations

import dataclasses
import math
import sys
from contextlib import nullcontext
from typing import Annotated, Optional

import typer

from collectives import REGISTRY, get_collective
from commbench.measure.bench import BenchConfig, default_output_path, run_bench_rank, validate
from commbench.results.records import new_run_id
from commbench.cli.base import command, console, err_console, fail, renamed
from commbench.cli.nccl_flags import nccl_tests_loop, refuse_nccl_tests_flags
from commbench.results.nccl_tests_text import stopped_line
from commbench.results.render import styled
from commbench.measure.compare_backends import CompareConfig, parse_compare_backends, run_compare_rank
from commbench.comm.backend import reduce_op
from commbench.comm.backends import resolve_backend
from commbench.comm.job import check_job, run_job
from commbench.comm.launch import detect_rank_env
from commbench.errors import CommbenchError, Interrupted
from commbench.files import OutputLock, refuse_empty_path, refuse_writing_inputs, repair_torn_tail
from commbench.measure.harness import LoopOptions
from commbench.moe.params import cli_params as moe_cli_params
from commbench.measure.subgroups import with_rack_options
from commbench.comm.nccl_tuning import parse_axes, refuse_on_backend
from commbench.units import MEASURED_MAX_BYTES, SIZE_SUFFIXES, parse_size_bytes, size_range, size_step


def run_bench_axes(config: BenchConfig, combos: list, nproc: int | None) -> None:
    """Every NCCL tuning combination of the job in its own processes, into one results file; exit 1 when a
    point of any combination (NCCL's default included) found wrong data, as `sweep` does."""
    from commbench.cli.nccl_tuner import note_inherited_axes, print_combinations
    from commbench.sweep.tuned_bench import run_ids_in, run_tuned_bench, wrong_points_since

    note_inherited_axes()
    earlier = run_ids_in(config.output_path)
    results = run_tuned_bench(config, combos, nproc=nproc)
    print_combinations(results, config.output_path, wrong=wrong_points_since(config.output_path, earlier))


def note_appending(path: str) -> None:
    """One line where -O already holds results: the run goes after them as a run of its own (-J appends, as
    nccl-tests'), which compare and report count; never a silent second run in a file meant as one."""
    from pathlib import Path

    if Path(path).is_file() and Path(path).stat().st_size > 0:
        err_console.print(styled("[yellow]note:[/] --out={} already holds results: this run is appended after them "
                                 "as a run of its own (compare and report count every run; -O a new file for this "
                                 "run alone)", path), highlight=False, soft_wrap=True)


def first_failed(outcomes: dict) -> str | None:
    """The error of the rank that failed first among `outcomes` ({rank: outcome with error and failed_at_s}), naming
    it where others failed after it; None where none failed."""
    # the rank that failed first is the cause; its peers then fail on the broken connection ('Connection closed
    # by peer'), so rank 0's error alone hid it
    failed = sorted((math.inf if o.failed_at_s is None else o.failed_at_s, rank, o.error)
                    for rank, o in outcomes.items() if o.error)
    if not failed:
        return None
    _, rank, error = failed[0]
    return (f"rank {rank} failed first: {error} ({len(failed) - 1} other rank(s) failed after it)"
            if len(failed) > 1 else error)


def report_outcomes(outcomes: dict, output_path: str) -> None:
    """Exit non-zero, with one line, when a point failed or returned wrong data."""
    first = first_failed(outcomes)
    if first:
        raise fail(f"{first}; results measured so far are in {output_path}", exit_code=1)
    wrong = max((o.num_wrong for o in outcomes.values()), default=0)
    if wrong:
        raise fail(f"{wrong} wrong element(s) in the data check (see #wrong in {output_path})", exit_code=1)


def refuse_size_options(collective: str, given: dict) -> None:
    """Size and dtype options a workload swept by its own parameters would ignore: refused in one line."""
    for option, value in given.items():
        if value is not None:
            instead = "--dispatch-dtype and --combine-dtype" if option == "--dtype" else "--tokens"
            raise CommbenchError(f"{option}={value} does not apply to {collective}: it is swept by --tokens (tokens per "
                                 f"rank) and its rows travel in --dispatch-dtype/--combine-dtype; use {instead}")


@command("bench", short_help="Measure one collective over a range of message sizes, nccl-tests style.",
         help="Measure one collective over a range of message sizes, nccl-tests style. Exit 0: every size measured with correct data; 1: a size failed or found wrong data (with NCCL tuning axes: in any combination; one NCCL refuses is recorded as data); 2: bad input, found before any rank starts; 130: interrupted (what was measured is kept). A size (-b/-e) means what nccl-tests means: the full output for all_gather, the full input for reduce_scatter, the send buffer for all_to_all, the buffer for the others. algbw = size / time; busbw = algbw x all_reduce 2(n-1)/n, reduce_scatter / all_gather / all_to_all (n-1)/n, sendrecv / broadcast / reduce 1 (nccl-tests doc/PERFORMANCE.md); GB = 1e9 B.")
def bench(
    collective: Annotated[str, typer.Argument(help=", ".join(REGISTRY))],
    nproc: Annotated[Optional[int], typer.Option("--nproc", help="Local ranks to start (default 2). Omit under torchrun/srun/mpirun.")] = None,
    min_bytes: Annotated[Optional[str], typer.Option("-b", "--min-bytes", help=f"Smallest size ({SIZE_SUFFIXES}; default 8).")] = None,
    max_bytes: Annotated[Optional[str], typer.Option("-e", "--max-bytes", help="Largest size (default 16M, as every command that measures; grad_reduce_scatter: 16 MiB..2 GiB buckets).")] = None,
    step_factor: Annotated[Optional[float], typer.Option("-f", "--step-factor", help="Multiply the size by this each step (default 2; 1: add -i each step, 1 MiB unless given, as nccl-tests).")] = None,
    step_bytes: Annotated[Optional[str], typer.Option("-i", "--step-bytes", help="Add this to the size each step (instead of -f; given both, -f wins when it is > 1, as in nccl-tests).")] = None,
    iters: Annotated[int, typer.Option("-n", "--iters", help="Timed iterations per size (all kept in the record; p99 recorded from 100 on).")] = 20,
    warmup_iters: Annotated[int, typer.Option("-w", "--warmup-iters", help="Untimed warm-up iterations per size.")] = 5,
    check: Annotated[int, typer.Option("-c", "--check", help="1: verify every element before and after the timed loop of each size (outside timing, with fresh data each time); 0: skip.")] = 1,
    dtype: Annotated[Optional[str], typer.Option("-d", "--dtype", help="float32 (default), bfloat16, float16, float64, int32, int64, int8, uint8 (or float/half/double).")] = None,
    op: Annotated[Optional[str], typer.Option("-o", "--op", help="Reduction op of all_reduce, reduce_scatter, reduce and grad_reduce_scatter (refused for the others): sum (default), prod, max, min, avg (integer -d averaged as NCCL does, the sum then a truncating division: NCCL backends only); either case (SUM = sum), as -d.")] = None,
    root: Annotated[Optional[int], typer.Option("-r", "--root", help="Root rank of broadcast and reduce (default 0; refused for the others).")] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Output aliases the input (reduce_scatter, all_gather; all_reduce, broadcast and reduce are in-place by default). --format nccl-tests measures both forms, as nccl-tests.")] = False,
    out_of_place: Annotated[bool, typer.Option("--out-of-place", help="all_reduce, broadcast, reduce: measure the out-of-place form (a separate output buffer, nccl-tests' first group). --format nccl-tests measures both forms, as nccl-tests.")] = False,
    backend: Annotated[str, typer.Option("--backend", help="auto (NCCL if CUDA is available, else gloo), nccl, gloo or cupy-nccl (raw NCCL through CuPy).")] = "auto",
    timeout_s: Annotated[float, typer.Option("--timeout", "-T", help="Seconds before a hung collective aborts the run (-T as nccl-tests).")] = 300.0,
    output: Annotated[Optional[str], typer.Option("-O", "--out", "-J", help="JSONL results file (default results/<collective>-<time>.jsonl); -J as nccl-tests' output file.")] = None,
    old_output: Annotated[Optional[str], typer.Option("--output", hidden=True)] = None,
    output_format: Annotated[str, typer.Option("--format", help="table (rich), nccl-tests (classic text for existing parsers; moe_all_to_all's banner states its tokens per rank and MoE layer where a size sweep's minBytes/maxBytes/step stand) or markdown (one table at the end, to paste).")] = "table",
    graph_launches: Annotated[Optional[int], typer.Option("-G", "--graph-launches", help="nccl-tests -G: N > 0 times CUDA-graph replays (as --cuda-graph, cupy-nccl), N launches of the -n iterations (n*N replays of one iteration's graph); 0 none.")] = None,
    run_cycles: Annotated[Optional[int], typer.Option("-N", "--run-cycles", help="nccl-tests -N: run the whole size sweep this many times, each cycle's records appended to the same file (compare widens its noise to their range).")] = None,
    agg_iters: Annotated[Optional[int], typer.Option("-m", "--agg-iters", help="Like nccl-tests -m, but not grouped: each timed iteration runs the collective this many times as separate calls back to back (nccl-tests groups them in one ncclGroupStart/End); times are per operation, recorded as params.agg_iters_ungrouped, never matched to an imported nccl-tests -m (params.agg_iters).")] = None,
    blocking: Annotated[Optional[int], typer.Option("-z", "--blocking", help="nccl-tests -z: 1 = after every collective the host waits for the device, then every rank meets at a barrier (recorded as params.blocking); 0 = not (default).")] = None,
    refused_g: Annotated[Optional[str], typer.Option("-g", hidden=True)] = None,
    refused_t: Annotated[Optional[str], typer.Option("-t", hidden=True)] = None,
    refused_p: Annotated[Optional[str], typer.Option("-p", hidden=True)] = None,
    refused_y: Annotated[Optional[str], typer.Option("-y", hidden=True)] = None,
    refused_c: Annotated[Optional[str], typer.Option("-C", hidden=True)] = None,
    refused_r: Annotated[Optional[str], typer.Option("-R", hidden=True)] = None,
    average: Annotated[int, typer.Option("-a", "--average", help="nccl-tests -a: the time --format nccl-tests prints, the loop time / iters over ranks: 0 rank 0, 1 average (default), 2 min, 3 max. All four are recorded.")] = 1,
    # --- MoE all-to-all options (issue 3) go below this line ---
    moe_tokens: Annotated[Optional[str], typer.Option("--tokens", help="moe_all_to_all: tokens per rank, a comma list (default 128,512,2048); replaces -b/-e. Its algbw is the round trip's: (busiest dispatch + busiest combine bytes) / the whole iteration's median (count exchange + dispatch + combine); dispatch and combine algbw apart are each stage's bytes / its median; busbw = algbw x (n-1)/n.")] = None,
    moe_hidden: Annotated[Optional[int], typer.Option("--hidden", help="moe_all_to_all: hidden size (channels per token; default 4096).")] = None,
    moe_top_k: Annotated[Optional[int], typer.Option("--top-k", help="moe_all_to_all: experts per token (default 8).")] = None,
    moe_experts: Annotated[Optional[int], typer.Option("--experts", help="moe_all_to_all: routed experts, divisible by the EP size (default 64).")] = None,
    moe_routing: Annotated[Optional[str], typer.Option("--routing", help="moe_all_to_all: balanced, uniform (default), zipf:<alpha>, group-limited:<groups>:<topk_groups>, trace:<file.npy>.")] = None,
    moe_dispatch_mode: Annotated[Optional[str], typer.Option("--dispatch-mode", help="moe_all_to_all: per-expert (Megatron, default) or per-rank (DeepEP dedup).")] = None,
    moe_dispatch_dtype: Annotated[Optional[str], typer.Option("--dispatch-dtype", help="moe_all_to_all: bf16 (default) or fp8 (1 B/channel + fp32 scale per 128).")] = None,
    moe_combine_dtype: Annotated[Optional[str], typer.Option("--combine-dtype", help="moe_all_to_all: bf16 (default) or fp32.")] = None,
    moe_seed: Annotated[Optional[int], typer.Option("--seed", help="moe_all_to_all: routing seed (default 0; every rank derives the same routing).")] = None,
    moe_preset: Annotated[Optional[str], typer.Option("--preset", help="moe_all_to_all: deepseek-v3, qwen3-235b, mixtral-8x22b (explicit options override).")] = None,
    moe_capacity_factor: Annotated[Optional[float], typer.Option("--capacity-factor", help="moe_all_to_all: expert capacity factor C > 0 (Megatron's --moe-expert-capacity-factor): each expert takes at most ceil(tokens x top-k / experts x C) of each rank's tokens, the earliest; the rest are dropped (not sent). Default: dropless.")] = None,
    moe_pad_to_capacity: Annotated[bool, typer.Option("--pad-to-capacity", help="moe_all_to_all: pad every expert's buffer from every rank to the capacity (Megatron's --moe-pad-expert-input-to-capacity): fixed all-to-all sizes, no count exchange. Needs --capacity-factor and --dispatch-mode per-expert.")] = False,
    # --- topology / sub-group options (issue 4) go below this line ---
    ranks_per_rack: Annotated[Optional[int], typer.Option("--ranks-per-rack", help="Ranks per rack (scale-up domain): ranks r*R..r*R+R-1 share rack r.")] = None,
    topology: Annotated[Optional[str], typer.Option("--topology", help="Rack preset: nvl72 (72 per rack) or hgx8 (8 per node).")] = None,
    racks: Annotated[Optional[str], typer.Option("--racks", help="Number of racks (scale-up domains), ranks split evenly in order, as --racks means in emulate, predict and fit.")] = None,
    rack_ranks: Annotated[Optional[str], typer.Option("--rack-ranks", help="Explicit racks, e.g. '0-3;4-7' (';' between racks, as --rack-nodes lists hosts).")] = None,
    nodes_per_rack: Annotated[Optional[int], typer.Option("--nodes-per-rack", help="Group hosts (ranks by hostname) into racks of this many nodes.")] = None,
    rack_nodes: Annotated[Optional[str], typer.Option("--rack-nodes", help="Hosts per rack, e.g. 'n1,n2;n3,n4'.")] = None,
    group_sizes: Annotated[Optional[str], typer.Option("--group-sizes", help="Sub-group sweep: pow2 (2,4,8..N) or a list like 2,4,8.")] = None,
    group_layout: Annotated[Optional[str], typer.Option("--group-layout", help="Sub-group layout: contiguous, strided, or both (comma-separated).")] = None,
    algorithm: Annotated[Optional[str], typer.Option("--algorithm", help="grad_reduce_scatter: flat, hierarchical, hierarchical-allreduce (comma list; default flat,hierarchical).")] = None,
    rs_impl: Annotated[Optional[str], typer.Option("--rs-impl", help="grad_reduce_scatter: auto (duplex on gloo, else native), native (backend RS), pairwise (all_to_all + local sum) or duplex (pairwise point-to-point, each direction on its own communicator).")] = None,
    # --- raw NCCL options (issue 6) ---
    cuda_graph: Annotated[bool, typer.Option("--cuda-graph", help="cupy-nccl: capture each stage in a CUDA graph once and time its replays (as nccl-tests -G); recorded with params.cuda_graph.")] = False,
    compare_backends: Annotated[Optional[str], typer.Option("--compare-backends", help="Measure the same points on several backends in one launch, e.g. torch-nccl,cupy-nccl; reports each one's time ratio to the last.")] = None,
    # --- NCCL tuning axes (issue 16) ---
    nccl_algo: Annotated[Optional[str], typer.Option("--nccl-algo", help="NCCL algorithms to force, a comma list: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat (or default). Each combination runs in fresh processes; NCCL's default is measured first as the baseline.")] = None,
    nccl_proto: Annotated[Optional[str], typer.Option("--nccl-proto", help="NCCL protocols to force, a comma list: ll, ll128, simple (or default).")] = None,
    nccl_channels: Annotated[Optional[str], typer.Option("--nccl-channels", help="Channel counts to force (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS), a comma list, e.g. 4,8,16 (or default).")] = None,
) -> None:
    """Sweep sizes from -b to -e; JSONL records are written as each size finishes."""
    output = renamed(output, old_output, old="--output", new="-O/--out")
    if (moe_routing or "").startswith("trace:"):   # 'trace:' read the current folder
        refuse_empty_path(moe_routing[len("trace:"):], "--routing trace:FILE", "a routing trace (.npy or text)")
    if output is not None:   # -O '' / -J '': refused, never the default name (files.refuse_empty_path)
        refuse_empty_path(output, "--out")
        trace = moe_routing if (moe_routing or "").startswith("trace:") else None
        refuse_writing_inputs("--out", output, [output], [trace])
    racks_option = None if racks is None else "--racks"   # as typed: errors on the list name it (TopologySpec)
    if racks is not None and not racks.strip().isdecimal():  # the old meaning: a rank list
        from commbench.comm.topology import RANK_LIST_FORM, is_rank_list
        if not is_rank_list(racks):   # neither: refused naming the option typed, before the renaming note
            raise CommbenchError(f"--racks={racks!r} is invalid: a number of racks (e.g. 2), or, as the old spelling "
                                 f"of --rack-ranks, {RANK_LIST_FORM}")
        rack_ranks, racks = renamed(rack_ranks, racks, old="--racks with a rank list", new="--rack-ranks"), None
    elif racks is not None and rack_ranks is not None:
        raise CommbenchError("--racks and --rack-ranks conflict: give one way to describe racks")
    refuse_nccl_tests_flags({"-g": refused_g, "-t": refused_t, "-p": refused_p, "-y": refused_y, "-C": refused_c,
                             "-R": refused_r})
    letters = nccl_tests_loop(graph_launches=graph_launches, agg_iters=agg_iters, blocking=blocking,
                              run_cycles=run_cycles)
    if letters.get("graph_launches"):
        cuda_graph, iters = True, iters * letters["graph_launches"]
    if output_format not in ("table", "nccl-tests", "markdown"):
        raise CommbenchError(f"--format={output_format!r} is invalid: allowed table, nccl-tests, markdown")
    if average not in (0, 1, 2, 3):
        raise CommbenchError(f"--average={average} is invalid: allowed 0 (rank 0), 1 (average), 2 (min), 3 (max)")
    if check not in (0, 1):
        raise CommbenchError(f"--check={check} is invalid: allowed 0 or 1")
    workload = get_collective(collective)
    workload.refuse_unused(op=op, root=root)   # -o where it does not reduce, -r where it has no root: as a sweep file
    op = "sum" if op is None else op
    root = 0 if root is None else root
    if workload.reduces:  # 'SUM' as nccl-tests users type it is sum; an unknown op is refused in one line
        op = reduce_op(op, "--op")
    if not workload.takes_size:  # swept by its own parameters (moe_all_to_all: --tokens, rows in --dispatch-dtype)
        refuse_size_options(workload.name, {"--min-bytes": min_bytes, "--max-bytes": max_bytes, "--step-factor": step_factor,
                                            "--step-bytes": step_bytes, "--dtype": dtype})
    dtype = "float32" if dtype is None else dtype   # a given -d '' is refused (validate), not read as the default
    for option, value in (("--min-bytes", min_bytes), ("--max-bytes", max_bytes), ("--step-bytes", step_bytes)):
        if value is not None:  # '' too: an empty value is refused here, not read below as the default
            parse_size_bytes(value, option)
    step = None  # the banner's step: what the size loop used (size_step: -i, or 1 MiB for -f 1 alone, unless -f > 1)
    if workload.default_sizes_bytes and (min_bytes, max_bytes, step_factor, step_bytes) == (None, None, None, None):
        sizes = list(workload.default_sizes_bytes)
    else:
        added = parse_size_bytes(step_bytes, "--step-bytes") if step_bytes else None
        sizes = size_range(parse_size_bytes(min_bytes or "8", "--min-bytes"), parse_size_bytes(max_bytes or MEASURED_MAX_BYTES, "--max-bytes"),
                           step_factor, added)
        step = size_step(step_factor, added)
    if letters.get("run_cycles", 1) > 1:  # -N 2**70 ran cycle after cycle (no point bound saw the cycles)
        from commbench.limits import check_point_count
        check_point_count(letters["run_cycles"] * len(sizes), f"-N={letters['run_cycles']} cycles of {len(sizes)} size(s)")
    if compare_backends and (group_sizes or group_layout):  # run_compare_rank measures the whole world only
        given = "--group-sizes" if group_sizes else "--group-layout"
        raise CommbenchError(f"{given} cannot be combined with --compare-backends: it measures every point on the "
                             "whole world; compare sub-groups with one bench run per backend")
    backends = parse_compare_backends(compare_backends) if compare_backends else (resolve_backend(backend),)
    if cuda_graph and any(name != "cupy-nccl" for name in backends):
        given = f"-G {graph_launches}" if letters.get("graph_launches") else "--cuda-graph"  # name what was typed
        raise CommbenchError(f"{given} needs --backend cupy-nccl (and only cupy-nccl in --compare-backends): "
                             "it times CUDA-graph replays")
    config = BenchConfig(
        collective=collective, sizes_bytes=tuple(sizes), dtype=dtype, op=op, in_place=in_place,
        out_of_place=out_of_place, root=root,
        size_bounds=None if workload.default_sizes_bytes and (min_bytes, max_bytes) == (None, None) else
        (parse_size_bytes(min_bytes or "8", "--min-bytes"), parse_size_bytes(max_bytes or "16M", "--max-bytes")),
        size_step=step,
        graph_launches=letters.get("graph_launches", 0),
        loop=LoopOptions(iters=iters, warmup_iters=warmup_iters, check=bool(check), cuda_graph=cuda_graph,
                         agg_iters=letters.get("agg_iters", 1), blocking=letters.get("blocking", False)),
        backend=backends[0], timeout_s=timeout_s,
        output_path=default_output_path(collective) if output is None else output, output_format=output_format, average=average,
        argv=tuple(sys.argv),
        params={**workload.default_params, **moe_cli_params(collective, tokens=moe_tokens, hidden=moe_hidden, top_k=moe_top_k, num_experts=moe_experts,
                              routing=moe_routing, dispatch_mode=moe_dispatch_mode, dispatch_dtype=moe_dispatch_dtype,
                              combine_dtype=moe_combine_dtype, seed=moe_seed, preset=moe_preset,
                              capacity_factor=moe_capacity_factor, pad_to_capacity=moe_pad_to_capacity or None)},
    )
    config = with_rack_options(config, ranks_per_rack=ranks_per_rack, preset=topology, racks=racks or rack_ranks, nodes_per_rack=nodes_per_rack,
                               rack_nodes=rack_nodes, group_sizes=group_sizes, group_layout=group_layout,
                               algorithm=algorithm, rs_impl=rs_impl, racks_option=racks_option)
    combos = parse_axes(nccl_algo, nccl_proto, nccl_channels)
    if combos:
        if len(backends) > 1:
            raise CommbenchError("--nccl-algo/--nccl-proto/--nccl-channels cannot be combined with --compare-backends")
        refuse_on_backend(config.backend, combos)
        if not workload.takes_size:
            raise CommbenchError(f"the NCCL tuning axes apply to collectives swept by size, not {collective}")
    # every check run_job makes before its ranks start, made before the note on appending: a refused run says only why
    check_job(nproc=nproc, backend=backends[-1], validate_world=lambda world: validate(config, world))
    launched = detect_rank_env()
    lock = OutputLock(config.output_path, "--out") if launched is None or launched.rank == 0 else nullcontext()
    with lock:
        if launched is None or launched.rank == 0:
            repair_torn_tail(config.output_path)  # a run cut off mid-line: the new header starts a line
            note_appending(config.output_path)
        if combos:
            run_bench_axes(config, combos, nproc)
            return
        from commbench.sweep.tuned_bench import run_ids_in
        earlier_runs = run_ids_in(config.output_path) if launched is None or launched.rank == 0 else set()
        num_cycles, earlier_points = letters.get("run_cycles", 1), 0
        launch = new_run_id()   # the id its cycles' headers share (run_cycles.launch): one stopped between two is named
        writes_text = (launched is None or launched.rank == 0) and output_format == "nccl-tests"
        for cycle in range(num_cycles):
            config = dataclasses.replace(config, text_cycle=dataclasses.replace(
                config.text_cycle, cycle=cycle, num_cycles=num_cycles, launch=launch))
            try:
                outcomes = _run(config, backends, nproc, timeout_s)
            except Interrupted as exc:
                if cycle > 0:
                    exc = Interrupted(f"{exc}; also the {earlier_points} point(s) of the {cycle} cycle(s) before "
                                      f"it (-N: cycle {cycle + 1} of {num_cycles} stopped)")
                if writes_text:  # the ranks stopped mid-table: the text ends where its whole rows do, saying so
                    print(stopped_line(str(exc)), flush=True)
                raise exc from None
            report_outcomes(outcomes, config.output_path)
            earlier_points += max(outcome.num_points for outcome in outcomes.values())
            carried = next((o.text_cycle for o in outcomes.values() if o.text_cycle is not None), None)
            if carried is not None:
                config = dataclasses.replace(config, text_cycle=carried)
    report_outcomes(outcomes, config.output_path)
    # where the records went, as every format says it: the table's on stdout (its view said "results →" too); the
    # text formats' (nccl-tests' text, the Markdown table: stdout is a text to keep or import) on stderr, by the
    # process that printed the text (rank 0 under torchrun / srun)
    if (output_format == "table" and launched is None) or (output_format != "table" and
                                                           (launched is None or launched.rank == 0)):
        per_cycle = max(outcome.num_points for outcome in outcomes.values())   # -N: every cycle's, not the last's
        cycles = f" ({per_cycle} per cycle x {num_cycles} cycles)" if num_cycles > 1 else ""
        (console if output_format == "table" else err_console).print(
            styled("[green]done[/]: {} point(s) measured{}; records in {}", earlier_points, cycles,
                   config.output_path), highlight=False, soft_wrap=True)
    if launched is None or launched.rank == 0:
        note_unfittable(config.output_path, earlier_runs)


def note_unfittable(path: str, earlier_runs: set[str]) -> None:
    """A note per curve measured whose times determine no bandwidth (`fit` would keep it from prediction)."""
    from commbench.costmodel.fit_readiness import undetermined_bandwidth_notes

    for line in undetermined_bandwidth_notes(path, larger="-e 16M", larger_moe="--tokens", skip_runs=earlier_runs):
        err_console.print(styled("[yellow]note:[/] {}", line), highlight=False, soft_wrap=True)


def _run(config: BenchConfig, backends: tuple[str, ...], nproc: int | None, timeout_s: float) -> dict:
    if len(backends) > 1:
        outcomes = run_job(run_compare_rank, CompareConfig(bench=config, backends=backends), nproc=nproc,
                           backend=backends[-1], validate_world=lambda world: validate(config, world),
                           output_path=config.output_path, timeout_s=timeout_s)
    else:
        outcomes = run_job(run_bench_rank, config, nproc=nproc, backend=config.backend,
                           validate_world=lambda world: validate(config, world), output_path=config.output_path,
                           timeout_s=timeout_s)
    return outcomes
