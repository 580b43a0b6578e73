"""A sweep under a launcher (srun, torchrun) whose peer rank dies mid-point, and the store waits a signal must reach.

Under a simulated srun, rank 1 killed -9 at point 2: rank 0's gloo all_reduce raised 'Connection reset by peer' at
once, then rank 0 waited the agreement (3 x timeout_s + 30 s = 210 s) for a report rank 1 could never send, inside
TCPStore.wait in C++, where the launcher's SIGTERM did not take effect until the wait ended (torchrun and scancel
SIGKILL after 30 s: no record of the point, no 'interrupted' line). Now the store is polled (a Python signal handler
runs meanwhile), and a rank whose own collective failed on a closed connection records the point failed and stops
at once under a launcher, as bench does."""

from __future__ import annotations

import datetime
import signal

from commbench.sweep.isolation import Coordinator
from tests.distributed import free_port



def test_the_agreement_wait_lets_a_signal_handler_run():
    """The handler posts the missing rank's report: it can only help while the wait is still waiting (the old
    TCPStore.wait ran it after its 20 s timeout, and agree raised TimeoutError)."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", free_port(), 1, True, timeout=datetime.timedelta(seconds=30))
    previous = signal.signal(signal.SIGALRM, lambda *_: store.set("commbench/sweep/point0/done/1", "1"))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        failed = Coordinator(store, rank=0, world_size=2).agree("point0", None, timeout_s=20)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert failed == []
