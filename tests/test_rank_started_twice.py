"""A rank started twice (two processes with RANK=1 in one launch) joined torch's rendezvous twice as that rank: the
store's keys of one overwrote the other's, and every rank reported only a rendezvous timeout after the full --timeout
(probe P6, session 44). Every rank now checks in on the launch's store first (comm/rank_checkin.py): the second
claim of a rank stops every rank still joining, in one line naming the rank; a missing rank is named at the
timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.comm.local_ranks import RunFailed
from commbench.comm.rank_checkin import check_in, launch_store
from tests.distributed import free_port

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(150)
def test_a_rank_started_twice_stops_every_rank_in_one_line_naming_it(tmp_path):
    port = str(free_port())
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_",
                                "TORCHELASTIC_", "COMMBENCH_"))}
    procs = [subprocess.Popen([sys.executable, "-m", "commbench", "bench", "all_reduce", "-b", "8", "-e", "8", "-n",
                               "2", "-w", "1", "-T", "60", "--backend", "gloo", "-O", str(tmp_path / f"d{i}.jsonl")],
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              env={**env, "PYTHONPATH": str(REPO), "RANK": rank, "WORLD_SIZE": "3",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "COLUMNS": "400"})
             for i, rank in enumerate(("0", "1", "1"))]   # rank 2 never comes: only the refusal ends the wait early
    try:
        errs = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, err in zip(procs, errs):
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert p.returncode == 2 and len(errors) == 1, err[-600:]
        assert errors[0].startswith("error: rank 1 of 3 was started twice in the launch at tcp://127.0.0.1:"), errors
        assert "Traceback" not in err and "did not complete" not in err, err[-600:]


def test_a_missing_rank_is_named_when_the_wait_ends():
    store = launch_store(master_addr="127.0.0.1", master_port=free_port(), rank=0, world_size=2, timeout_s=1)
    with pytest.raises(RunFailed) as info:
        check_in(store, rank=0, world_size=2, address="tcp://x", where="at tcp://x as rank 0 of 2", timeout_s=1,
                 namespace="b")
    line = str(info.value)
    assert "1 of 2 ranks joined (missing: rank 1)" in line and "--timeout=1 s" in line and "\n" not in line, line
