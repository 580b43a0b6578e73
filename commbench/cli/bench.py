"""`commbench bench COLLECTIVE`: nccl-tests-style sweep of one collective over message sizes."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from commbench.bench import BenchConfig, default_output_path, run_bench_rank, validate
from commbench.cli.base import command, console, fail
from commbench.dist.backends import resolve_backend
from commbench.dist.job import run_job
from commbench.dist.launch import detect_rank_env
from commbench.errors import CommbenchError
from commbench.harness import LoopOptions
from commbench.units import parse_size_bytes, size_range

def report_outcomes(outcomes: dict, output_path: str) -> None:
    """Exit non-zero, with one line, when a point failed or returned wrong data."""
    errors = [o.error for o in outcomes.values() if o.error]
    if errors:
        raise fail(f"{errors[0]}; results measured so far are in {output_path}", exit_code=1)
    wrong = max((o.num_wrong for o in outcomes.values()), default=0)
    if wrong:
        raise fail(f"{wrong} wrong element(s) in the data check (see #wrong in {output_path})", exit_code=1)


@command("bench", help="Measure one collective over a range of message sizes, nccl-tests style.")
def bench(
    collective: Annotated[str, typer.Argument(help="all_reduce, reduce_scatter, all_gather, all_to_all, sendrecv, broadcast")],
    nproc: Annotated[Optional[int], typer.Option("--nproc", help="Local ranks to start (default 2). Omit under torchrun/srun/mpirun.")] = None,
    min_bytes: Annotated[str, typer.Option("-b", "--min-bytes", help="Smallest size (K/M/G suffixes, 1K = 1024).")] = "8",
    max_bytes: Annotated[str, typer.Option("-e", "--max-bytes", help="Largest size.")] = "16M",
    step_factor: Annotated[Optional[float], typer.Option("-f", "--step-factor", help="Multiply the size by this each step (default 2).")] = None,
    step_bytes: Annotated[Optional[str], typer.Option("-i", "--step-bytes", help="Add this to the size each step (instead of -f).")] = None,
    iters: Annotated[int, typer.Option("-n", "--iters", help="Timed iterations per size.")] = 20,
    warmup_iters: Annotated[int, typer.Option("-w", "--warmup-iters", help="Untimed warm-up iterations per size.")] = 5,
    check: Annotated[int, typer.Option("-c", "--check", help="1: verify every element once per size, outside timing; 0: skip.")] = 1,
    dtype: Annotated[str, typer.Option("-d", "--dtype", help="float32, bfloat16, float16, float64, int32, int64, int8, uint8 (or float/half/double).")] = "float32",
    op: Annotated[str, typer.Option("-o", "--op", help="Reduction: sum, prod, max, min, avg.")] = "sum",
    root: Annotated[int, typer.Option("-r", "--root", help="Root rank (broadcast).")] = 0,
    in_place: Annotated[bool, typer.Option("--in-place", help="Output aliases the input (reduce_scatter, all_gather).")] = False,
    backend: Annotated[str, typer.Option("--backend", help="auto (NCCL if CUDA is available, else gloo), nccl or gloo.")] = "auto",
    timeout_s: Annotated[float, typer.Option("--timeout", help="Seconds before a hung collective aborts the run.")] = 300.0,
    output: Annotated[Optional[str], typer.Option("-J", "--output", help="JSONL results file (default results/<collective>-<time>.jsonl).")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table (rich) or nccl-tests (classic text for existing parsers).")] = "table",
    # --- MoE all-to-all options (issue 3) go below this line ---
    # --- topology / sub-group options (issue 4) go below this line ---
) -> None:
    """Sweep sizes from -b to -e; JSONL records are written as each size finishes."""
    if output_format not in ("table", "nccl-tests"):
        raise CommbenchError(f"--format={output_format!r} is invalid: allowed table, nccl-tests")
    if check not in (0, 1):
        raise CommbenchError(f"--check={check} is invalid: allowed 0 or 1")
    sizes = size_range(parse_size_bytes(min_bytes, "--min-bytes"), parse_size_bytes(max_bytes, "--max-bytes"),
                       step_factor, parse_size_bytes(step_bytes, "--step-bytes") if step_bytes else None)
    config = BenchConfig(
        collective=collective, sizes_bytes=tuple(sizes), dtype=dtype, op=op, in_place=in_place, root=root,
        loop=LoopOptions(iters=iters, warmup_iters=warmup_iters, check=bool(check)),
        backend=resolve_backend(backend), timeout_s=timeout_s,
        output_path=output or default_output_path(collective), output_format=output_format,
        argv=tuple(sys.argv),
    )
    outcomes = run_job(run_bench_rank, config, nproc=nproc, backend=config.backend,
                       validate_world=lambda world: validate(config, world), output_path=config.output_path)
    report_outcomes(outcomes, config.output_path)
    if output_format == "table" and detect_rank_env() is None:
        console.print(f"[green]done[/]: {len(sizes)} size(s) requested; records in {config.output_path}", highlight=False)
