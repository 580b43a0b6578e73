"""Whether a TorchTitan log trained the --model it is said to be, from what its printed config names (as
megatron.py check_logged_model reads a Megatron-LM log's arguments block). A mismatch is one line: the run would be
predicted as another network.

- 0.1/0.2 print the job config's model section: `name` (the TorchTitan model module: llama3, qwen3, deepseek_v3,
  gpt_oss, ...) and `flavor` (v0.2.2 config/job_config.py Model). A (name, flavor) pair TorchTitan builds a zoo
  model as (TITAN_FLAVOR_MODELS) names that zoo model: qwen3 8B is qwen3-8b, never llama3-8b, though both
  flavors say "8B". A pair it does not know (an experiment's module, a user's flavor) is checked by the parameter
  count its flavor names (30B-A3B, 671B, 120b), within FLAVOR_PARAMS_AGREE.
- 0.3.0 prints model_spec {name, flavor, model: model.to_dict()} (trainer.py Trainer.Config.to_dict): the model
  config's dim, vocab_size and layers (a list, one entry per transformer block, each with attention.n_heads /
  n_kv_heads and, for an MoE block, moe.num_experts and moe.router.top_k). Each printed size is compared with the
  --model's (megatron_arch.py VOCAB_TOLERANCE for the vocabulary).
A model outside the zoo is not checked (its row is listed as not modelled).
"""

from __future__ import annotations

import re
from typing import Any

from commbench.errors import CommbenchError

FLAVOR_PARAMS_RE = re.compile(r"^(\d+(?:\.\d+)?)[bB]\b")   # TorchTitan flavors name total params: 30B-A3B, 671B, 120b
FLAVOR_PARAMS_AGREE = (0.8, 1.25)   # the name rounds (gpt-oss-120b holds 117B): a factor beyond is another model


def _refuse(log: str, what: str, got: Any, model: str, want: Any) -> CommbenchError:
    return CommbenchError(f"{log}: its config has {what}={got!r}, but --model {model} has {want!r}: the log is of "
                          "another model (or a cut-down one); give the --model it trained")


def _check_flavor_params(log: str, name: str, flavor: str, module: Any, model: str) -> None:
    from commbench.planner.models.counts import param_counts
    from commbench.planner.models.zoo import load_model
    match = FLAVOR_PARAMS_RE.match(flavor)
    if match is None:
        return
    have = param_counts(load_model(name)).total / 1e9
    said = float(match.group(1))
    if not FLAVOR_PARAMS_AGREE[0] <= said / have <= FLAVOR_PARAMS_AGREE[1]:
        raise CommbenchError(f"{log}: model.flavor={flavor!r} ({module or '?'}) is a {said:g}B-parameter "
                             f"model, but --model {model} has {have:,.0f}B: give the --model the log trained")


# The (model module, flavor) TorchTitan builds each zoo model as: torchtitan 0.2.2 / 0.3.0 models/*/__init__.py
# flavors, the pairs emit/torchtitan.py TITAN_MODELS launches (the emit stage, which calibrate does not import;
# tests/test_calibrate_titan_log_fields.py holds the two equal). llama3 1B / 3B are the flavors its generated
# config functions name.
TITAN_FLAVOR_MODELS = {
    ("deepseek_v3", "671b"): "deepseek-v3", ("qwen3", "30b-a3b"): "qwen3-30b-a3b",
    ("qwen3", "235b-a22b"): "qwen3-235b-a22b", ("llama3", "8b"): "llama3-8b", ("llama3", "70b"): "llama3.1-70b",
    ("llama3", "405b"): "llama3.1-405b", ("gpt_oss", "120b"): "gpt-oss-120b", ("gpt_oss", "20b"): "gpt-oss-20b",
    ("qwen3", "0.6b"): "qwen3-0.6b", ("qwen3", "1.7b"): "qwen3-1.7b", ("qwen3", "4b"): "qwen3-4b",
    ("qwen3", "8b"): "qwen3-8b", ("qwen3", "14b"): "qwen3-14b", ("qwen3", "32b"): "qwen3-32b",
    ("llama3", "1b"): "llama3.2-1b", ("llama3", "3b"): "llama3.2-3b",
}


def _check_known_flavor(log: str, name: str, module: Any, flavor: str, model: str) -> None:
    """A (module, flavor) TorchTitan builds for a zoo model other than --model's zoo model, refused."""
    trained = TITAN_FLAVOR_MODELS.get((str(module), flavor.lower()))
    if trained is not None and trained != name:
        raise CommbenchError(f"{log}: its config has model name={module!r} flavor={flavor!r}, TorchTitan's "
                             f"{trained}, but --model is {model}: give the --model it trained")


def _printed_sizes(printed: dict[str, Any]) -> dict[str, Any]:
    """The sizes a 0.3.0 model config prints, by the zoo field they are (absent where it prints none)."""
    layers = printed.get("layers")
    blocks = [b for b in layers if isinstance(b, dict)] if isinstance(layers, list) else []
    out: dict[str, Any] = {}
    if isinstance(layers, list):
        out["num_layers"] = len(layers)
    elif printed.get("n_layers") is not None:
        out["num_layers"] = printed["n_layers"]
    if printed.get("dim") is not None:
        out["hidden"] = printed["dim"]
    if printed.get("vocab_size") is not None:
        out["vocab"] = printed["vocab_size"]
    attention = blocks[0].get("attention") if blocks else None
    source = attention if isinstance(attention, dict) else printed
    if source.get("n_heads") is not None:
        out["num_heads"] = source["n_heads"]
        kv = source.get("n_kv_heads")
        out["num_kv_heads"] = kv if kv is not None else source["n_heads"]   # None: as many as the heads
        if source is attention and "kv_lora_rank" in attention:   # MLA: no KV heads of its own
            out.pop("num_kv_heads")
    moe = next((b["moe"] for b in blocks if isinstance(b.get("moe"), dict)), None)
    if moe is not None:
        if moe.get("num_experts") is not None:
            out["num_routed_experts"] = moe["num_experts"]
        router = moe.get("router")
        if isinstance(router, dict) and router.get("top_k") is not None:
            out["top_k"] = router["top_k"]
    elif blocks and all("moe" in b for b in blocks):   # every block prints moe None: a dense model
        out["num_routed_experts"] = 0
    return out


def _check_printed_sizes(log: str, spec, printed: dict[str, Any], model: str) -> None:
    from commbench.planner.calibrate.runlogs.megatron_arch import VOCAB_TOLERANCE
    names = {"num_layers": "model_spec.model.layers (count)", "hidden": "model_spec.model.dim",
             "vocab": "model_spec.model.vocab_size", "num_heads": "attention.n_heads",
             "num_kv_heads": "attention.n_kv_heads", "num_routed_experts": "moe.num_experts",
             "top_k": "moe.router.top_k"}
    for field, got in _printed_sizes(printed).items():
        want = getattr(spec, field)
        if field == "num_kv_heads":
            want = want or spec.num_heads
        if field == "num_routed_experts":
            want = want if spec.is_moe else 0
        if field == "top_k" and not spec.is_moe:
            continue
        if field == "vocab":
            if isinstance(got, (int, float)) and abs(got - want) > VOCAB_TOLERANCE * want:
                raise _refuse(log, names[field], got, model, want)
            continue
        if got != want:
            raise _refuse(log, names[field], got, model, want)


def check_titan_model(log: str, config: dict[str, Any], model: str) -> None:
    """One line when a TorchTitan log's printed model is not --model (see the module docstring)."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model)
    logged = config.get("model")
    if name is None or not isinstance(logged, dict):
        return
    module, flavor = logged.get("name"), str(logged.get("flavor") or "")
    _check_flavor_params(log, name, flavor, module, model)
    _check_known_flavor(log, name, module, flavor, model)
    spec = config.get("model_spec")
    printed = spec.get("model") if isinstance(spec, dict) else None
    if isinstance(printed, dict):
        _check_printed_sizes(log, load_model(name), printed, model)
