"""The model zoo: commbench/data/models.toml (or a user's --model-file) read into ModelSpecs, every field
checked, with the architecture and its sources."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from commbench.data.reference import models_toml
from commbench.errors import CommbenchError, invalid, read_user_file, toml_problem
from commbench.planner.models.architecture import ARCH_FIELDS, Architecture, architecture_from_row, sources_from_toml
from commbench.planner.models.spec import MAX_MODEL_COUNT, ModelSpec


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """models.toml's `[model.llama3.1-70b]` parses as model -> llama3 -> 1-70b; join the keys back."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else key
        # a table holding any plain value is a model (a missing `layers` is then reported by name,
        # not read as an unknown model); one holding only tables is a dotted name's prefix
        if isinstance(value, dict) and ("layers" in value or any(not isinstance(v, dict) for v in value.values())):
            out[name] = value
        elif isinstance(value, dict):
            out.update(_flatten(value, name))
    return out




def _count(name: str, row: dict[str, Any], key: str, default: int | None = None) -> int:
    """A whole, non-negative number from a model row (8.7, "a", 1e12 and true are refused by name)."""
    value = row[key] if default is None else row.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommbenchError(f"model {name!r}: {key}={value!r} is invalid: a whole number")
    if not 0 <= value <= MAX_MODEL_COUNT:
        raise CommbenchError(f"model {name!r}: {key}={value!r} is invalid: allowed 0..{MAX_MODEL_COUNT:,}")
    return value


def _flag(name: str, row: dict[str, Any], key: str, default: bool) -> bool:
    """A TOML boolean from a model row ("no" would otherwise read as true)."""
    value = row.get(key, default)
    if not isinstance(value, bool):
        raise CommbenchError(f"model {name!r}: {key}={value!r} is invalid: true or false")
    return value


# The keys a model table may hold (commbench/data/models.toml); any other is a typo that would
# otherwise leave its field at the default without a word.
MODEL_KEYS = frozenset({
    "layers", "dense_layers", "hidden", "heads", "attention", "kv_heads", "head_dim", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "dense_ffn", "routed_experts",
    "shared_experts", "top_k", "expert_ffn", "vocab", "mtp_layers", "tied_embeddings", "glu",
    "sliding_window", "seq_len", "params_total_b", "params_active_b", "flops_per_token_gflop", "n_group",
    "topk_group", "arch", "arch_sources", "layer_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_state_dim",
    "mamba_num_groups", "mamba_conv_kernel", "moe_latent_size", "linear_attention_freq", "gdn_num_key_heads",
    "gdn_num_value_heads", "gdn_key_head_dim", "gdn_value_head_dim", "gdn_conv_kernel", "attention_gate",
    "mtp_shared_weights", "variant_of", "csa_pattern", "csa_window", "index_heads", "index_head_dim", "index_topk",
    "o_lora_rank", "o_groups", "hc_mult", "hash_layers"})
MAMBA_KEYS = ("mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "mamba_conv_kernel")
# A variant (`variant_of = "NAME"`) takes NAME's fields, arch and arch_sources, and states what differs. The
# published figures are facts about one checkpoint: a variant states its own or has none.
NOT_INHERITED = frozenset({"params_total_b", "params_active_b", "flops_per_token_gflop"})


def _resolve_variant(name: str, rows: dict[str, dict[str, Any]], chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """Row `name` with its `variant_of` model's fields under its own (one-line error for an unknown or cyclic base)."""
    row = rows[name]
    base = row.get("variant_of")
    if base is None:
        return row
    if not isinstance(base, str) or base not in rows:
        raise invalid(f"model {name!r} variant_of", base, f"a model of the zoo or the file ({', '.join(sorted(rows))})")
    if base == name or base in chain:
        cycle = " -> ".join(chain + (name, base))
        raise invalid(f"model {name!r} variant_of", base, f"a model that is not itself a variant of this one ({cycle})")
    parent = _resolve_variant(base, rows, chain + (name,))
    merged = {k: v for k, v in parent.items() if k not in NOT_INHERITED} | row
    for table in ("arch", "arch_sources"):
        if table in parent or table in row:
            merged[table] = dict(parent.get(table, {})) | dict(row.get(table, {}))
    del merged["variant_of"]
    return merged


def _architecture(name: str, row: dict[str, Any], sources: dict) -> Architecture | None:
    arch = row.get("arch")
    if arch is None:
        return None
    if not isinstance(arch, dict) or not isinstance(row.get("arch_sources", {}), dict):
        raise CommbenchError(f"model {name!r}: arch and arch_sources must be tables")
    return architecture_from_row(name, arch, row.get("arch_sources", {}), sources)


def _spec_from_row(name: str, row: dict[str, Any], sources: dict | None = None) -> ModelSpec:
    unknown = sorted(set(row) - MODEL_KEYS)
    if unknown and unknown[0] in ARCH_FIELDS:   # written beside the [arch] table instead of in it
        raise CommbenchError(f"model {name!r}: key {unknown[0]!r} is an architecture field: it belongs in the "
                             f"[model.{name}.arch] table (cited in [model.{name}.arch_sources]), where it is read")
    if unknown:
        raise CommbenchError(f"model {name!r}: key {unknown[0]!r} is not a model field (known: "
                             f"{', '.join(sorted(MODEL_KEYS))})")
    mamba = next((k for k in MAMBA_KEYS if row.get(k)), None)
    if mamba and "M" not in str(row.get("layer_pattern", "")):   # planned without Mamba layers, the field unread
        raise invalid(f"model {name!r}: {mamba}", row[mamba], 'with Mamba layers only (an "M" in layer_pattern)')
    try:
        num_layers = _count(name, row, "layers")
        return ModelSpec(
            name=name,
            num_layers=num_layers,
            num_dense_layers=_count(name, row, "dense_layers", str(row["layer_pattern"]).count("-")
                                    if row.get("layer_pattern") else 0 if row.get("routed_experts") else num_layers),
            hidden=_count(name, row, "hidden"),
            num_heads=_count(name, row, "heads"),
            attention=str(row.get("attention", "gqa")),
            num_kv_heads=_count(name, row, "kv_heads", 0),
            head_dim=_count(name, row, "head_dim", 0),
            q_lora_rank=_count(name, row, "q_lora_rank", 0),
            kv_lora_rank=_count(name, row, "kv_lora_rank", 0),
            qk_nope_head_dim=_count(name, row, "qk_nope_head_dim", 0),
            qk_rope_head_dim=_count(name, row, "qk_rope_head_dim", 0),
            v_head_dim=_count(name, row, "v_head_dim", 0),
            dense_ffn=_count(name, row, "dense_ffn", 0),
            num_routed_experts=_count(name, row, "routed_experts", 0),
            num_shared_experts=_count(name, row, "shared_experts", 0),
            top_k=_count(name, row, "top_k", 0),
            expert_ffn=_count(name, row, "expert_ffn", 0),
            vocab=_count(name, row, "vocab"),
            num_mtp_layers=_count(name, row, "mtp_layers", 0),
            mtp_shared_weights=_flag(name, row, "mtp_shared_weights", False),
            tied_embeddings=_flag(name, row, "tied_embeddings", False),
            glu=_flag(name, row, "glu", True),
            sliding_window=_count(name, row, "sliding_window", 0),
            seq_len=_count(name, row, "seq_len", 4096),
            layer_pattern=str(row.get("layer_pattern", "")),
            **{k: _count(name, row, k, 4 if k == "mamba_conv_kernel" else 0)
               for k in ("mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "mamba_conv_kernel",
                         "moe_latent_size", "linear_attention_freq", "gdn_num_key_heads", "gdn_num_value_heads",
                         "gdn_key_head_dim", "gdn_value_head_dim")},
            gdn_conv_kernel=_count(name, row, "gdn_conv_kernel", 4),
            attention_gate=_flag(name, row, "attention_gate", False),
            csa_pattern=str(row.get("csa_pattern", "")),
            **{k: _count(name, row, k, 0) for k in ("csa_window", "index_heads", "index_head_dim", "index_topk",
                                                     "o_lora_rank", "o_groups", "hc_mult", "hash_layers")},
            published_params_total_b=row.get("params_total_b"),
            published_params_active_b=row.get("params_active_b"),
            published_flops_per_token_gflop=row.get("flops_per_token_gflop"),
            architecture=_architecture(name, row, sources or {}),
            extra={k: _count(name, row, k) for k in ("n_group", "topk_group") if k in row},
        )
    except KeyError as exc:
        raise CommbenchError(f"model {name!r} lacks required key {exc.args[0]!r} "
                             "(needs layers, hidden, heads, vocab; see commbench/data/models.toml)") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"model {name!r}: {exc}") from None


def _zoo_rows(model_file: str | Path | None = None) -> tuple[dict[str, dict[str, Any]], dict]:
    """Model rows by name and the [source.*] files their architecture cites."""
    rows = _flatten(models_toml().get("model", {}))
    sources = sources_from_toml(models_toml())
    if model_file is not None:
        path = Path(model_file)
        text = read_user_file(path, "--model-file")
        try:
            user = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise invalid("--model-file", str(path), f"valid TOML ({toml_problem(text, exc)})") from None
        if not isinstance(user.get("model"), dict):
            raise invalid("--model-file", str(path), "a TOML file with [model.NAME] tables")
        rows.update(_flatten(user["model"]))
        sources.update(sources_from_toml(user))
    return {name: _resolve_variant(name, rows) for name in rows}, sources


def model_names(model_file: str | Path | None = None) -> list[str]:
    return sorted(_zoo_rows(model_file)[0])


def load_model(name: str, model_file: str | Path | None = None, release: str | None = None) -> ModelSpec:
    """The zoo model `name` (case-insensitive), one from a user TOML shaped like models.toml, or
    `hf:PATH`, a Hugging Face config.json (or a folder holding one; models/hf_config.py); `release`: the plan's
    --software, whose megatron-core an hf: refusal cites (None: the newest table release)."""
    if name.lower().startswith("hf:"):
        from commbench.files import refuse_empty_inputs   # hf:'' read config.json from the current folder
        refuse_empty_inputs(("--model hf:PATH", name[3:], "a Hugging Face config.json or the folder holding one"))
        from commbench.planner.models.hf_config import load_hf_model
        return load_hf_model(name, release=release)
    rows, sources = _zoo_rows(model_file)
    by_lower = {k.lower(): k for k in rows}
    key = by_lower.get(name.lower())
    if key is None:
        raise invalid("--model", name, f"known models: {', '.join(sorted(rows))}")
    return _spec_from_row(key, rows[key], sources)


def spec_fields() -> list[str]:
    return [f.name for f in fields(ModelSpec)]
