"""Rendering of a layout search for `commbench plan` (partial --layout) and `commbench tune`: the top-K
table with the breakdown, the throughput-vs-memory-headroom Pareto front, the explanation, and the
emitted forms (plan.json, Megatron-LM arguments, TorchTitan TOML). Every figure is predicted."""

from __future__ import annotations

import json
from pathlib import Path


from commbench.cli.base import console, print_json
from commbench.results.render import styled
from commbench.errors import invalid
from commbench.planner.calibrate.coverage import coverage_lines
from commbench.planner.emit.plan import (EMIT_KINDS, check_emit, efficiency_terms, fabric_lines, megatron_launch_text,
                                         megatron_text, plan_document,
                                         torchtitan_emit_text)
from commbench.planner.emit.plan_files import write_plan_files
from commbench.planner.search.explain import explain, short
from commbench.planner.search.recipe_gap import versus_recipe, versus_recipe_lines
from commbench.planner.search.space import SearchRequest, SearchResult, search
from commbench.results.tables import Col, print_table


def flex_backend_for(fabric, release: str | None = None) -> str:
    """Megatron's --moe-flex-dispatcher-backend on this fabric in this release's container (recipes.flex_backend)."""
    from commbench.planner.layout.recipes import flex_backend
    return flex_backend(int(fabric.domain_size), release, fabric.gpu.name)


TOP_COLUMNS = (Col(name="#"), Col(name="layout", numeric=False), Col(name="tok/s/GPU"), Col(name="MFU (%)", keep=7),
               Col(name="step (s)"), Col(name="compute (s)", keep=6), Col(name="TP exp (s)", keep=4),
               Col(name="EP exp (s)", keep=5), Col(name="ETP exp (s)", keep=1), Col(name="DP exp (s)", keep=3),
               Col(name="PP exp (s)", keep=2), Col(name="bubble (s)", keep=3), Col(name="mem (GB)", keep=8),
               Col(name="free (GB)", keep=9), Col(name="EP racks", keep=4))


def top_rows(result: SearchResult, top: int) -> list[list[str]]:
    bd = result.breakdown
    pareto = set(int(i) for i in result.pareto)
    rows = []
    for i in range(min(top, len(result))):
        dp = sum(float(getattr(bd, f"dp_{k}_exposed_s")[i]) for k in ("dense_rs", "dense_ag", "expert_rs", "expert_ag"))
        rows.append([str(i + 1) + ("*" if i in pareto else ""), short(result.layouts.layout(i)),
                     f"{bd.tokens_per_s_per_gpu[i]:,.0f}", f"{100 * bd.mfu[i]:.1f}", f"{bd.step_s[i]:.3f}",
                     f"{bd.compute_s[i]:.3f}", f"{bd.tp_exposed_s[i]:.3f}", f"{bd.ep_exposed_s[i]:.3f}",
                     f"{bd.etp_exposed_s[i]:.3f}", f"{dp:.3f}", f"{bd.pp_exposed_s[i]:.3f}", f"{bd.bubble_s[i]:.3f}",
                     f"{bd.mem_total_bytes[i] / 1e9:.0f}", f"{result.headroom_bytes[i] / 1e9:.0f}",
                     str(int(result.ep_racks[i]))])
    return rows


def pareto_shown(result: SearchResult, top: int, limit: int = 12) -> list[int]:
    """The Pareto front's layouts the text table shows, in front order: every one the top table marks * (ranked
    within `top`) and an even sample of the rest, `limit` rows in all where the marked ones leave room; the whole
    front when it is no longer (plan --json's `pareto` always holds it all)."""
    front = [int(i) for i in result.pareto]
    if len(front) <= limit:
        return front
    marked = {i for i in front if i < top}
    rest = [i for i in front if i not in marked]
    room = max(0, limit - len(marked))
    # evenly over the rest, both ends included (room < len(rest) here, so the positions are distinct)
    sample = {rest[round(k * (len(rest) - 1) / max(1, room - 1))] for k in range(room)}
    return [i for i in front if i in marked or i in sample]


def pareto_rows(result: SearchResult, shown: list[int], top: int) -> list[list[str]]:
    bd = result.breakdown
    return [[str(i + 1) if i < top else "", short(result.layouts.layout(i)), f"{bd.tokens_per_s_per_gpu[i]:,.0f}",
             f"{result.headroom_bytes[i] / 1e9:.0f}"] for i in shown]


def pareto_title(num_shown: int, num_front: int) -> str:
    """The Pareto table's title; a sample of the front says so."""
    sampled = (f"; {num_shown} of {num_front} shown, the top table's * rows among them; --json has all"
               if num_shown < num_front else "")
    return f"Pareto front: predicted throughput vs memory headroom (no layout beats one of these in both){sampled}"


PARETO_COLUMNS = (Col(name="#"), Col(name="layout", numeric=False), Col(name="tokens/s/GPU"),
                  Col(name="free (GB)"))   # #: the layout's row in the top table, where it is one


def launch_notes(section: dict) -> list[str]:
    """A framework section's notes (plan.json megatron.notes / torchtitan.notes: what the launch needs, or trains
    otherwise than the model asked for, e.g. Llama 3.2's RoPE factor on Megatron-LM); none for a refused launch."""
    return [] if "refused" in section else list(section.get("notes", []))


def print_launch_notes(section: dict) -> None:
    """launch_notes as 'note:' lines on stderr, so `--emit` output stays the arguments alone for a pipe and the notes
    still reach the terminal."""
    from commbench.cli.base import err_console

    for note in launch_notes(section):
        err_console.print(styled("[yellow]note:[/] {}", note), highlight=False)


def written_paths(out: str | None, written: list[str]) -> dict[str, list[str]]:
    """`written_files` for a --json document with -O: the path of every file written, -O as given joined to
    its name (relative to the working directory where -O is), as print_written's line names them; {} without -O.
    Only the printed document holds it: plan.json is read from other directories."""
    return {"written_files": [str(Path(out) / name) for name in written]} if out else {}


def print_written(out: str | None, written: list[str], *, stdout_is_output: bool) -> None:
    """`plan → OUT: plan.json, ...`: where -O's files went. Where stdout holds the launch (--emit megatron or
    torchtitan), the line goes to stderr, so a pipe still reads the arguments alone. (--json's stdout stays the
    document alone, which names them in written_files.)"""
    if not out:
        return
    from commbench.cli.base import err_console

    (err_console if stdout_is_output else console).print(styled("[green]plan[/] → {}: {}", Path(out),
                                                                ", ".join(written)), highlight=False)


def print_torchtitan_section(doc: dict, written: list[str]) -> None:
    """The TorchTitan section of a plan whose terminal output is not the TorchTitan launch: its refusal, or where its
    launch is written (or how to emit it) and its notes, which otherwise reach only plan.json."""
    section = doc.get("torchtitan")
    if not section:
        return
    if "refused" in section:
        console.print("TorchTitan: " + section["refused"], highlight=False, markup=False)
    elif launch_notes(section):  # its launch is written too (--out) or emitted: its notes reach the terminal
        tt_files = [name for name in written if name.startswith(("torchtitan", "commbench_torchtitan"))]
        console.print(f"TorchTitan {section.get('version', '')} launch "
                      f"({', '.join(tt_files) if tt_files else 'plan --emit torchtitan'}):", highlight=False,
                      markup=False)
        for note in launch_notes(section):
            console.print("  note: " + note, highlight=False, markup=False)


def print_megatron_notes(doc: dict) -> None:
    """The Megatron-LM section's notes (or its refusal) under a plan that does not print its arguments."""
    section = doc.get("megatron")
    if not section:
        return
    if "refused" in section:
        console.print("Megatron-LM: " + section["refused"], highlight=False, markup=False)
        return
    for note in launch_notes(section):
        console.print("Megatron-LM note: " + note, highlight=False, markup=False)


def run_plan_search(req: SearchRequest, *, system: str, top: int, emit: str | None, out: str | None,
                    as_json: bool, extra_assumptions: list[str] = (), torchtitan_version: str = "0.3",
                    force: bool = False, calibration_file: str | None = None,
                    calibration_shipped_terms: tuple[str, ...] = (), gbs_note: str | None = None,
                    calibration_other_gpu_terms: tuple[str, ...] = (), extra_inputs: dict | None = None) -> dict:
    """Search, explain, print (or emit one form), and write the plan files; returns the plan document.
    `extra_inputs`: added to the document's inputs (tune: `results_file`, the results its fit came from).
    `calibration_shipped_terms`: the terms the --calibration file does not set, `calibration_other_gpu_terms` the
    kernel terms it fitted on other GPUs (calibrate.fit.CalibrationFile.for_gpu; the shipped values stand in);
    `gbs_note`: where a default global batch came from (an assumption, and a line under the table)."""
    if emit is not None and emit not in EMIT_KINDS:
        raise invalid("--emit", emit, f"one of {', '.join(EMIT_KINDS)}")
    if top < 1:
        raise invalid("--top", top, "a positive number of layouts")
    result = search(req)
    lines, rows = explain(result)
    lines += coverage_lines(model=req.model, layout=result.layouts.layout(0), ep_domains=int(result.ep_racks[0]),
                            domain_size=result.gpus_per_rack, system=req.fabric.name, calibration=req.calibration)
    tuned = versus_recipe(result)   # NVIDIA's recipe layout for this request, where the release has one
    lines += versus_recipe_lines(tuned)
    from commbench.planner.layout.recipe_model import sequence_length
    seq, seq_note = sequence_length(req.model, req.seq_len)   # the length planned at; where a default came from
    from commbench.planner.layout.precision import checkpoint_note
    from commbench.planner.emit.plan import model_params_line
    heads = (model_params_line(req.model), gbs_note, seq_note, checkpoint_note(req.model, req.precision))
    lines[:0] = [n for n in heads if n]
    backend = flex_backend_for(req.fabric, req.software)
    doc = plan_document(result, system=system, explanation=lines, sensitivity=rows,
                        extra_assumptions=list(extra_assumptions) + ([gbs_note] if gbs_note else []), top=top, flex_backend=backend,
                        torchtitan_version=torchtitan_version, calibration_file=calibration_file,
                        calibration_shipped_terms=calibration_shipped_terms,
                        calibration_other_gpu_terms=calibration_other_gpu_terms)
    if tuned is not None:
        doc["versus_recipe"] = tuned
    from commbench.planner.search.pinned_gap import defaults_line, input_defaults
    doc["defaults_taken"] = input_defaults(req, gbs_note)   # the inputs not given, as a pinned plan lists them
    doc["inputs"].update(extra_inputs or {})
    meg = doc["megatron"]
    check_emit(doc, emit)   # a refused launch asked for: one line, before any file is written
    written = write_plan_files(doc, out, force=force) if out else []
    if as_json or emit == "json":
        print_json({k: v for k, v in doc.items() if k != "placement"} |
                   {"placement": {k: v for k, v in doc["placement"].items()
                                  if k in ("gpus_per_rack", "num_racks", "summary")}} | written_paths(out, written),
                   default=float)
    elif emit == "megatron":
        console.print(megatron_launch_text(meg), highlight=False, markup=False, soft_wrap=True)
        print_launch_notes(meg)
        print_written(out, written, stdout_is_output=True)
    elif emit == "torchtitan":
        console.print(torchtitan_emit_text(doc["torchtitan"], out=out), highlight=False, markup=False, soft_wrap=True)
        print_launch_notes(doc["torchtitan"])
        print_written(out, written, stdout_is_output=True)
    else:
        title = (f"top {min(top, len(result))} of {result.num_fit:,} fitting layouts (predicted): {req.model.name} on "
                 f"{req.num_gpus} x {req.fabric.gpu.name} ({system}), {req.precision}, gbs {req.gbs}{' (default)' if gbs_note else ''}, "
                 f"seq_len {seq}{' (default)' if seq_note else ''}, for {req.framework}; "
                 f"* = on the Pareto front")
        print_table(console, title, TOP_COLUMNS, top_rows(result, top))
        shown = pareto_shown(result, top)
        print_table(console, pareto_title(len(shown), len(result.pareto)), PARETO_COLUMNS,
                    pareto_rows(result, shown, top))
        from commbench.planner.calibrate.fit import framework_note
        shipped = ([efficiency_terms(calibration_file, calibration_shipped_terms, calibration_other_gpu_terms)]
                   if calibration_file else [])
        shipped += [n for n in [framework_note(calibration_file, req.framework) if calibration_file else ""] if n]
        taken = [defaults_line(doc["defaults_taken"])] if doc["defaults_taken"] else []
        for line in lines + taken + fabric_lines(req.fabric) + shipped:
            console.print(line, highlight=False, markup=False)
        meg_line = meg["refused"] if "refused" in meg else f"{meg['script']} {megatron_text(meg)}"
        console.print("Megatron-LM: " + meg_line, highlight=False, markup=False, soft_wrap=True)
        for note in launch_notes(meg):
            console.print("  note: " + note, highlight=False, markup=False)   # prose: wrapped to the terminal
        if "refused" not in meg:  # launch.env is the Megatron launch's environment: written only with its arguments
            env = meg["launch_env"]
            console.print("launch.env: " + (" ".join(f"{k}={v}" for k, v in env.items()) or "(nothing needed)"),
                          highlight=False, markup=False)
        from commbench.planner.emit.rack_placement import HYBRIDEP_ACROSS_HEAD, RACK_FILL_HEAD
        for line in doc["assumptions"]:   # the placement priced, which a plain launch may not build (probe P9), and
            if line.startswith((RACK_FILL_HEAD, HYBRIDEP_ACROSS_HEAD)):   # what HybridEP across domains needs
                console.print(line, highlight=False, markup=False)
        console.print(f"searched {result.num_enumerated:,} layouts ({result.num_valid:,} valid, {result.num_fit:,} fit "
                      f"with {req.headroom_fraction * 100:g}% HBM headroom) in {result.elapsed_s:.2f} s "
                      f"({result.layouts_per_s:,.0f} layouts/s)", highlight=False)
        print_torchtitan_section(doc, written)
        print_written(out, written, stdout_is_output=False)
    return doc
