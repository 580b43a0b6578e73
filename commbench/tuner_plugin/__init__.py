"""commbench's NCCL tuner plugin (commbench_tuner.c, shipped as package data) and its build.

The plugin applies the rules of `commbench nccl-tuner` and leaves NCCL's channel count and cost
table alone wherever no rule speaks (see the C file's header); `build_plugin` compiles it with the
system C compiler into libnccl-tuner-commbench.so, loaded with NCCL_TUNER_PLUGIN=<that path>.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from commbench.errors import CommbenchError

SOURCE_NAME = "commbench_tuner.c"
LIBRARY_NAME = "libnccl-tuner-commbench.so"
COMPILERS = ("cc", "gcc", "clang")


def source_path() -> Path:
    return Path(str(resources.files(__package__).joinpath(SOURCE_NAME)))


def find_compiler() -> list[str] | None:
    """$CC (split as a shell word list) when set, else the first of cc, gcc, clang on PATH."""
    from_env = os.environ.get("CC", "").strip()
    if from_env:
        words = shlex.split(from_env)
        return words if shutil.which(words[0]) else None
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return [found]
    return None


def build_plugin(out_dir: str | Path) -> Path:
    """Compile the plugin into OUT_DIR/libnccl-tuner-commbench.so; one-line CommbenchError when no C
    compiler is found or it fails (with its first error line)."""
    compiler = find_compiler()
    if compiler is None and os.environ.get("CC", "").strip():   # $CC is used alone when set, as make does
        raise CommbenchError(f"CC={os.environ['CC'].strip()!r} is not a command on PATH: set CC to your C compiler, or "
                             "unset it to use cc, gcc or clang")
    if compiler is None:
        raise CommbenchError("no C compiler found (looked for cc, gcc, clang on PATH): install one "
                             "(e.g. apt-get install gcc) to build the tuner plugin")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommbenchError(f"--build-plugin {str(out)!r} cannot be created: {exc.strerror}") from None
    library = out / LIBRARY_NAME
    command = [*compiler, "-shared", "-fPIC", "-O2", "-Wall", "-pthread", "-o", str(library), str(source_path()), "-ldl"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommbenchError(f"the C compiler {compiler[0]!r} could not run: {exc}") from None
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines() or ["?"]
        raise CommbenchError(f"building the tuner plugin failed ({' '.join(command[:1])} exit {done.returncode}): "
                             f"{errors[0].strip()}")
    return library
