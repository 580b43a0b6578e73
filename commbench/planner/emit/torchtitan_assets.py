"""Where the TorchTitan launch of an `hf:PATH` model finds its tokenizer: `config.hf_assets_path`.

TorchTitan 0.3.0 builds the tokenizer from config.hf_assets_path (trainer.py: config.tokenizer.build(
tokenizer_path=config.hf_assets_path)); components/tokenizer.py HuggingFaceTokenizer._load_tokenizer_from_path reads
tokenizer.json there, else vocab.json or vocab.txt (with merges.txt for BPE), and config/manager.py only warns "HF
assets path ... does not exist!". A downloaded Hugging Face model keeps those files beside its config.json, so the
folder the user named is the launch's hf_assets_path when it holds one of them (as an absolute path: the launch runs
from another directory); otherwise the launch keeps the path of the config function it builds on, and a note says
where TorchTitan will look."""

from __future__ import annotations

from pathlib import Path

from commbench.planner.models.spec import ModelSpec

TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")   # _load_tokenizer_from_path's strategies
HF_SOURCE_KEY = "hf-config"   # models/hf_arch.py: the Source of every field of an hf: model's architecture


def hf_folder(model: ModelSpec) -> Path | None:
    """The absolute folder of an hf: model's config.json (None for a zoo or --model-file model)."""
    arch = model.architecture
    if not model.name.startswith("hf:") or arch is None:
        return None
    source = next((s for s in arch.sources.values() if s.key == HF_SOURCE_KEY), None)
    return None if source is None else Path(source.path).resolve().parent


def tokenizer_folder(model: ModelSpec) -> str | None:
    """The hf: model's folder as the launch's hf_assets_path, where it holds a tokenizer file TorchTitan reads."""
    folder = hf_folder(model)
    if folder is None or not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    return str(folder)


def tokenizer_note(model: ModelSpec, kept: str) -> str | None:
    """For an hf: model whose folder holds no tokenizer file: where the launch's TorchTitan looks for one (`kept`:
    the hf_assets_path the launch keeps, or which config function's)."""
    folder = hf_folder(model)
    if folder is None or tokenizer_folder(model) is not None:
        return None
    return (f"{folder} holds no {', '.join(TOKENIZER_FILES)}: the launch keeps config.hf_assets_path = {kept}, where "
            "TorchTitan 0.3.0 builds the tokenizer from (relative to the launch directory); put the model's tokenizer "
            f"files there, or beside {model.name}'s config.json and plan again to point the launch at that folder")
