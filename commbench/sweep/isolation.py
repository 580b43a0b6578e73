"""Failure isolation for sweeps: per-point timeouts, agreement on failures, fresh groups after one.

How a failed point is contained (torch.distributed backends):
- Points are measured on a *measurement world*: a process group over all ranks created with
  `dist.new_group(timeout=<the entry's timeout_s>)`, not on the default group. A collective that
  exceeds the timeout raises on the ranks waiting for it (gloo raises; NCCL's watchdog aborts).
- After every point each rank reports "ok" or its error through the launch's key-value store
  (TCPStore), which does not depend on any process group, and waits for every rank's report. If any
  rank failed, every rank records the point as failed (rank 0 writes the first error).
- gloo: a process group that saw a timeout is abandoned and a fresh measurement world (and fresh
  sub-groups) is created from the store, then the sweep continues with the next point. Every new
  measurement world ends with a barrier on it, so no rank tears down while a peer still connects it.
- NCCL: a communicator that timed out cannot be trusted (and the watchdog may tear the process
  down), so the sweep stops after recording the failure and prints the --resume command.
- A rank that never reports back (hung inside a non-collective call, or dead) makes the wait time
  out: the sweep stops cleanly with what it has written.
- Under a launcher that is not commbench's own (torchrun, srun, mpirun) no fresh ranks replace a dead one: a rank
  whose own collective failed because a peer failed under it (peer_failure: gloo's closed connection, NCCL's
  remote error) records the point failed and stops at once, as bench does, instead of waiting the whole agreement
  for a peer that will never report; the peer watch (commbench.comm.peer_watch) names the dead rank on every rank
  and ends the agreement's wait (PeerDied), so ranks on a sub-group without it stop as soon.
- Every wait on the store polls it (wait_for_keys), so a stop signal's handler runs during the wait.
"""

from __future__ import annotations

import datetime
import time
from typing import Sequence

RECOVERABLE_BACKENDS = ("gloo",)
POLL_MAX_S = 0.05  # the longest pause between two looks at the store
# what gloo's tcp transport says when the other end of a pair closed its socket (third_party/gloo/gloo/transport/
# tcp/pair.cc: a read of 0 bytes is 'Connection closed by peer'; ECONNRESET and EPIPE come as strerror text)
PEER_GONE_TEXTS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")
# what NCCL, through torch's ProcessGroupNCCL, says when a peer's process exited mid-collective. torch raises
# DistBackendError "NCCL error in: FILE:LINE, <ncclGetErrorString(result)>, NCCL version V\n<detail>" (torch/csrc/
# distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK, pytorch 04dbcd01). ncclGetErrorString: ncclRemoteError is
# 'remote process exited or there was a network error', ncclSystemError 'unhandled system error (run with
# NCCL_DEBUG=INFO for details)' (NCCL src/init.cc, v2.21.5-1:2261-2265, v2.30.7-1:3422-3430), and a remote exit was a
# system error before NCCL 2.13 added ncclRemoteError (NCCLUtils.cpp getNcclErrorDetailStr: 'It can be also caused by
# unexpected exit of a remote peer'); NCCL's own last error names the closed socket ('socketProgress: Connection
# closed by remote peer', src/misc/socket.cc v2.30.7-1:58). After torch's watchdog aborted a communicator (a peer's
# error, or the collective timeout) every call on it raises 'NCCL communicator was aborted on rank R.'
# (NCCLUtils.cpp NCCLComm::getNcclComm).
NCCL_PEER_GONE_TEXTS = ("remote process exited", "ncclRemoteError", "Connection closed by remote peer")
NCCL_PEER_FAILED_TEXTS = ("unhandled system error", "ncclSystemError", "NCCL communicator was aborted")


def peer_failure(error: str | None) -> str | None:
    """What this rank's error says of its peers, in words for the stop line, or None where it says nothing of them.

    During a point no live rank closes a connection (a failed point's groups are abandoned only after every rank has
    reported), so a closed one means the peer's process has ended. NCCL's system error and an aborted communicator
    may also be a local fault or a peer that hung past the timeout: named as NCCL says them, not as a death."""
    if error is None:
        return None
    if any(text in error for text in PEER_GONE_TEXTS):
        return "a peer closed its connection"
    if any(text in error for text in NCCL_PEER_GONE_TEXTS):
        return "NCCL reported a remote process exited (or a network error)"
    if any(text in error for text in NCCL_PEER_FAILED_TEXTS):
        return ("NCCL's communicator was aborted (a peer failed or timed out)" if "was aborted" in error
                else "NCCL reported a system error (a peer's exit, or a local fault)")
    return None


# How a wait past the timeout reads: gloo 'Timed out waiting 1000ms for recv operation to complete' (transport/tcp
# unbound_buffer.cc, torch 2.13), NCCL's watchdog '... Timeout(ms)=600000) ran for 600011 milliseconds before timing
# out' (ProcessGroupNCCL.cpp), a store wait's 'Socket Timeout' / TimeoutError; the sweep's agreement waiting for a
# rank's report (runner._agree: 'no report from every rank').
TIMEOUT_TEXTS = ("timed out", "timeout", "timing out", "no report from every rank")


def timed_out(error: str | None) -> bool:
    """Whether a rank's error says it waited past a timeout (TIMEOUT_TEXTS), so a failed record may name the timeout:
    a rank that raised, or whose peer died (its connection closed), did not fail by it."""
    return error is not None and any(text in error.lower() for text in TIMEOUT_TEXTS)


def peer_gone(error: str | None) -> bool:
    """Whether this rank's error says a peer failed under it (peer_failure): its report is all it can add."""
    return peer_failure(error) is not None


class PeerDied(Exception):
    """A wait on the store ended because a peer rank died (commbench.comm.peer_watch)."""


def wait_for_keys(store, keys: list[str], timeout_s: float, died=None) -> None:
    """Return once every key is in the store; raise TimeoutError if one is still missing after `timeout_s`, PeerDied
    as soon as `died` (a threading.Event: a peer rank died, so its key never comes) is set.

    Polls store.check with short sleeps: torch's store.wait(keys, timeout) blocks in C++ for the whole timeout, and
    CPython runs a Python signal handler only once it returns (a sweep under srun took a SIGTERM 210 s late, the
    agreement's timeout), and each wait that times out logs two c10d warnings ('waitForInput ... likely a timeout',
    torch 2.13), so waits of a second in a loop would log two lines a second while a slow peer finishes."""
    deadline = time.monotonic() + timeout_s
    pause_s = 0.001
    while not store.check(keys):
        if died is not None and died.is_set():
            raise PeerDied("a peer rank died")
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise TimeoutError(f"store keys {', '.join(keys)} not all set within {timeout_s:g} s")
        time.sleep(min(pause_s, left_s))
        pause_s = min(2 * pause_s, POLL_MAX_S)


class IsolatedBackend:
    """A backend whose `world` is a replaceable group with its own timeout; everything else delegates."""

    def __init__(self, base, timeout_s: float) -> None:
        self._base = base
        self.timeout_s = timeout_s
        self._made: dict = {}
        self.world = self._new_world()

    def __getattr__(self, name: str):
        return getattr(self._base, name)

    def _timeout(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.timeout_s)

    def _new_world(self):
        import torch.distributed as dist

        from commbench.comm.torch_backend import TorchCommunicator

        ranks = list(range(self._base.world_size))
        group = dist.new_group(ranks, timeout=self._timeout(), backend=self._base.name)
        world = TorchCommunicator(group, ranks, self._base.rank)
        if self._base.name == "gloo":
            # gloo connects the group's full mesh inside new_group and a rank returns once its own side is
            # connected: torch 2.13 adds no barrier after it unless TORCH_DIST_INIT_BARRIER=1
            # (distributed_c10d.py:_is_barrier_after_init). A rank that then left without using the group (nothing
            # pending, or the last point's rebuild) closed its sockets under a peer still connecting ("Gloo
            # connectFullMesh failed ... Connection closed by peer"). No rank passes this barrier before all entered it.
            world.barrier()
        return world

    def set_timeout(self, timeout_s: float) -> None:
        """Use groups with this timeout from now on (collective: every rank calls it with the same value)."""
        if timeout_s != self.timeout_s:
            self.timeout_s = timeout_s
            self.rebuild()

    def rebuild(self) -> None:
        """Abandon the current groups (after a failure) and make a fresh measurement world."""
        self._made = {}
        self.world = self._new_world()

    def split(self, groups: Sequence[Sequence[int]], *, fresh: bool = False):
        import torch.distributed as dist

        from commbench.comm.torch_backend import TorchCommunicator

        key = (tuple(tuple(g) for g in groups), fresh)
        if key not in self._made:
            mine = [list(g) for g in groups if self._base.rank in g]
            if len(mine) != 1:
                raise ValueError(f"rank {self._base.rank} must be in exactly one group, is in {len(mine)}")
            if not fresh and len(groups) == 1 and mine[0] == list(range(self._base.world_size)):
                self._made[key] = self.world
            else:
                group, _ = dist.new_subgroups_by_enumeration([list(g) for g in groups], timeout=self._timeout(),
                                                             backend=self._base.name)
                self._made[key] = TorchCommunicator(group, mine[0], mine[0].index(self._base.rank))
        return self._made[key]

    def comm_for(self, groups):
        return self.world if groups is None else self.split(groups)


class Coordinator:
    """Agreement between ranks through the launch's store (works when process groups are broken)."""

    def __init__(self, store, rank: int, world_size: int, prefix: str = "commbench/sweep") -> None:
        self.store, self.rank, self.world_size, self.prefix = store, rank, world_size, prefix
        self.died = None  # a threading.Event set when a peer rank died (PeerWatch.died): waits end at once

    @classmethod
    def from_default_group(cls, backend) -> "Coordinator":
        from torch.distributed.distributed_c10d import _get_default_store

        return cls(_get_default_store(), backend.rank, backend.world_size)

    def share(self, name: str, value: str | None, timeout_s: float) -> str:
        """Rank 0 publishes `value`; every rank returns it."""
        key = f"{self.prefix}/share/{name}"
        if self.rank == 0:
            self.store.set(key, value or "")
        wait_for_keys(self.store, [key], timeout_s)
        return self.store.get(key).decode()

    def agree(self, step: str, error: str | None, timeout_s: float) -> list[tuple[int, str]]:
        """Report this rank's outcome for `step`; return every failed rank's (rank, error) in the order the
        ranks reported them: a rank that raised at once comes before the peers that then timed out waiting
        for it (by rank number, the cause on rank 3 of 4 fell behind three timeouts and was cut off).

        Raises TimeoutError when some rank does not report within `timeout_s`."""
        self.report(step, error)
        keys = [f"{self.prefix}/{step}/done/{r}" for r in range(self.world_size)]
        try:
            wait_for_keys(self.store, keys, timeout_s, self.died)
        except TimeoutError:
            missing = [r for r in range(self.world_size) if not self.store.check([keys[r]])]
            raise TimeoutError(f"rank(s) {missing} did not report within {timeout_s:g} s") from None
        return self.failures(step)

    def report(self, step: str, error: str | None) -> None:
        """Post this rank's outcome for `step` (its error, or None: ok) without waiting for anyone."""
        base = f"{self.prefix}/{step}"
        if error is not None:
            order = self.store.add(f"{base}/num_failed", 1)
            self.store.set(f"{base}/err/{self.rank}", f"{order}:{error}")
        self.store.set(f"{base}/done/{self.rank}", "1")

    def failures(self, step: str) -> list[tuple[int, str]]:
        """The (rank, error) of every rank that has reported a failure for `step` so far, in the order reported."""
        base = f"{self.prefix}/{step}"
        if self.store.add(f"{base}/num_failed", 0) == 0:
            return []
        failed = []
        for r in range(self.world_size):
            if self.store.check([f"{base}/err/{r}"]):
                order, _, text = self.store.get(f"{base}/err/{r}").decode().partition(":")
                failed.append((int(order), r, text))
        return [(r, text) for _, r, text in sorted(failed)]
