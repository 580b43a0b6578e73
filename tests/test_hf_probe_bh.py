"""`plan --model hf:PATH` on a config an outside probe (probe BH, 2026-12-06) found planned silently as one of two
models: a Nemotron-H config with tie_word_embeddings true, which transformers builds untied and Megatron-Bridge
ties."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.planner.models.hf_config import load_hf_model
from tests.test_hf_launch_fidelity import _refused, _variant


@pytest.mark.parametrize("folder", ["NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Nemotron-H-8B-Base-8K"])
def test_nemotron_h_tied_embeddings_is_refused_in_one_line_naming_the_key(tmp_path, folder):
    out = _refused(_variant(tmp_path, folder, tie_word_embeddings=True), "--emit", "megatron")
    assert "tie_word_embeddings=true" in out and "nemotron_h" in out and "false" in out


@pytest.mark.parametrize("folder", ["NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Nemotron-H-8B-Base-8K"])
def test_nemotron_h_untied_as_released_is_read_untied(tmp_path, folder):
    model = load_hf_model(_variant(tmp_path, folder, tie_word_embeddings=False))
    assert model.tied_embeddings is False


def test_the_refusal_is_a_user_error_not_a_crash(tmp_path):
    with pytest.raises(CommbenchError, match="tie_word_embeddings"):
        load_hf_model(_variant(tmp_path, "Nemotron-H-8B-Base-8K", tie_word_embeddings=True))
