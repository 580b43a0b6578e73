"""Which rank of a launch died, known on every rank at once: one TCP connection from each rank to rank 0.

Under a launcher that is not commbench's own (torchrun, srun, mpirun) no parent process watches the ranks, and a
rank blocked in C++ (gloo's connectFullMesh waiting in `new_group` for a dead rank's address, a collective waiting
on a live peer that gave up) learns nothing of the death until its timeout runs out: a kill -9 of rank 3 of 4 left
the others 70 s in `new_group` and the agreement (timeout_s 10). The kernel closes a process's sockets however it
ends (SIGKILL, the OOM killer), so:

- rank 0 listens on an ephemeral port of the address it reaches the launch's store from, and publishes it with a
  token through the store; every other rank connects and says its rank.
- A rank whose sweep ends sends BYE before it closes. A connection closed without BYE is a rank gone; rank 0 tells
  every other rank which (DEAD r); a rank whose connection to rank 0 closes without BYE knows rank 0 is gone.
- Nothing here times anything: end of file is the kernel's word that the process is gone (a host cut off the
  network without a FIN is left to the collective timeouts).
- A rank that learns of a death and has not settled its sweep within STUCK_GRACE_S is blocked in C++, where no
  Python code runs: `on_stuck` (the sweep runner's: rank 0 records the point failed, one line, exit 1) ends it.
"""

from __future__ import annotations

import os
import secrets
import selectors
import socket
import sys
import threading
from typing import Callable

STUCK_GRACE_S = 2.0  # after a death: how long the main thread may take to see it before it is taken for blocked
CONNECT_TIMEOUT_S = 10.0
_BYE, _DEAD, _HELLO = "BYE", "DEAD", "HELLO"


def _route_address(host: str) -> str:
    """This host's address on the route to `host` (where the launch's store is): one the other ranks reach."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))   # UDP: nothing is sent
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def store_host(store) -> str:
    """The host of the TCPStore under `store` (PrefixStores unwrapped), else MASTER_ADDR, else loopback."""
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    return getattr(store, "host", None) or os.environ.get("MASTER_ADDR") or "127.0.0.1"


class PeerWatch:
    """The ranks that died, as this rank learns them (`dead`); `died` is set at the first."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.dead: list[int] = []
        self.died = threading.Event()
        self.settled = threading.Event()   # the main thread has seen the death (or the sweep ended)
        self.lock = threading.Lock()       # held while rank 0 writes a record, by the runner or on_stuck
        self.on_stuck: Callable[[list[int]], None] | None = None
        self._socks: dict[int, socket.socket] = {}
        self._bye: set[int] = set()
        self._closing = False

    # ---- set-up (every rank calls `start` with what rank 0 shared)
    def listen(self, host: str) -> str:
        """Rank 0: the address to publish ("host port token")."""
        self._listener = socket.create_server((_route_address(host), 0))
        self._token = secrets.token_hex(8)
        address, port = self._listener.getsockname()[:2]
        return f"{address} {port} {self._token}"

    def start(self, published: str) -> None:
        if self.rank == 0:
            thread = threading.Thread(target=self._serve, name="commbench-peer-watch", daemon=True)
        else:
            address, port, token = published.split()
            sock = socket.create_connection((address, int(port)), timeout=CONNECT_TIMEOUT_S)
            sock.settimeout(None)
            sock.sendall(f"{_HELLO} {token} {self.rank}\n".encode())
            self._socks[0] = sock
            thread = threading.Thread(target=self._follow, args=(sock,), name="commbench-peer-watch", daemon=True)
        thread.start()

    # ---- the sweep's side
    def close(self, *, bye: bool = True) -> None:
        """The sweep ended on this rank: BYE, so the peers do not take its exit for a death (`bye` False: it ended
        on an error of its own, which leaves its peers waiting as a death does, and they stop as for one)."""
        self.settled.set()
        self._closing = True
        for sock in list(self._socks.values()):
            try:
                if bye:
                    sock.sendall(f"{_BYE}\n".encode())
                sock.shutdown(socket.SHUT_RDWR)   # close() alone sends no FIN while the watch thread is in recv
            except OSError:
                pass
            finally:
                sock.close()
        if self.rank == 0 and hasattr(self, "_listener"):
            self._listener.close()

    def dead_text(self) -> str:
        """'rank 3' / 'ranks 1, 3' (the ranks this rank knows died)."""
        return ("rank " if len(self.dead) == 1 else "ranks ") + ", ".join(str(r) for r in self.dead)

    # ---- the watcher thread
    def _gone(self, rank: int) -> None:
        if self._closing or rank in self.dead:
            return
        self.dead.append(rank)
        first = not self.died.is_set()
        self.died.set()
        if self.rank == 0:
            for other, sock in list(self._socks.items()):
                if other != rank:
                    try:
                        sock.sendall(f"{_DEAD} {rank}\n".encode())
                    except OSError:
                        pass
        if first:
            threading.Thread(target=self._if_stuck, name="commbench-peer-watch-stuck", daemon=True).start()

    def _if_stuck(self) -> None:
        if not self.settled.wait(STUCK_GRACE_S) and self.on_stuck is not None:
            self.on_stuck(list(self.dead))

    def _follow(self, sock: socket.socket) -> None:
        """Ranks > 0: read rank 0's words until BYE; end of file without it is rank 0 gone."""
        buffered = b""
        try:
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                buffered += data
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    word, _, arg = line.decode().partition(" ")
                    if word == _BYE:
                        return
                    if word == _DEAD:
                        self._gone(int(arg))
        except OSError:
            pass
        self._gone(0)

    def _serve(self) -> None:
        """Rank 0: accept every rank's connection; one that closes without BYE is that rank gone."""
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        pending: dict[socket.socket, bytes] = {}
        ranks: dict[socket.socket, int] = {}
        try:
            while not self._closing:
                for key, _ in selector.select(timeout=0.5):
                    sock = key.fileobj
                    if sock is self._listener:
                        conn, _ = self._listener.accept()
                        pending[conn] = b""
                        selector.register(conn, selectors.EVENT_READ)
                        continue
                    try:
                        data = sock.recv(4096)
                    except OSError:
                        data = b""
                    if sock in pending:   # before HELLO: who is it?
                        pending[sock] += data
                        line, newline, rest = pending[sock].partition(b"\n")
                        if data and not newline:
                            continue
                        selector.unregister(sock)
                        del pending[sock]
                        word, token, rank = (line.decode(errors="replace").split() + ["", "", ""])[:3]
                        if word == _HELLO and token == self._token and rank.isdecimal():
                            ranks[sock] = int(rank)
                            self._socks[int(rank)] = sock
                            if rest.strip().endswith(_BYE.encode()):   # its sweep ended before this thread ran
                                self._bye.add(int(rank))
                            selector.register(sock, selectors.EVENT_READ)
                        else:
                            sock.close()
                        continue
                    if data and data.strip().endswith(_BYE.encode()):
                        self._bye.add(ranks[sock])
                    if not data:
                        selector.unregister(sock)
                        if ranks[sock] not in self._bye:
                            self._gone(ranks[sock])
        except (OSError, ValueError):   # the listener closed under select at the sweep's end
            pass


def start_peer_watch(rank: int, world_size: int, share: Callable[[str | None], str]) -> PeerWatch | None:
    """Every rank: a PeerWatch joined to rank 0's, or None with one note on stderr where it cannot be made (the sweep
    then learns of a dead peer only from its collectives' errors and timeouts, as before). `share(value)`: rank 0
    publishes `value`, every rank gets it (the sweep's Coordinator.share)."""
    from torch.distributed.distributed_c10d import _get_default_store

    watch = PeerWatch(rank, world_size)
    published, problem = None, None
    if rank == 0:
        try:
            published = watch.listen(store_host(_get_default_store()))
        except OSError as exc:   # said on rank 0; the others read the empty address and say theirs
            problem = exc
    published = share(published)
    try:
        if problem is not None:
            raise problem
        if not published:
            raise OSError("rank 0 could not listen for it")
        watch.start(published)
    except OSError as exc:
        print(f"note: rank {rank}: no peer watch ({type(exc).__name__}: {exc}); a dead peer is found by the "
              "collectives' errors and timeouts only", file=sys.stderr, flush=True)
        watch.close(bye=False)
        return None
    return watch
