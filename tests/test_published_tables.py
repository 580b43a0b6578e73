"""tools/published_tables.py: Megatron-Bridge's pre-training tables into run rows the planner reads
(the held-out rows of benchmarks/newer_releases.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from commbench.planner.calibrate.published import published_runs

TOOL = Path(__file__).resolve().parents[1] / "tools" / "published_tables.py"
TABLES = """## 26.06.01 NeMo Container

### Pre-Training Performance

#### Model: DeepSeekV3

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU | Model TFLOP / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|----|----|----|----|----|-----------------------|-------------------------|
| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 | 1635[^slow] |

### SFT Performance

#### Model: LLAMA3_70B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU | Model TFLOP / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|----|----|----|----|----|-----------------------|-------------------------|
| DGX-GB300 | 8 | FP8 | 32 | 1 | 4096 | 1 | 1 | 1 | n/a | n/a | 9999 | 999 |

## 26.04 NeMo Container

### Pre-Training Performance

#### Model: LLAMA3_70B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | Tokens / sec / GPU | Model TFLOP / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|------|----|----|----|----|----|-----------------------|-------------------------|
| DGX-GB300 | 64 | FP8 | 256 | 2 | 8192 | 64 | 1 | 1 | 1 | n/a | n/a | 5243 | 2355 |

## 26.02 NeMo Container

### Pre-Training Performance

#### Model: LLAMA3_70B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | Tokens / sec / GPU | Model TFLOP / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|------|----|----|----|----|----|-----------------------|-------------------------|
| DGX-GB300 | 64 | FP8 | 256 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | n/a | 5000 | 2200 |

[^slow]: A known regression.
"""


def _tool():
    spec = importlib.util.spec_from_file_location("published_tables", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pretraining_rows_of_newer_releases_with_fsdp_and_footnotes():
    rows = _tool().rows_of(TABLES, "src", after="26.02.01")
    assert [(r["release"], r["model"]) for r in rows] == [("26.06.01", "DeepSeekV3"), ("26.04", "LLAMA3_70B")]
    dsv3, llama = rows
    assert dsv3["tflops_per_gpu"] == 1635 and dsv3["vp"] == 8 and dsv3["ep"] == 32 and dsv3["gpu"] == "DGX-GB300"
    assert "footnote: A known regression." in dsv3["notes"]
    assert llama["vp"] is None and llama["ep"] is None and "FSDP=64" in llama["notes"]
    # the planner reads them as published: DeepSeekV3 (the tables' spelling) is the zoo's deepseek-v3
    runs = published_runs(tuple(json.loads(json.dumps(rows))))
    assert [r.model.name for r in runs] == ["deepseek-v3", "llama3.1-70b"] and all(r.layout is not None for r in runs)
