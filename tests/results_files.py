"""Results files and CLI calls as the gate/staleness tests write and make them (one copy, not one per test file)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app

COMPARE = Path(__file__).parent / "data" / "compare"   # stored gloo runs of the compare/staleness tests


def invoke(*args: str):
    """`commbench ARGS` in-process, wide enough that no message wraps."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def write_nccl_hosts_run(path: Path, hostnames: list[str], busbw_gbps: dict[str, float]) -> str:
    """A 4-rank-or-so NCCL sweep on H100s, its ranks on `hostnames` (no topology recorded: a host is a domain), of
    each collective in `busbw_gbps` at that bus bandwidth (64 KiB..16 MiB, 20 us latency, a little noise)."""
    from commbench.results.records import JsonlWriter, Measurement, RunHeader

    world = len(hostnames)
    factor = {"all_reduce": 2 * (world - 1) / world, "sendrecv": 1.0}
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id="hosts", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version=None, nccl_version="2.27.7", cuda_version=None, cupy_version=None,
                               backend="nccl", world_size=world, hostnames=hostnames,
                               devices=["NVIDIA H100 80GB HBM3"] * world, nccl_env={}, launcher="torchrun"))
        for collective, gbps in busbw_gbps.items():
            for p in range(16, 25):
                size = 1 << p
                time_s = 20e-6 + factor[collective] * size / (gbps * 1e9) * (1 + 0.01 * (p % 3))
                writer.write(Measurement(run_id="hosts", collective=collective, backend="nccl", size_bytes=size,
                                         count=size // 4, dtype="float32", op="sum", in_place=False,
                                         world_size=world, group_size=world, iters=10, warmup_iters=2,
                                         time_us_median=time_s * 1e6))
    return str(path)
