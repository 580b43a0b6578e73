"""Start the ranks of a commbench command inside the emulated racks and wait for them.

Each rank is a plain process (`ip netns exec <rack ns> python -m commbench ...`) with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR (rack 0's uplink address) and MASTER_PORT set, so the normal
torchrun-style detection runs; GLOO_SOCKET_IFNAME=uplink points gloo at the rack uplink (peers in
the same rack still reach that address over loopback). COMMBENCH_RANKS_PER_RACK gives the command
its racks and COMMBENCH_EMULATED marks every RunHeader as emulated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable

from commbench.comm.local_ranks import die_with_parent, kill_groups
from commbench.emulate.fabric import UPLINK, FabricSpec
from commbench.comm.topology import RANKS_PER_RACK_ENV

MASTER_PORT = 29500  # the namespaces are fresh: nothing else listens there
FAILURE_GRACE_S = 5.0


def emulated_description(spec: FabricSpec) -> dict:
    """The run header's `emulated` object (results/emulated.py: the one description its texts read back)."""
    from commbench.emulate.fabric import tbf_burst_bytes
    from commbench.results.emulated import description

    rate = spec.scale_out_rate_bits_per_s
    return description(spec.num_racks, spec.ranks_per_rack, rate, tbf_burst_bytes(rate) if rate else None)


def rank_env(spec: FabricSpec, rank: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RANK=str(rank), WORLD_SIZE=str(spec.num_racks * spec.ranks_per_rack),
               LOCAL_RANK=str(rank % spec.ranks_per_rack), LOCAL_WORLD_SIZE=str(spec.ranks_per_rack),
               MASTER_ADDR=spec.rack_addr(0) if spec.num_racks > 1 else "127.0.0.1", MASTER_PORT=str(MASTER_PORT),
               OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    env[RANKS_PER_RACK_ENV] = str(spec.ranks_per_rack)
    env["COMMBENCH_EMULATED"] = json.dumps(emulated_description(spec))
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d cannot resolve hostnames inside the namespaces
    if spec.num_racks > 1:
        env["GLOO_SOCKET_IFNAME"] = UPLINK
    return env


class OnceAcrossRanks:
    """Forwards the ranks' stderr lines as they come, each line once however many ranks print it: every rank
    checks its own arguments, so a bad -b was 'error: --min-bytes=...' once per rank. A rank's k-th copy of a
    line is printed only where no rank printed a k-th copy before; a line of one rank alone always prints."""

    def __init__(self, out=None, restyle: Callable[[str], bool] | None = None) -> None:
        self.out = out or sys.stderr
        self.restyle = restyle   # prints a line as this process would (True), or leaves it to be written as is
        self.lock = threading.Lock()
        self.printed: dict[bytes, int] = {}

    def forward(self, stream) -> None:
        mine: dict[bytes, int] = {}
        for line in iter(stream.readline, b""):
            with self.lock:
                mine[line] = mine.get(line, 0) + 1
                if mine[line] > self.printed.get(line, 0):
                    self.printed[line] = mine[line]
                    if self.restyle is not None and self.restyle(line.decode(errors="replace")):
                        continue
                    self.out.buffer.write(line) if hasattr(self.out, "buffer") else self.out.write(line.decode(errors="replace"))
                    self.out.flush()
        stream.close()


def _count_bytes(stream, counts: dict[int, int], rank: int) -> None:
    """Reads a rank's stdout to its end, counting its bytes into counts[rank] (what is left out of the output)."""
    for chunk in iter(lambda: stream.read(65536), b""):
        counts[rank] = counts.get(rank, 0) + len(chunk)
    stream.close()


def run_ranks(spec: FabricSpec, command: list[str], restyle: Callable[[str], bool] | None = None,
              left_out: dict[int, int] | None = None) -> int:
    """Run `commbench <command>` as every rank; return the first non-zero exit code (or 0). `restyle`: see
    OnceAcrossRanks (a rank's stderr is a pipe, so its rich console prints no colour). `left_out`: given, only rank
    0's stdout is passed through (one document on stdout: every rank of `env --json` prints its own) and it gets,
    per other rank that printed on stdout, the bytes left out."""
    procs: list[subprocess.Popen] = []
    readers: list[threading.Thread] = []
    stderr = OnceAcrossRanks(restyle=restyle)
    try:
        for rank in range(spec.num_racks * spec.ranks_per_rack):
            ns = spec.rack_ns(rank // spec.ranks_per_rack)
            own_stdout = left_out is None or rank == 0
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "commbench", *command],
                                          env=rank_env(spec, rank), start_new_session=True, preexec_fn=die_with_parent,
                                          stderr=subprocess.PIPE, stdout=None if own_stdout else subprocess.PIPE))
            readers.append(threading.Thread(target=stderr.forward, args=(procs[-1].stderr,), daemon=True))
            readers[-1].start()
            if not own_stdout:
                readers.append(threading.Thread(target=_count_bytes, args=(procs[-1].stdout, left_out, rank),
                                                daemon=True))
                readers[-1].start()
        failed_at = None
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            if failed_at is None and any(c not in (None, 0) for c in codes):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > FAILURE_GRACE_S:
                break  # a rank failed and the others hang waiting for it
            time.sleep(0.05)
        return next((c for c in (p.poll() for p in procs) if c not in (None, 0)), 0)
    finally:
        kill_groups([proc.pid for proc in procs if proc.poll() is None])
        for proc in procs:
            proc.wait()
        for reader in readers:
            reader.join(timeout=5)
