"""`plan --model hf:PATH` on configs an outside probe (probe J, 2026-12-05) found planned silently as another model:
vision-language configs, a classification head, Mixtral's router jitter, the config's dropout, Nemotron-H's norm
epsilon, and the TorchTitan refusal of a Qwen3-MoE config with a dense first layer."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.models.hf_config import load_hf_model


def _variant(tmp_path, folder: str, drop=(), **changes) -> str:
    from tests.test_hf_model_types import _config

    return _config(tmp_path, folder, drop, **changes)


def _refused(model: str, *args: str, gpus: int = 64) -> str:
    """The CLI's one-line refusal of a plan (one line, exit 2, no traceback)."""
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus), *args],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output.startswith("error: ") and len(res.output.strip().splitlines()) == 1, res.output
    return res.output.strip()


def _plan(model: str, *args: str, gpus: int = 8) -> dict:
    res = CliRunner().invoke(app, ["plan", "--model", model, "--system", "h100-hgx", "--gpus", str(gpus), "--json",
                                   *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


# --- J4: Nemotron-H's norms take layer_norm_epsilon -------------------------------------------------------------------

def test_nemotron_h_norm_epsilon_is_layer_norm_epsilon_whatever_rms_norm_eps_says(tmp_path):
    """transformers' NemotronH builds every norm with eps=config.layer_norm_epsilon; an rms_norm_eps beside it (1e-6)
    was read first and emitted as --norm-epsilon."""
    model = load_hf_model(_variant(tmp_path, "Nemotron-H-8B-Base-8K", rms_norm_eps=1e-6, layer_norm_epsilon=1e-5))
    assert model.architecture.norm_epsilon == 1e-5
