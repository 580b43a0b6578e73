"""Files commbench writes: checking an output path before anything launches, cutting a torn last
line before appending, and one writer at a time per output file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


MAX_LINE_BYTES = 16 << 20  # no record is near this; a longer "line" is damage (results.records reads no further)


def _is_record(line: bytes) -> bool:
    """Whether `line` is a whole commbench record (a JSON object with a record_type), as the readers
    (results.records.iter_records) take one: a last line that is one lacks only its newline (a file edited by hand or
    written with '\\n'.join), and is kept; one that is not is a write cut off (a kill, a full disk) that they skip."""
    import json

    if len(line) >= MAX_LINE_BYTES:
        return False
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and isinstance(data.get("record_type"), str)


def _last_line_start(handle, size: int) -> int:
    """The offset just past the last newline of the open file (0 when it holds none), searched back chunk by chunk."""
    end = size
    while end > 0:
        start = max(0, end - (1 << 20))
        handle.seek(start)
        cut = handle.read(end - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def torn_tail(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(offset, length) of the file's last line when it has no newline and is not a whole record (_is_record): what
    repair_torn_tail cuts and the readers skip; None otherwise (a missing or empty file, a newline at its end, a whole
    record that lacks only its newline)."""
    target = Path(path)
    try:
        handle = target.open("rb")
    except OSError:
        return None
    with handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        start = _last_line_start(handle, size)
        if size - start < MAX_LINE_BYTES:
            handle.seek(start)
            if _is_record(handle.read(size - start)):
                return None
        return start, size - start


def whole_size(path: str | os.PathLike[str]) -> int:
    """The bytes of the file that hold its records, a torn last line (torn_tail) left out: 0 for a missing file, an
    empty one, or one whose only line is torn (a header cut off by a kill or a full disk)."""
    target = Path(path)
    try:
        size = target.stat().st_size if target.is_file() else 0
    except OSError:
        return 0
    torn = torn_tail(target) if size else None
    return size if torn is None else torn[0]


def repair_torn_tail(path: str | os.PathLike[str]) -> int:
    """Before appending: end the file's last line. A whole record lacking its newline gets one (kept, as the readers
    read it); a torn one (a write cut off by a kill or a full disk, which the readers skip) is cut, and said in one
    line on stderr naming the file, the line and the bytes. Returns the bytes cut."""
    import sys

    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return 0
    torn = torn_tail(target)
    with target.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        if torn is None:   # a whole record: only its newline was missing
            handle.write(b"\n")
            return 0
        start, length = torn
        handle.seek(0)
        line_number, read = 1, 0
        while read < start:
            chunk = handle.read(min(1 << 20, start - read))
            line_number += chunk.count(b"\n")
            read += len(chunk)
        handle.truncate(start)
    print(f"warning: {path}: its last line (line {line_number}, {length} bytes, no newline) is not a whole record "
          "(a write cut off by a kill or a full disk): cut before appending", file=sys.stderr, flush=True)
    return length


def safe_file_stem(text: str, limit: int = 80) -> str:
    """`text` (a name read from a file: a collective, a sweep name) as one file name inside its folder:
    only letters, digits, '.', '_' and '-'; no leading dot; at most `limit` characters."""
    import re

    stem = re.sub(r"[._]{2,}", "_", re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text))).strip("._")[:limit]
    return stem or "unnamed"


def results_so_far(path: str | os.PathLike[str]) -> str:
    """How a failed or stopped run's message ends: where its results are, or that none were written."""
    if not str(path) or str(path).startswith("("):  # "(verify-plan writes no file)"
        return str(path).strip("()")
    target = Path(path)
    try:
        written = target.is_file() and target.stat().st_size > 0
    except OSError:
        written = False
    return f"results measured so far are in {path}" if written else f"nothing was written to {path}"


def _file_in_the_way(target: Path) -> Path | None:
    """The first existing ancestor of `target` that is not a folder, if any."""
    for parent in reversed(target.absolute().parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def _refuse_unwritable_shape(path: str | os.PathLike[str], option: str) -> Path:
    """`path` as a Path, unless it is a folder or a file stands where one of its folders should (one line)."""
    from commbench.errors import CommbenchError

    target = Path(path)
    if target.is_dir():
        raise CommbenchError(f"{option}={str(path)!r} is a directory: give a file path")
    blocker = _file_in_the_way(target)
    if blocker is not None:
        raise CommbenchError(f"{option}={str(path)!r} cannot be written: {str(blocker)!r} is a file, not a folder")
    return target


# Folders check_output_file / check_output_dir made for outputs this command has not written yet: a command that is
# then refused (an input rejected after -O was checked) removes those still empty (remove_made_folders), so a refusal
# leaves no `missing/` behind. The CLI's command wrapper starts each command with none (base.command).
_made_folders: list[Path] = []


def _make_folder(folder: Path) -> None:
    """mkdir -p `folder`, recording each folder it makes (deepest last)."""
    missing = [parent for parent in (folder.absolute(), *folder.absolute().parents) if not parent.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    _made_folders.extend(reversed(missing))


def forget_made_folders() -> None:
    _made_folders.clear()


def remove_made_folders() -> None:
    """Remove the folders the output checks made that are still empty, deepest first (a refused command's)."""
    while _made_folders:
        try:
            _made_folders.pop().rmdir()
        except OSError:   # written into (a file this run or another made there), or gone: kept
            pass


def check_output_file(path: str | os.PathLike[str], option: str) -> Path:
    """Make sure `path` can be written (appended to) before any work starts; one line naming the
    option otherwise. Creates missing parent folders; leaves no new file behind."""
    from commbench.errors import CommbenchError

    target = _refuse_unwritable_shape(path, option)
    existed = target.exists()
    try:
        _make_folder(target.parent)
        with target.open("a"):
            pass
    except OSError as exc:
        raise CommbenchError(f"{option}={str(path)!r} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        target.unlink(missing_ok=True)
    return target


def probe_output_file(path: str | os.PathLike[str], option: str) -> None:
    """check_output_file's refusals without touching the disk (for a dry run): no folder made, no file
    opened; whether it can be written is judged by the permissions of the file or its nearest folder."""
    from commbench.errors import CommbenchError

    target = _refuse_unwritable_shape(path, option)
    nearest = target if target.exists() else next(p for p in target.absolute().parents if p.exists())
    if not os.access(nearest, os.W_OK):
        raise CommbenchError(f"{option}={str(path)!r} cannot be written: {str(nearest)!r} is not writable")


def refuse_empty_path(path: str | os.PathLike[str], option: str, what: str = "a file path") -> None:
    """An output path given as empty (or blank) text is refused in one line, never replaced by a default name: the
    one rule of every writer (an unset shell variable in `-O "$OUT"`; a default-named file would hide the mistake,
    and a --resume would start a new file over)."""
    from commbench.errors import refuse_empty

    refuse_empty(path, option, what)


def refuse_empty_inputs(*given: tuple[str, object, str]) -> None:
    """Each (option, path or list of paths or None, what) given as empty text is refused in one line
    (refuse_empty_path), the one rule of every path a command reads: '' read as the current folder said 'cannot be
    read: Is a directory', or 'No such file', or verify-plan planned from ./plan.json (an unset shell variable ran
    whatever plan was there)."""
    for option, value, what in given:
        for path in value if isinstance(value, (list, tuple)) else [value]:
            if path is not None:
                refuse_empty_path(path, option, what)


def same_file(path: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether `path` and `other` are one existing file: the same path, a symlink to it or a hard link (samefile)."""
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):   # one of them does not exist (or is no path): nothing of it can be overwritten
        return False


def input_path(value: str) -> str:
    """The file an input option names, its form's prefix left out (--model hf:PATH, --routing trace:FILE)."""
    for prefix in ("hf:", "trace:"):
        if value.startswith(prefix):
            return value[len(prefix):]
    return value


def refuse_writing_inputs(option: str, given: str | os.PathLike[str], written: Iterable[str | os.PathLike[str]],
                          inputs: Iterable[str | None]) -> None:
    """Refuse in one line, --force or not, an output whose file (`written`: the file -O names, or the files a command
    writes into the folder -O names) is one of the files the command reads (`inputs`): the same path, a symlink to it
    or a hard link (same_file). `fit b.jsonl -O b.jsonl --force` replaced the measurements with a profile naming the
    file it destroyed; --force replaces a file commbench did not write, never what the command reads. The one rule of
    every command that writes a file."""
    from commbench.errors import CommbenchError

    read = [input_path(str(path)) for path in inputs if path]
    for target in written:
        match = next((path for path in read if same_file(target, path)), None)
        if match is not None:
            written_name = os.fspath(target)
            what = (f"is the input {match!r}" if written_name == os.fspath(given) else
                    f"would write {written_name!r}, " + ("an input" if os.path.normpath(written_name) ==
                                                          os.path.normpath(match) else f"which is the input {match!r}"))
            raise CommbenchError(f"{option}={os.fspath(given)!r} {what}: writing it would overwrite what the command "
                                 "reads (refused even with --force); choose another path")


def path_from(absolute: str, folder: str | os.PathLike[str]) -> str | None:
    """`absolute`'s path relative to `folder`, as a file that names another records it beside the absolute one (a
    fitted profile its results files, a plan its --system / --calibration), or None on another drive (Windows)."""
    try:
        return os.path.relpath(absolute, os.path.abspath(folder))
    except ValueError:
        return None


def recorded_places(entry: dict, folder: Path, from_key: str, whose: str) -> list[tuple[Path, str]]:
    """Where to look for a file another file records ({path: as given, absolute, `from_key`: from `folder`}), first
    found wins, each with how: from `whose` folder (the two moved together), the absolute path recorded, as given
    from here, beside `whose` file (a record that predates the first two: the last two alone)."""
    places = []
    if isinstance(entry.get(from_key), str):
        places.append((Path(os.path.normpath(folder / entry[from_key])), f"from the {whose}'s folder: {entry[from_key]}"))
    if isinstance(entry.get("absolute"), str):
        places.append((Path(entry["absolute"]), f"the absolute path the {whose} recorded"))
    places += [(Path(entry["path"]), "as given, from here"), (folder / entry["path"], f"beside the {whose}")]
    seen, out = set(), []
    for path, how in places:
        if os.path.abspath(path) not in seen:
            seen.add(os.path.abspath(path))
            out.append((path, how))
    return out


# Names of the files commbench writes: an --out folder not yet made that ends in one is a file meant, not a folder
FILE_SUFFIXES = frozenset({".json", ".jsonl", ".txt", ".env", ".md", ".toml", ".png", ".py", ".conf"})


def check_output_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Make sure folder `path` exists (created if missing) and can be written; one line otherwise."""
    import tempfile

    from commbench.errors import CommbenchError

    refuse_empty_path(path, option, "a folder")
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise CommbenchError(f"{option}={str(path)!r} is a file: give a folder")
    if not target.exists() and target.suffix.lower() in FILE_SUFFIXES:
        # `plan -O out/plan.json` (bench's and fit's -O name a file) made a folder called plan.json
        raise CommbenchError(f"{option}={str(path)!r} names a file, but {option} is the folder the command writes its "
                             f"files into: give a folder, e.g. {option} {str(target.parent or '.')!r}")
    blocker = _file_in_the_way(target)
    if blocker is not None:
        raise CommbenchError(f"{option}={str(path)!r} cannot be written: {str(blocker)!r} is a file, not a folder")
    try:
        _make_folder(target)
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        raise CommbenchError(f"{option}={str(path)!r} cannot be written: {exc.strerror or exc}") from None
    return target


def _lock_holder(handle) -> int | None:
    """The PID holding a flock on the open file `handle`'s inode, from /proc/locks (Linux), or None."""
    stat = os.fstat(handle.fileno())
    suffix = f":{stat.st_ino}"
    try:
        rows = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].endswith(suffix) and fields[4] != str(os.getpid()):
            return int(fields[4])
    return None


def writer_of(path: str | os.PathLike[str]) -> int | None:
    """The PID of a commbench run writing `path` now (it holds the file's OutputLock), 0 where one does and /proc/locks
    cannot name it, None where no run holds it (or the file cannot be opened): a file in use is a run in progress,
    its missing points not yet written rather than lost."""
    import fcntl

    try:
        handle = Path(path).open("rb")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _lock_holder(handle) or 0
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


def refuse_being_written(path: str | os.PathLike[str], named: str, action: str) -> None:
    """Refuse (one line, exit 2) to read as finished a results file a commbench run is still writing (writer_of):
    its points not yet written would read as a run cut short, and what is built on it (a comparison, a fitted
    profile, a plan) would be of part of the run. `named`: how the line names the file (NEW='x', results file 'x');
    `action`: what to do once the run has ended (compare it, fit it). The one rule of compare, fit, tune --results
    and nccl-tuner."""
    from commbench.errors import CommbenchError

    pid = writer_of(path)
    if pid is not None:
        who = f"PID {pid}" if pid else "another process"
        raise CommbenchError(f"{named} is still being written by {who} (a commbench run in progress): {action} once "
                             "that run has ended")


def check_results_target(path: str | os.PathLike[str], option: str) -> None:
    """Appending is only to a commbench results file: missing, empty, or one whose first line is a
    commbench header (a symlink is judged by what it points to). Anything else is refused in one line:
    cutting its 'torn' last line and appending would damage it."""
    import json

    from commbench.errors import CommbenchError

    target = Path(path)
    refuse_empty_path(path, option)
    if not target.exists() or target.is_dir():
        return  # check_output_file says what is wrong with a folder
    if not target.is_file():
        raise CommbenchError(f"{option}={str(path)!r} is not a regular file (a device or a pipe): give a results file path")
    head = _head(target, 1 << 16)
    if not head:
        return
    try:
        first = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        first = None
    torn_header = b"\n" not in head and head.startswith(b'{"record_type":"header"')  # cut by a kill: repaired
    if not torn_header and not (isinstance(first, dict) and first.get("record_type") == "header"):
        raise CommbenchError(f"{option}={str(path)!r} is not a commbench results file (its first line is not a "
                             "commbench header): commbench appends only to its own results; choose another file")


class OutputLock:
    """An exclusive lock on an output file for the length of a run, so two runs never write one file
    (a second run gets one line naming the PID that holds it). flock: released when the process ends."""

    def __init__(self, path: str | os.PathLike[str], option: str, *, results: bool = True) -> None:
        import fcntl

        from commbench.errors import CommbenchError

        if results:
            check_results_target(path, option)
        target = check_output_file(path, option)
        self._created = None if target.exists() else target
        self._handle = target.open("a")
        try:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _lock_holder(self._handle)
            self._handle.close()
            self._created = None
            who = f"PID {holder}" if holder else "another process"
            raise CommbenchError(f"{option}={str(path)!r} is in use by {who} (another commbench run writing it): "
                                 f"wait for it to finish or choose another file") from None

    def release(self) -> None:
        """Unlock; a file this lock created and nothing wrote (the run was refused) is removed."""
        if self._created is not None and self._created.exists() and self._created.stat().st_size == 0:
            self._created.unlink()
        self._handle.close()

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _head(path: Path, num_bytes: int = 4096) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(num_bytes)
    except OSError:
        return b""


def remove_if_written(path: str | os.PathLike[str], marker: str) -> bool:
    """Delete `path` when it is a file commbench wrote (its `marker` in the first 4 KiB, as claim_output checks);
    a file of that name someone else wrote is kept. Whether it was deleted."""
    target = Path(path)
    if target.is_file() and marker.encode() in _head(target):
        target.unlink()
        return True
    return False


def claim_output(path: str | os.PathLike[str], option: str, *, marker: str, what: str,
                 force: bool = False, force_option: str | None = "--force") -> OutputLock:
    """Lock a file that will be written whole (replaced). Refused in one line when it is empty text
    (an unset shell variable), in use by another commbench run, or holds something that is not a
    `what` (no `marker` in its first 4 KiB), unless `force`: nothing the command did not make is lost."""
    from commbench.errors import CommbenchError

    refuse_empty_path(path, option)
    if Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir():
        raise CommbenchError(f"{option}={str(path)!r} is not a regular file (a device or a pipe): give a file path")
    lock = OutputLock(path, option, results=False)
    target = Path(path)
    if not force and target.is_file() and target.stat().st_size and marker.encode() not in _head(target):
        lock.release()
        raise CommbenchError(f"{option}={str(path)!r} exists and is not a {what} written by commbench: "
                             "choose another path" + (f", or pass {force_option} to replace it" if force_option else ""))
    return lock


def _umask() -> int:
    mask = os.umask(0o022)  # read it: the only portable way sets it, so set it back at once
    os.umask(mask)
    return mask


def write_output(path: str | os.PathLike[str], text: str, option: str, *, marker: str, what: str,
                 force: bool = False, claimed: bool = False, force_option: str | None = "--force") -> None:
    """Write `text` as the whole of `path` under claim_output's rules (`claimed`: the caller holds the
    claim already); one line when the disk refuses."""
    import contextlib
    import tempfile

    from commbench.errors import CommbenchError

    with contextlib.nullcontext() if claimed else claim_output(path, option, marker=marker, what=what, force=force,
                                                                force_option=force_option):
        target = Path(path).resolve()
        temporary = None
        try:  # a new file renamed over the old: a full disk leaves the old one whole
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent, prefix=f".{target.name}.",
                                             delete=False) as handle:
                temporary = handle.name
                handle.write(text)
                # a temporary file is 0600: give the file the mode a plain open() would (the umask's)
                os.chmod(handle.fileno(), 0o666 & ~_umask())
            os.replace(temporary, target)
        except OSError as exc:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
            raise CommbenchError(f"{option}={str(path)!r} cannot be written: {exc.strerror or exc}") from None
