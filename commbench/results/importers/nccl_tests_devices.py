"""The ranks of an nccl-tests text log: its '#  Rank' lines, and the world size where nccl-tests cut them.

nccl-tests prints each process's device block into one MAX_LINE = 2048-character buffer (src/util.cu
writeDeviceReport: `if (len < MAX_LINE) len += snprintf(line+len, MAX_LINE-len, "#  Rank %2d Group %2d Pid %6d on %10s
device %2d ...")`, then `if (len >= MAX_LINE) strcpy(line+MAX_LINE-5, "...\\n")`; before v2.17 (src/common.cu at
v2.13.0) snprintf stops at the cap with no marker, and the next line printed runs into the cut one). A process of more
than about 20 ranks (-t 4 -g 8 on one node; fewer with long host names) lists only the ranks that fit: the lines left
are not the world. nccl-tests numbers rank i of process p as p x nThread x nGpus + i, and a cut never reaches a
block's first line, so the world is (highest listed rank // (nThread x nGpus) + 1) x nThread x nGpus.
"""

from __future__ import annotations

import re

from commbench.errors import CommbenchError

MAX_LINE = 2048
CUT_MARK = "..."
RANK_RE = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)")
RANK_START_RE = re.compile(r"#\s+Rank\s+\d+\s")
CUT_NOTE = ("the log lists '#  Rank' lines for {listed} of its {world} ranks, cut by nccl-tests' {chars}-character cap "
            "on each process's device block (src/util.cu writeDeviceReport, MAX_LINE); world size {world} = {procs} "
            "process(es) x nThread {threads} x nGpus {gpus}; an unlisted rank takes its process's host and first "
            "listed device (as a -J file's devices do)")


def rank_pieces(line: str) -> list[str]:
    """A comment line split where another '#  Rank' line starts inside it (a block cut with no marker runs into the
    next block's first line, before v2.17); the line itself otherwise."""
    starts = [m.start() for m in RANK_START_RE.finditer(line) if m.start() > 0]
    return [line[a:b] for a, b in zip([0, *starts], [*starts, len(line)])]


class DeviceList:
    """The '#  Rank' lines of one device report, read line by line (`add`), and the ranks they stand for (`ranks`)."""

    def __init__(self) -> None:
        self.listed: list[tuple[int, str, str]] = []   # (rank, host, device) of each whole line, in order
        self.chars: dict[int, int] = {}   # rank of a whole line -> characters nccl-tests printed for it and after it
        self.marked: set[int] = set()     # ranks of the whole lines nccl-tests' '...' follows
        self.last: int | None = None      # the rank of the last whole line
        # (host, pid) of the whole lines' processes, as NCCL's log lines name theirs ("host:pid:tid", NCCL_LINE_PID_RE):
        # both print the host name cut at its first '.' (nccl-tests src/common.h getHostName, NCCL src/debug.cc)
        self.processes: set[tuple[str, int]] = set()

    def __bool__(self) -> bool:
        return bool(self.listed)

    def add(self, line: str) -> bool:
        """Read one comment line (stripped; a bare '...' too); whether it belongs to the device report."""
        pieces = rank_pieces(line)
        if not RANK_START_RE.match(pieces[0]):
            stem = line[:-len(CUT_MARK)]
            if self.last is None or not line.endswith(CUT_MARK) or not re.fullmatch(r"(#\s*(R\w*)?)?", stem):
                return False
            self._cut(line, marked=True)   # the cut fell at a line's start: '...' alone, or '#  Ran...'
            return True
        for index, piece in enumerate(pieces):
            match = RANK_RE.match(piece)
            # a piece another line runs into (no newline: cut before v2.17), or one ending in the marker or in the
            # '#' printed next, is cut; its device name is not whole
            if match is None or index < len(pieces) - 1 or piece.endswith((CUT_MARK, "#")):
                self._cut(piece, marked=piece.endswith(CUT_MARK))
                continue
            rank = int(match.group(1))
            self.listed.append((rank, match.group(3), match.group(4).strip()))
            self.processes.add((match.group(3), int(match.group("pid"))))
            self.chars[rank] = len(piece) + 1
            self.last = rank
        return True

    def _cut(self, piece: str, marked: bool) -> None:
        if self.last is not None:
            self.chars[self.last] += len(piece)
            if marked:
                self.marked.add(self.last)

    def ranks(self, threads: int, gpus: int, banner: bool, source: str) -> tuple[list[str], list[str], list[str]]:
        """(hosts, devices, notes) of every rank: the lines as listed where they are the whole world, else the world
        nThread x nGpus x processes states (CUT_NOTE), where each process whose lines are fewer was cut at the cap
        (its '...', or its block within a line of MAX_LINE characters). Refused in one line otherwise: the lines and
        the banner disagree and nothing in the log says which is right."""
        if not self.listed:
            return [], [], []
        per_process = threads * gpus
        by_rank = {rank: (host, device) for rank, host, device in self.listed}
        processes = max(by_rank) // per_process + 1
        world = processes * per_process
        if len(self.listed) >= world:
            return [h for _, h, _ in self.listed], [d for _, _, d in self.listed], []
        if not banner:
            raise CommbenchError(f"{source}: its '#  Rank' lines skip rank(s) (the highest is {max(by_rank)}, "
                                 f"{len(self.listed)} listed) and no banner ('# nThread N nGpus M ...') states the "
                                 "ranks of a process: the world size is unknown; import the log with its banner, or "
                                 "its -J file")
        hosts, devices = [], []
        for process in range(processes):
            mine = [rank for rank in range(process * per_process, (process + 1) * per_process) if rank in by_rank]
            chars = sum(self.chars[rank] for rank in mine)
            if len(mine) < per_process and (process * per_process not in by_rank or (
                    not self.marked.intersection(mine) and chars + max(self.chars[r] for r in mine) < MAX_LINE)):
                raise CommbenchError(
                    f"{source}: the log lists '#  Rank' lines for {len(self.listed)} of the {world} ranks its banner "
                    f"states (nThread {threads} x nGpus {gpus} x {processes} process(es)); process {process}'s block "
                    f"lists {len(mine)} of its {per_process} ranks in {chars} characters with no '{CUT_MARK}', which "
                    f"nccl-tests' {MAX_LINE}-character cap on a block (src/util.cu writeDeviceReport) does not "
                    "explain: the world size is unknown; import a log with its whole device list, or its -J file")
            first = by_rank[process * per_process]
            for rank in range(process * per_process, (process + 1) * per_process):
                host, device = by_rank.get(rank, first)
                hosts.append(host)
                devices.append(device)
        note = CUT_NOTE.format(listed=len(self.listed), world=world, chars=MAX_LINE, procs=processes, threads=threads,
                               gpus=gpus)
        return hosts, devices, [note]
