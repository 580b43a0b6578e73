"""The NCCL settings of NCCL's configuration files, read as NCCL reads them.

NVIDIA/nccl src/misc/param.cc (initEnvFunc, setEnvFile; the same from v2.24.3-1 to v2.30.7-1, 73cf1122):
  1. the file NCCL_CONF_FILE names when it is set and not empty, else $HOME/.nccl.conf (not both);
  2. then /etc/nccl.conf.
Each line is `KEY=VALUE` (the key is everything before the first '=', the value everything after: no blank
is trimmed but a trailing '\\r'); a line starting with '#' or without '=' is skipped. NCCL sets each with
setenv(key, value, 0) (src/os/linux.cc ncclOsSetEnv): the process environment wins, then the first file, then
the first line of a key. So a setting from a file is the same to NCCL as that NCCL_* variable exported,
wherever the environment does not set it -- which a combination's processes do not for the axes it leaves
to NCCL (commbench.sweep.combos drops inherited NCCL_ALGO/PROTO/*CHANNELS): a host's /etc/nccl.conf with
NCCL_ALGO=Ring makes its "NCCL default" ring.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

SYSTEM_FILE = "/etc/nccl.conf"


def conf_paths(environ: Mapping[str, str]) -> list[str]:
    """The files NCCL reads, in its order (whether they exist or not)."""
    named = environ.get("NCCL_CONF_FILE", "")
    if named:
        first = [named]
    else:
        home = environ.get("HOME")
        first = [f"{home}/.nccl.conf"] if home is not None else []
    return [*first, SYSTEM_FILE]


def parse_conf(text: str) -> dict[str, str]:
    """The NCCL_* settings of one file's text, the first line of a key winning (setenv does not overwrite)."""
    settings: dict[str, str] = {}
    for line in text.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.startswith("NCCL_") and key not in settings:
            settings[key] = value
    return settings


def read_conf_files(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Path -> its NCCL_* settings, for each file NCCL would read that can be read here, in NCCL's order (a
    file that sets no NCCL_* variable is kept, with no settings: it was read)."""
    environ = os.environ if environ is None else environ
    found: dict[str, dict[str, str]] = {}
    for path in conf_paths(environ):
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        found[path] = parse_conf(text)
    return found


def effective_settings(nccl_env: Mapping[str, str], nccl_conf: Mapping[str, Mapping[str, str]] | None) -> dict[str, str]:
    """The NCCL_* settings NCCL ran with: the environment's, then each file's in NCCL's order where neither the
    environment nor an earlier file set the key (setenv(key, value, 0))."""
    settings = dict(nccl_env)
    for file_settings in (nccl_conf or {}).values():
        for key, value in file_settings.items():
            settings.setdefault(key, value)
    return settings


def from_files(nccl_env: Mapping[str, str], nccl_conf: Mapping[str, Mapping[str, str]] | None) -> dict[str, str]:
    """Key -> the file that set it, for the effective settings that came from a file (not the environment)."""
    origin: dict[str, str] = {}
    for path, file_settings in (nccl_conf or {}).items():
        for key in file_settings:
            if key not in nccl_env:
                origin.setdefault(key, path)
    return origin
