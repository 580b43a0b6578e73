"""Run Megatron-LM argument lists through one release tree's own configuration code, in a fresh interpreter.

    python tests/megatron_release_run.py TREE < cases.json

TREE: a Megatron-LM tree (megatron/ at a release's commit, `git archive`d by tests/megatron_releases.py); its own
megatron.core goes ahead of the installed one. Each case ({"argv", "world", "env", "capability"}) goes through
parse_args -> validate_args -> core_transformer_config_from_args as tests/megatron_lm.py runs them for
core_v0.16.1 (the plan's GPU capability, Transformer Engine answered as the case's "te_version": the release
container's, tests/test_megatron_release_trees.py; 2.10 where a case names none, with its fused kernels present).
Prints one JSON list: per case {"ok": true} or {"ok": false, "stage": "parse"|"validate", "error": the last line}. A
case with "fields" (config attribute names) also gets "config": each one's value in the built TransformerConfig
(a function by its __name__, a tuple as a list, an attribute the config has not as "<absent>").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import typing
import warnings

warnings.simplefilter("ignore")
TREE = sys.argv[1]
sys.path.insert(0, TREE)
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not hasattr(typing, "override"):   # Megatron-LM >= core_v0.17 imports typing.override (Python 3.12)
    typing.override = lambda f: f
from unittest import mock  # noqa: E402


class _Stub(mock.MagicMock):
    __version__ = "3.4.0"


# modules newer trees import at load time that need GPU-only packages
for _name in ("megatron.core.transformer.moe.ops.paged_stash", "megatron.core.transformer.moe.paged_stash"):
    sys.modules.setdefault(_name, _Stub(name=_name))
os.environ["MEGATRON_LM_ROOT"] = TREE

from _pytest.monkeypatch import MonkeyPatch  # noqa: E402

from tests import megatron_lm  # noqa: E402


def _plain(value):
    """A config value as JSON: a function by its name, a tuple as a list, anything else JSON cannot hold as its repr."""
    if callable(value):
        return getattr(value, "__name__", repr(value))
    if isinstance(value, tuple):
        return list(value)
    return value if isinstance(value, (bool, int, float, str, list, type(None))) else repr(value)


def main() -> None:
    import megatron.core
    assert megatron.core.__file__.startswith(TREE), megatron.core.__file__
    mod = megatron_lm.arguments_module()
    out = []
    for case in json.load(sys.stdin):
        mp, err = MonkeyPatch(), io.StringIO()
        stage = "parse"
        try:
            with megatron_lm.target_gpu(mp, tuple(case["capability"]), case.get("te_version", "2.10.0")), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(err):
                mp.setattr(sys, "argv", ["pretrain_gpt.py", *case["argv"], "--tokenizer-type", "NullTokenizer",
                                         "--mock-data"])
                for key, value in {"WORLD_SIZE": str(case["world"]), "RANK": "0", "LOCAL_RANK": "0",
                                   **case["env"]}.items():
                    mp.setenv(key, value)
                if "CUDA_DEVICE_MAX_CONNECTIONS" not in case["env"]:
                    mp.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
                args = mod.parse_args()
                stage = "validate"
                mod.validate_args(args, {})
                config = mod.core_transformer_config_from_args(args)
            out.append({"ok": True, **({"config": {name: _plain(getattr(config, name, "<absent>"))
                                                    for name in case["fields"]}} if case.get("fields") else {})})
        except SystemExit:
            lines = err.getvalue().strip().splitlines()
            out.append({"ok": False, "stage": stage, "error": lines[-1] if lines else "exit"})
        except BaseException as exc:  # noqa: BLE001 - every refusal is a result
            out.append({"ok": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        finally:
            mp.undo()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
