"""Why a search has no layout left once the block-scaled precision's GEMM-size rules (layout/quant_dims.py) have
dropped the ones the kernels refuse, in one line naming the precision (and that it is the GPU's default when
--precision was not given), the dimensions that miss their multiple and what would run instead.

Two causes, weights first: a Linear dimension missing its multiple at every searched tp (the hidden size is not split
by tp, so no tp mends it, and the line advises none), or the GEMMs' token dimension (mbs x seq_len / cp and the like:
quant_dims.gemm_tokens) missing its multiple for every searched (or pinned) mbs and cp: then --seq-len is named with
the multiple it needs. The other precisions the GPU runs that the same rules pass are offered besides bf16."""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING

import numpy as np

from commbench.errors import CommbenchError
from commbench.planner.layout.quant_dims import (QUANT_TOKEN_BLOCK, TOKEN_WHO, gemm_tokens, quant_misfits_sharded,
                                                 quant_rule_why, quant_tokens_ok, quant_tp_misfits, quant_tp_ok,
                                                 token_rule_text)

if TYPE_CHECKING:
    from commbench.planner.search.space import SearchRequest

QUANTIZED = ("nvfp4", "mxfp8", "fp8")


def _default_note(req: SearchRequest) -> str:
    """' (not given: the default on GPU)' where the CLI chose the precision, else ''."""
    return "" if req.precision_asked else f" (not given: the default on {str(req.gpu_name).upper()})"


def _asked(req: SearchRequest) -> str:
    """'--precision P', with 'not given: GPU's default' where the CLI chose it."""
    return f"--precision {req.precision}{_default_note(req)}"


def _passes(req: SearchRequest, cols: dict[str, np.ndarray], precision: str) -> bool:
    """Whether some layout of `cols` passes both GEMM-size rules (and the framework trains the model) in `precision`."""
    from commbench.planner.search.frameworks import check_precision_runs
    try:
        check_precision_runs(req.framework, req.model, precision, req.software, req.torchtitan_version)
    except CommbenchError:
        return False
    seq = req.seq_len or req.model.seq_len
    ok = quant_tp_ok(req.model, req.framework, precision, cols["tp"], cols["etp"], req.torchtitan_version)
    ok &= quant_tokens_ok(req.framework, precision, seq, cols["mbs"], cols["cp"], cols["tp"], cols["sequence_parallel"])
    return bool(ok.any())


def _instead(req: SearchRequest, cols: dict[str, np.ndarray]) -> str:
    """'--precision bf16 (or fp8)': bf16, and the other quantized precisions the GPU runs that pass here."""
    gpu = getattr(req.fabric, "gpu", None)
    runs = gpu.precisions if gpu is not None else ()
    others = [p for p in QUANTIZED if p != req.precision and p in runs and _passes(req, cols, p)]
    return "--precision bf16" + (f" (or {', '.join(others)})" if others else "")


def _values(cols: dict[str, np.ndarray], name: str) -> str:
    return ", ".join(str(int(v)) for v in sorted(set(cols[name].tolist())))


def quant_gap_message(req: SearchRequest, cols: dict[str, np.ndarray], dims_ok: np.ndarray) -> str:
    """The one line for a search whose every layout (`cols`, before the GEMM-size filter) breaks a GEMM-size rule of
    req.precision; `dims_ok`: which pass the weight-dimension rule (quant_dims.quant_tp_ok)."""
    model, fw, prec = req.model, req.framework, req.precision
    seq = req.seq_len or model.seq_len
    if not dims_ok.any():
        first = int(np.lexsort((cols["etp"], cols["tp"]))[0])     # the least-sharded layout: the full sizes
        tp, etp = int(cols["tp"][first]), int(cols["etp"][first])
        off = quant_tp_misfits(model, fw, prec, tp, etp)
        where = (f"at every tp searched ({_values(cols, 'tp')})" if quant_misfits_sharded(model, fw, prec, tp, etp)
                 else "whatever the tp (the hidden size is not split by tp)")
        return (f"{_asked(req)} is invalid for {model.name} with --framework {fw}: {quant_rule_why(fw, prec)}, and "
                f"{', '.join(off)} {where}; use {_instead(req, cols)}")
    block = QUANT_TOKEN_BLOCK[(fw, prec)]
    rule = f"the GEMM token dimension M = {token_rule_text(fw, prec)} must be a multiple of {block} ({TOKEN_WHO[(fw, prec)]})"
    pinned = [k for k in ("mbs", "cp") if k in req.pins]
    if pinned:
        rows = np.flatnonzero(dims_ok)
        i = int(rows[0])
        num, den = (int(x[0]) for x in gemm_tokens(fw, prec, seq, cols["mbs"][i:i + 1], cols["cp"][i:i + 1],
                                                    cols["tp"][i:i + 1], cols["sequence_parallel"][i:i + 1]))
        pins = ", ".join(f"{k}={req.pins[k]}" for k in pinned)
        return (f"--layout {pins} is invalid for {model.name} at --seq-len {seq} in {prec} with --framework {fw}: "
                f"{rule}, and M = {num / den:g} (mbs={int(cols['mbs'][i])}, cp={int(cols['cp'][i])}, "
                f"tp={int(cols['tp'][i])}); pick an mbs / cp that leaves a multiple, a --seq-len that is a multiple of "
                f"{block}, or {_instead(req, cols)}")
    more = ""
    if not (fw == "torchtitan" and prec == "nvfp4"):     # M grows with mbs: a larger micro-batch can mend it
        more = f", or pin mbs={block // gcd(seq, block)}"
    return (f"--seq-len {seq} is invalid for {model.name} in {prec}{_default_note(req)} with --framework {fw}: "
            f"{rule}, and no "
            f"mbs ({_values(cols, 'mbs')}) and cp ({_values(cols, 'cp')}) searched gives one; use a --seq-len that is "
            f"a multiple of {block}{more}, or {_instead(req, cols)}")
