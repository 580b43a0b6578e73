"""Transcribe Megatron-Bridge's published pre-training tables into run rows (the calibration-runs.json
row format) for the held-out benchmarks: never for commbench/data/calibration-runs.json.

    python tools/published_tables.py /path/to/Megatron-Bridge.git [--commit REV] [--after 26.02.01] > rows.json

Reads docs/performance-summary.md and docs/performance-summary-archive.md at the commit (a git
directory; nothing is run). Sections "## <release> NeMo Container", then "### Pre-Training
Performance" (SFT and LoRA tables are skipped), then "#### Model: <name>" tables with a System
column (the 26.02-and-later layout; the 25.x tables, "#### System:", are what calibration-runs.json
already holds). "n/a" is None; an FSDP column goes into the notes as FSDP=<n>, as calibration-runs.json
states it. Only releases newer than --after are written.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

FILES = ("docs/performance-summary.md", "docs/performance-summary-archive.md")
COLUMNS = {"System": "gpu", "#-GPUs": "num_gpus", "Precision": "precision", "GBS": "gbs", "MBS": "mbs",
           "Sequence Length": "seq_len", "FSDP": "fsdp", "TP": "tp", "PP": "pp", "CP": "cp", "VP": "vp", "EP": "ep",
           "Tokens / sec / GPU": "tokens_per_s_per_gpu", "Model TFLOP / sec / GPU": "tflops_per_gpu"}
INTEGER = {"num_gpus", "gbs", "mbs", "seq_len", "fsdp", "tp", "pp", "cp", "vp", "ep"}


def _version(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _value(name: str, text: str):
    if text.lower() in ("n/a", "", "-"):
        return None
    if name in INTEGER:
        return int(text)
    if name in ("tokens_per_s_per_gpu", "tflops_per_gpu"):
        return float(text) if "." in text else int(text)
    return text


def footnotes(markdown: str) -> dict[str, str]:
    """[^name]: text."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\[\^([^\]]+)\]:\s*(.+)$", markdown, re.M)}


def rows_of(markdown: str, source: str, after: str) -> list[dict]:
    """Pre-training rows of the Model tables of releases newer than `after` (a cell's footnote marker is
    dropped from its value and the footnote's text added to the row's notes)."""
    rows, release, pretraining, model, header = [], None, False, None, None
    notes_by_name = footnotes(markdown)
    for line in markdown.splitlines():
        if m := re.match(r"^## (\d+\.\d+(?:\.\d+)?) NeMo Container", line):
            release, pretraining, model, header = m.group(1), False, None, None
        elif line.startswith("### "):
            pretraining, model, header = line.strip() == "### Pre-Training Performance", None, None
        elif m := re.match(r"^#### Model: (.+)$", line):
            model, header = m.group(1).strip(), None
        elif line.startswith("#### "):
            model, header = None, None
        elif line.startswith("|") and release and pretraining and model and _version(release) > _version(after):
            cells = _cells(line)
            if header is None:
                header = [COLUMNS.get(c) for c in cells]
                continue
            if set("".join(cells)) <= set("-: "):
                continue
            marks = [m for c in cells for m in re.findall(r"\[\^([^\]]+)\]", c)]
            row = {k: _value(k, re.sub(r"\[\^[^\]]+\]", "", c).strip()) for k, c in zip(header, cells) if k}
            fsdp = row.pop("fsdp", None)
            notes = f"Megatron-Bridge/NeMo {release} container; task=Pre-Training; system={row['gpu']}"
            notes += "".join(f"; footnote: {notes_by_name.get(m, m)}" for m in marks)
            rows.append({"source": source, "model": model, **row, "etp": None,
                         "notes": notes + (f"; FSDP={fsdp}" if fsdp is not None else ""), "release": release})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a Megatron-Bridge git directory")
    parser.add_argument("--commit", default="067f987df03b8355b03192d88d70f1709fedf51a")
    parser.add_argument("--after", default="26.02.01", help="write releases newer than this")
    args = parser.parse_args()
    found = subprocess.run(["git", "--git-dir", args.repo, "rev-parse", "--verify", f"{args.commit}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode:
        parser.error(f"{args.repo}: not a Megatron-Bridge git directory holding commit {args.commit} "
                     f"({found.stderr.strip().splitlines()[-1] if found.stderr.strip() else 'git failed'})")
    commit = found.stdout.strip()
    rows = []
    for path in FILES:
        text = subprocess.run(["git", "--git-dir", args.repo, "show", f"{commit}:{path}"], check=True,
                              capture_output=True, text=True).stdout
        rows += rows_of(text, f"https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/{commit}/{path}", args.after)
    json.dump(rows, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
