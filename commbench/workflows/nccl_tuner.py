"""`commbench nccl-tuner`: measured (results files) or predicted (cost model) per-size winners of the
NCCL tuning axes, written as NCCL's example tuner-plugin config (and optionally optimize_config.py's CSV)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from commbench.comm.nccl_tuning import NCCL_MAX_CHANNELS, TuningCombo
from commbench.costmodel.nccl_tables import NCCL_RELEASE
from commbench.errors import CommbenchError
from commbench.results.records import IMPORTED_LAUNCHER
from commbench.results.nccl_tuner_targets import RULE_PIPE_OPS
from commbench.results.nccl_tuner import (PLUGIN_COLLECTIVES, Cell, Rule, TunedPoint, choose_cells, expressible,
                                          merge_rules, points_from_records)

# Today's cost model names algorithms, not protocols (commbench/costmodel/presets.py): the pairing with a
# protocol is ASSUMED here -- "ring" and "nvls" are its bandwidth (Simple) curves, "ring_ll" is LL, and
# "tree" is the presets' low-latency curve inside a domain (LL latency, 1/8 of the link rate) but the
# full-rate NIC curve (Simple) across domains.
COST_MODEL_COMBOS = {"ring": TuningCombo(algo="ring", proto="simple"), "ring_ll": TuningCombo(algo="ring", proto="ll"),
                     "tree": TuningCombo(algo="tree", proto="ll"), "nvls": TuningCombo(algo="nvls", proto="simple")}
PAIRING_NOTE = ("cost-model algorithm -> protocol pairing assumed: ring=ring/simple, ring_ll=ring/ll, nvls=nvls/simple, "
                "tree=tree/ll inside one domain, tree/simple across domains")


# Why an nccl-tests import never becomes a rule (said beside "no combination ..." where the records hold one)
IMPORTS_NO_RULES = ("; nccl-tests imports cannot become rules: an import records no combination (nccl_algo, "
                    "nccl_proto, nccl_channels), so a run forced through NCCL_ALGO/NCCL_PROTO/NCCL_*_NCHANNELS is left "
                    "out as forced by its environment and the rest is NCCL's default, with nothing to beat")
# The cost model's error a predicted rule must lead by: the held-out goal of benchmarks/costmodel_accuracy.py,
# median |error| <= 15% on busbw over all sizes. Within it NCCL's own model may rightly pick another pair, and a
# rule forcing the wrong one makes NCCL slower than no config: there NCCL decides.
PREDICTED_MARGIN = 0.15



def left_out_combinations(records: list, any_channels: bool) -> tuple[list[str], bool] | None:
    """(labels, whether each gave wrong data) of the combinations naming an algorithm and a protocol (expressible) that
    NCCL records measured of a collective the plugin tunes, where none is left among the points (points_from_records
    left every one of them out); None where none was measured."""
    from commbench.results.nccl_tuner import NCCL_BACKENDS, record_combo
    from commbench.results.records import Measurement

    named, wrong = {}, set()
    for r in records:
        if not (isinstance(r, Measurement) and r.backend in NCCL_BACKENDS and r.collective in PLUGIN_COLLECTIVES):
            continue
        try:
            combo = record_combo(r)
        except CommbenchError:   # a name no NCCL has: not a combination a rule could name
            continue
        if expressible(combo, any_channels=any_channels):
            named[combo.label] = None
            if r.status == "ok" and r.num_wrong:
                wrong.add(combo.label)
    return (list(named), set(named) <= wrong) if named else None

def cost_model_combo(algorithm: str, crosses_domains: bool) -> TuningCombo:
    if algorithm == "tree" and crosses_domains:
        return TuningCombo(algo="tree", proto="simple")
    return COST_MODEL_COMBOS[algorithm]


@dataclass(frozen=True, kw_only=True)
class TunerResult:
    points: list[TunedPoint]
    cells: list[Cell]
    rules: list[Rule]
    notes: list[str]
    sources: list[str]  # run ids or the fabric's name
    switch_backs: list[str] = dataclasses.field(default_factory=list)  # why a choice goes back with size
    requires: list[str] = dataclasses.field(default_factory=list)  # "nccl X.Y.Z", "gpu NAME", "env K=V": what commbench's plugin checks
    measured: str = ""  # the dtypes and ops measured (measured_with), a comment of the file
    # the cells and rules --csv writes from (optimize_config_csv): commbench's plugin's, whatever the target
    csv_cells: list[Cell] = dataclasses.field(default_factory=list)
    csv_rules: list[Rule] = dataclasses.field(default_factory=list)


def for_target(cells: list[Cell], points: list[TunedPoint], target: str,
               statistic: str, min_gain: float = 0.0) -> tuple[list[Cell], list[str], list[str]]:
    """The cells as the target plugin needs them, notes on scales left uncovered and on fallbacks measured slower than
    NCCL's default (add_fallbacks), and on choices that switch back (`min_gain`: the --min-gain the cells were chosen
    with, which the fill-ins are judged by too)."""
    from commbench.results.nccl_tuner_targets import add_fallbacks, cover_for_example_plugin, switch_backs

    from commbench.results.nccl_tuner import hold_to_measured

    uncovered: list[str] = []
    if target == "example-plugin":
        cells, uncovered = cover_for_example_plugin(cells, points, min_gain)
        cells, slower = add_fallbacks(cells, points)
        uncovered += slower
    else:
        cells = hold_to_measured(cells)
    return cells, uncovered, switch_backs(cells, points, statistic)


def rules_for(cells: list[Cell], target: str, env_of_run: dict[str, dict],
              version_of_run: dict[str, str | None] | None = None) -> list[Rule]:
    """The target's rules from its cells: merged, and leaving the channel count to NCCL where NCCL may have lowered
    the measured count (results.nccl_channels; `env_of_run`: each run's NCCL_* settings, {} for predicted rules;
    `version_of_run`: each run's NCCL version). The cells' fallbacks (NCCL's example plugin: Cell.fallback, then
    Cell.fallbacks_after level by level) come after every other rule, so that plugin reaches one only where NCCL left
    the pairs of the rules above it out of the call."""
    from commbench.results.nccl_channels import leave_lowered_channels_to_nccl

    merged = merge_rules(cells, pipe_ops=RULE_PIPE_OPS[target], name_reg_buff=target == "commbench")
    # each level of FALLBACKs after the one before (Cell.fallbacks_after): the plugin tries them in file order
    for level in range(1, 2 + max((len(c.fallbacks_after) for c in cells if c.fallback is not None), default=0)):
        merged += merge_rules(cells, pipe_ops=RULE_PIPE_OPS[target], name_reg_buff=target == "commbench",
                              fallbacks=True, level=level)
    return leave_lowered_channels_to_nccl(merged, env_of_run, version_of_run)


# NCCL_* variables that never set how fast a collective runs, or that a combination sets itself (its axes)
_NOT_SETTINGS = ("NCCL_DEBUG", "NCCL_TUNER_CONFIG_FILE")


def run_settings(nccl_env: dict) -> dict[str, str]:
    """A run's NCCL_* settings other than the tuning axes a combination sets in its own processes
    (NCCL_ALGO, NCCL_PROTO, NCCL_*_NCHANNELS) and logging (NCCL_DEBUG*): what else made NCCL run as it did
    (give RunHeader.nccl_settings(): a setting of NCCL's configuration files is the same as one exported)."""
    from commbench.comm.nccl_tuning import TUNED_ENV_KEYS

    return {key: str(value) for key, value in sorted(nccl_env.items())
            if key not in TUNED_ENV_KEYS and not key.startswith(_NOT_SETTINGS)}


def setting_environment(nccl_env: dict) -> str:
    """run_settings as text ("NCCL_IB_HCA=mlx5, NCCL_NVLS_ENABLE=0"), for comparing runs."""
    return ", ".join(f"{key}={value}" for key, value in run_settings(nccl_env).items()) or "no other NCCL_* setting"


def check_one_system(records: list, points: list[TunedPoint]) -> None:
    """Refuse results whose runs differ in NCCL version, NCCL_* settings other than the tuning axes (a baseline
    measured with NCCL_NVLS_ENABLE=0 or NCCL_P2P_DISABLE=1 is not NCCL's default where the rules apply) or GPU
    models, or, at one scale (collective, nNodes, nRanks), in hosts: a cell would compare NCCL's default
    measured by one with a winner measured by another, and the rule could be slower than NCCL's real choice.
    Only the runs that give points count."""
    from commbench.results.records import RunHeader, mixed_runs_text

    used = {p.run_id for p in points}
    runs = {r.run_id: r for r in records if isinstance(r, RunHeader) and r.run_id in used}

    def check(what: str, values: dict[str, str]) -> None:
        named = mixed_runs_text(values)
        if named:
            raise CommbenchError(f"the results mix {what} ({named}): a rule would compare NCCL's default of one with "
                                 "a winner of another and could be slower than NCCL's own choice; write one config "
                                 "per NCCL version and system, from the results measured with it")

    check("NCCL versions", {run_id: f"NCCL {h.nccl_version or 'unknown'}" for run_id, h in runs.items()})
    check("NCCL_* environments (exported or from NCCL's configuration files)",
          {run_id: setting_environment(h.nccl_settings()) for run_id, h in runs.items()})
    check("GPU models", {run_id: ", ".join(sorted(set(h.devices))) or "devices unknown" for run_id, h in runs.items()})
    for scale in sorted({(p.collective, p.nodes, p.ranks) for p in points}):
        check(f"hosts for {scale[0]} on {scale[1]} node(s), {scale[2]} rank(s)",
              {p.run_id: "hosts " + ",".join(sorted(set(runs[p.run_id].hostnames))) for p in points
               if (p.collective, p.nodes, p.ranks) == scale and p.run_id in runs})


def check_loadable(records: list, points: list[TunedPoint], target: str) -> None:
    """Refuse (one line: results.nccl_tuner_targets.loadable_version) results whose NCCL -- one, check_one_system --
    would not load the target's plugin (unknown_version_note where the headers name none)."""
    from commbench.results.nccl_tuner_targets import loadable_version
    from commbench.results.records import RunHeader

    used = {p.run_id for p in points}
    for version in {r.nccl_version for r in records if isinstance(r, RunHeader) and r.run_id in used}:
        loadable_version(target, version)


def unknown_version_note(target: str) -> str:
    """No run header names an NCCL version: what that leaves unchecked, and the NCCL releases the target's plugin
    loads under (results.nccl_tuner_targets.LOADED_FROM)."""
    from commbench.results.nccl_tuner_targets import LOADED_FROM

    (major, minor), plugin, _ = LOADED_FROM[target]
    unchecked = ("; with no 'requires: nccl' line commbench's plugin uses these rules under any NCCL"
                 if target == "commbench" else "")
    return (f"NCCL version unknown (the run headers give none): {plugin} loads under NCCL {major}.{minor} or later "
            f"only{unchecked}; use this file only with the NCCL it was measured with")


def system_requirements(records: list, points: list[TunedPoint]) -> list[str]:
    """The NCCL version, GPU model and NCCL_* settings the rules were measured with (one each: check_one_system), as
    commbench's plugin reads them from `# requires:` lines (`nccl X.Y.Z`, `gpu NAME`, `env KEY=VALUE`: checked with
    getenv) and refuses the file under another NCCL, GPU or setting; a value the headers do not give (NCCL version
    unknown, CPU devices), or that no line can hold (unwritable_settings), is left out."""
    import re

    from commbench.results.records import RunHeader

    used = {p.run_id for p in points}
    runs = [r for r in records if isinstance(r, RunHeader) and r.run_id in used]
    requires = []
    versions = {m.group(0) for r in runs if (m := re.match(r"\d+\.\d+\.\d+", r.nccl_version or ""))}
    if len(versions) == 1:
        requires.append(f"nccl {versions.pop()}")
    gpus = {name.strip() for r in runs for name in r.devices}
    if len(gpus) == 1 and not (gpu := gpus.pop()).startswith("cpu"):
        requires.append(f"gpu {gpu}")
    # every run's (check_one_system): NCCL's default was measured under them, and is another without them
    settings = run_settings(runs[0].nccl_settings()) if runs else {}
    requires += [f"env {key}={value}" for key, value in settings.items() if writable_setting(key, value)]
    return requires


def writable_setting(key: str, value: str) -> bool:
    """Whether `# requires: env KEY=VALUE` holds the setting exactly on one line of the file (no blank runs, which
    comment lines collapse, nor a line cut at MAX_LINE_CHARS)."""
    from commbench.results.nccl_tuner_file import MAX_LINE_CHARS

    line = f"# requires: env {key}={value}"
    return value == " ".join(value.split()) and value != "" and len(line.encode()) <= MAX_LINE_CHARS


def unwritable_settings(records: list, points: list[TunedPoint]) -> list[str]:
    """Notes on NCCL_* settings of every run that no `# requires: env` line can hold (system_requirements)."""
    from commbench.results.records import RunHeader

    used = {p.run_id for p in points}
    runs = [r for r in records if isinstance(r, RunHeader) and r.run_id in used]
    settings = run_settings(runs[0].nccl_settings()) if runs else {}
    return [f"{key} was set in every run but its value cannot be written on one line (blank, too long or with "
            "blank runs): the plugin does not check it; use this file only with that setting"
            for key, value in settings.items() if not writable_setting(key, value)]


def inherited_notes(records: list, points: list[TunedPoint]) -> list[str]:
    """A note per distinct set of tuning variables the launches of the runs giving points dropped (RunHeader
    nccl_tuning.inherited: exported where the launch started, absent in every combination's processes)."""
    from commbench.comm.nccl_tuning import inherited_note
    from commbench.results.records import RunHeader

    used = {p.run_id for p in points}
    found = {tuple(sorted(inherited.items())) for r in records if isinstance(r, RunHeader) and r.run_id in used
             and isinstance(r.nccl_tuning, dict) and (inherited := r.nccl_tuning.get("inherited"))}
    return [inherited_note(dict(items)) for items in sorted(found)]


def measured_with(points: list[TunedPoint]) -> str:
    """The dtypes and ops the rules were measured with: the plugin matches bytes, never the type or op."""
    dtypes = sorted({p.dtype for p in points if p.dtype}) or ["unknown"]
    ops = sorted({p.op for p in points if p.op})
    op_text = f"op {', '.join(ops)}" if ops else "no reduction op"
    return (f"measured with dtype {', '.join(dtypes)} and {op_text}: the plugin sees bytes only, so a rule also applies "
            "to other dtypes and ops of its sizes, never measured")


def from_results(paths: list[str], *, statistic: str, min_gain: float, target: str = "commbench",
                 allow_run_spread: bool = False) -> TunerResult:
    """Rules from measured results; `allow_run_spread`: keep a winner whose gain is within NCCL's default's own
    run-to-run spread (results.nccl_tuner.choose_cells; by default NCCL decides there)."""
    from commbench.results.records import Measurement, headers, read_records

    bad: list[str] = []
    records = read_records(paths, on_bad_line=lambda n, why: bad.append(f"line {n}: {why}"))
    if bad:   # one wrong size rules a combination out at every size: an unreadable record may have been that one
        raise CommbenchError(f"{len(bad)} line(s) of {', '.join(paths)} could not be read ({'; '.join(bad[:3])}"
                             + ("; ..." if len(bad) > 3 else "") + "): what they held is unknown, and a failed or "
                             "wrong point there would rule its combination out, so no rule is written; remove them "
                             "if you know what they held, or measure again")
    points, notes = points_from_records(records, statistic)
    from commbench.results.nccl_tuner import NCCL_BACKENDS
    backends = sorted({r.backend for r in records if isinstance(r, Measurement)})
    if backends and not set(backends) & set(NCCL_BACKENDS):
        raise CommbenchError(f"{', '.join(paths)} hold{'s' if len(paths) == 1 else ''} no NCCL measurement (backend "
                             f"{', '.join(backends)}): a tuner config chooses among NCCL's algorithms and protocols, "
                             "so it needs points measured with NCCL (bench --backend nccl --nccl-algo/--nccl-proto)")
    if not points:
        left_out = [note for note in notes if note.startswith("left out")]
        raise CommbenchError(f"no usable measurements in {', '.join(paths)}: need ok whole-world points of "
                             f"{', '.join(PLUGIN_COLLECTIVES)} (measure with commbench bench --nccl-algo/--nccl-proto)"
                             + "".join(f"; {note}" for note in left_out))
    check_one_system(records, points)
    check_loadable(records, points, target)
    if not any(p.combo == TuningCombo() for p in points):
        notes.append("no NCCL-default (baseline) point: nothing can be shown to beat the default, so no rule")
    any_channels = target == "commbench"  # NCCL's own count is a rule (channels 0) for commbench's plugin
    measured_points = points
    if target == "example-plugin":  # its rules say regBuff -1: one regime per scale, as NCCL's example matches
        points = [dataclasses.replace(p, reg_buff=0) for p in points]
    if target == "example-plugin" and not any(expressible(p.combo) for p in points):
        from commbench.results.nccl_tuner_targets import NO_CHANNEL_COUNT   # and what was left out, which may be why
        raise CommbenchError(NO_CHANNEL_COUNT + "".join(f"; {note}" for note in notes if note.startswith("left out")))
    if not any(expressible(p.combo, any_channels=any_channels) for p in points) and \
            (left := left_out_combinations(records, any_channels)):
        named, wrong = left
        notes.append(f"no combination naming an algorithm and a protocol is left to become a rule: {', '.join(named)} "
                     + ("gave wrong data (#wrong > 0) at some size of its collective and scale, so every point of it "
                        "is left out" if wrong else "measured, but every point of it left out (the notes above say "
                        "why)"))
    elif not any(expressible(p.combo, any_channels=any_channels) for p in points):
        notes.append("no combination names an algorithm and a protocol" + ("" if any_channels else " and a channel count")
                     + ", so none can become a rule: measure with --nccl-algo, --nccl-proto"
                     + ("" if any_channels else " and --nccl-channels") + " (docs/nccl-tuner.md)"
                     + (IMPORTS_NO_RULES if any(getattr(r, "launcher", None) == IMPORTED_LAUNCHER for r in records)
                        else ""))
    from commbench.results.nccl_tuner import failed_default_sizes, with_failed_defaults
    failed_defaults = failed_default_sizes(records)   # a kept cell says the default failed there, not "not measured"
    cells, uncovered, switches = for_target(with_failed_defaults(choose_cells(points, min_gain=min_gain,
                                                                              any_channels=any_channels,
                                                                              allow_run_spread=allow_run_spread),
                                                                 failed_defaults), points, target, statistic,
                                          min_gain)
    notes += uncovered
    from commbench.results.nccl_tuner import far_apart_notes, repeat_spread_notes
    notes += repeat_spread_notes(cells)
    notes += [note + (": the example plugin needs a rule there, so the nearer size's choice covers it (measure sizes in between)" if target == "example-plugin" else
                      ": rules stop at the measured sizes, NCCL decides in between") for note in far_apart_notes(cells)]
    from commbench.results.resumed import combinations_not_started, sweeps_cut_short
    notes += sweeps_cut_short(records)
    notes += inherited_notes(records, points)
    if combinations_not_started(records):   # a rule's choice is the fastest of those measured, not of those planned
        notes.append("these rules choose among the combinations the file holds: a combination never measured may be "
                     "faster than the one a rule names (measure it, then run nccl-tuner again)")
    requires = system_requirements(records, points)
    if not any(what.startswith("nccl ") for what in requires):
        notes.append(unknown_version_note(target))
    notes += unwritable_settings(records, points)
    env_of_run = {h.run_id: h.nccl_settings() for h in headers(records)}
    version_of_run = {h.run_id: h.nccl_version for h in headers(records)}
    rules = rules_for(cells, target, env_of_run, version_of_run)
    csv_cells, csv_rules = cells, rules
    if target != "commbench":   # --csv: only the wins, as commbench's plugin's rules name them (optimize_config_csv)
        from commbench.results.nccl_tuner import hold_to_measured

        csv_cells = hold_to_measured(choose_cells(measured_points, min_gain=min_gain, any_channels=True,
                                                  allow_run_spread=allow_run_spread))
        csv_rules = rules_for(csv_cells, "commbench", env_of_run, version_of_run)
    return TunerResult(points=measured_points, cells=cells, rules=rules, csv_cells=csv_cells, csv_rules=csv_rules,
                       notes=notes,
                       switch_backs=switches, sources=[h.run_id for h in headers(records)],
                       requires=requires, measured=measured_with(points))


def predicted_points(fabric, *, ranks: int, nodes: int, sizes_bytes: list[int],
                     channels: int | None = None) -> tuple[list[TunedPoint], set[str]]:
    """Predicted per-combination times (the one function to swap as the cost model grows), and which
    source each collective used: "nccl" -- the cost model's per (algorithm, protocol) NCCL structure
    (costmodel.algorithm_protocol_times_s) -- or "curves" -- the per-algorithm alpha-beta curves of
    fabrics without it, protocols paired as COST_MODEL_COMBOS assumes. The group spans `nodes` scale-up domains
    (node_domains): the nNodes the rules name is the scale they are predicted for. Each pair is priced at the
    channel count its rule forces at each size (channel_bound: `channels` from the size NCCL would lower them from,
    NCCL's own count below it and on pairs the model prices at NCCL's own count only); the curves have no channel
    count, and their rules name none (own_count_where_not_priced)."""
    import math

    from commbench.costmodel import algorithm_protocol_times_s, collective_time_s
    from commbench.costmodel.choice import uses_nccl_model

    fabric, num_domains = node_domains(fabric, ranks=ranks, nodes=nodes)
    sources: set[str] = set()
    points = []

    def add(plugin_name: str, combo: TuningCombo, times_s) -> None:
        points.extend(TunedPoint(collective=plugin_name, nodes=nodes, ranks=ranks, size_bytes=size, combo=combo,
                                 time_us=float(t) * 1e6, predicted=True)
                      for size, t in zip(sizes_bytes, times_s) if 0 < t < math.inf)

    sizes = np.asarray(sizes_bytes, dtype=float)
    for name, plugin_name in PLUGIN_COLLECTIVES.items():
        if uses_nccl_model(fabric, name):
            sources.add("nccl")
            pairs = algorithm_protocol_times_s(fabric, name, sizes, ranks, num_domains)
            forced = algorithm_protocol_times_s(fabric, name, sizes, ranks, num_domains, channels=channels) \
                if channels else pairs
            for (algorithm, protocol), times_s in pairs.items():
                combo = TuningCombo(algo=algorithm, proto=protocol.lower(), channels=channels)
                bound = channel_bound(combo, ranks)   # from here up the rule forces `channels`: priced there at them
                if bound is not None:
                    times_s = np.where(sizes >= bound, forced[algorithm, protocol], times_s)
                add(plugin_name, combo, np.broadcast_to(times_s, (len(sizes_bytes),)))
            continue
        if name not in fabric.collectives:
            continue
        for algorithm in COST_MODEL_COMBOS:
            try:
                times_s = collective_time_s(fabric, name, sizes_bytes, ranks, num_domains, algorithm=algorithm)
            except (CommbenchError, ValueError):
                continue  # the fabric has no curve for this algorithm at this scale
            sources.add("curves")
            add(plugin_name, dataclasses.replace(cost_model_combo(algorithm, num_domains > 1), channels=channels),
                times_s)
    return points, sources


def _nccl_checked_name(cell, fabric) -> str | None:
    """The collective's commbench name where `cell` is a predicted choice NCCL's own model can check on `fabric`, else
    None (measured, empty, or a collective the fabric has no NCCL parameters for: kept as is)."""
    from commbench.costmodel.choice import uses_nccl_model

    name = _PLUGIN_TO_NAME.get(cell.collective)
    if not cell.predicted or cell.choice is None or name is None or not uses_nccl_model(fabric, name):
        return None
    return name


def drop_slower_than_nccl(cells: list[Cell], fabric, domains: int) -> tuple[list[Cell], list[str]]:
    """The predicted cells with no choice that NCCL's own model (costmodel.nccl_own: NCCL's tables and size corrections,
    nothing of commbench's) rates slower than NCCL's own pick anywhere in the cell's sizes: such a rule could only make
    NCCL slower by its own reckoning, so the choice goes back to NCCL's default (NCCL's example plugin gets a fill-in
    there, which follow_nccl_picks then holds to NCCL's own pick). Cells of collectives the fabric has no NCCL
    parameters for are kept (not checkable). Returns (cells, the cells whose choice was dropped: dropped_lines names
    them once the target's cells are final)."""
    out, dropped = [], []
    for cell in cells:
        name = _nccl_checked_name(cell, fabric)
        if name is None:
            out.append(cell)
            continue
        loss = slower_at_forced_channels(fabric, name, cell.choice, cell.min_bytes, cell.max_bytes, cell.ranks,
                                         domains)
        if loss is None:
            out.append(cell)
            continue
        (size, mine_us, pick, pick_us), forced = loss
        why = (f"predicted {cell.choice.algo}/{cell.choice.proto} dropped: NCCL's own model rates it {mine_us:.1f} us at "
               f"{size} B{_at_channels(forced, fabric)} against its pick {pick[0]}/{pick[1].lower()} {pick_us:.1f} us"
               + (" on its own count" if forced else ""))
        out.append(dataclasses.replace(cell, choice=None, fallback=None, fallbacks_after=(), fallback_run_ids=(),
                                       filled=False, dropped_reason=why))
        dropped.append(out[-1])
    return out, dropped


def dropped_lines(dropped: list[Cell], final: list[Cell]) -> list[str]:
    """One line per choice drop_slower_than_nccl dropped, over the bytes the target's final cells give it: the cell
    the plugin reads, as its comment in the file names it (for commbench's plugin hold_to_measured ends a winning
    neighbour at its own measured size, so the kept cell reaches down to it: [131073-393216], not the midpoint cell
    [196609-393216] the choice was checked on)."""
    lines = []
    for cell in dropped:
        scale = (cell.collective, cell.nodes, cell.ranks, cell.reg_buff, cell.dropped_reason)
        parts = [c for c in final if (c.collective, c.nodes, c.ranks, c.reg_buff, c.dropped_reason) == scale] or [cell]
        lo, hi = min(c.min_bytes for c in parts), max(c.max_bytes for c in parts)
        lines.append(f"{cell.collective} nNodes={cell.nodes} nRanks={cell.ranks} [{lo}-{hi}] {cell.dropped_reason}; "
                     "left to NCCL")
    return lines


_PLUGIN_TO_NAME = {plugin: name for name, plugin in PLUGIN_COLLECTIVES.items()}


def channel_bound(combo: TuningCombo, ranks: int) -> int | None:
    """The size from which a predicted rule naming `combo` forces its channel count on the call: below it rules_for
    writes channels 0, NCCL's own count, which NCCL lowers by size (results.nccl_channels.lowering_bound_bytes at
    NCCL's default settings, as rules_for applies it to predicted rules); 0: at every size (PAT). None: at no size --
    no count named, or a pair the model prices at NCCL's own count only (NVLS, NVLS tree, CollNet: not
    nccl_model.CHANNEL_SCALED), whose predicted rules name 0 (own_count_where_not_priced)."""
    from commbench.costmodel.nccl_model import CHANNEL_SCALED
    from commbench.results.nccl_channels import lowering_bound_bytes

    if combo.channels is None or combo.algo not in CHANNEL_SCALED:
        return None
    return lowering_bound_bytes(combo, ranks, {}) or 0


def forced_parts(combo: TuningCombo, min_bytes: int, max_bytes: int, ranks: int) -> list[tuple[int, int, int | None]]:
    """[min_bytes, max_bytes] cut at channel_bound: [(lo, hi, the count the rule forces there, None: NCCL's own)]."""
    bound = channel_bound(combo, ranks)
    if bound is None or bound > max_bytes:
        return [(min_bytes, max_bytes, None)]
    if bound <= min_bytes:
        return [(min_bytes, max_bytes, combo.channels)]
    return [(min_bytes, bound - 1, None), (bound, max_bytes, combo.channels)]


def slower_at_forced_channels(fabric, collective: str, combo: TuningCombo, min_bytes: int, max_bytes: int, ranks: int,
                              domains: int, *, excluded=()) -> tuple[tuple[int, float, tuple, float], int | None] | None:
    """nccl_own.slower_than_nccl_pick of `combo`'s pair priced at the count its rule forces at each size (forced_parts;
    NCCL's own pick on NCCL's own count): None where it is nowhere slower, else (the loss, the count it ran on there,
    None: NCCL's own)."""
    from commbench.costmodel.nccl_own import slower_than_nccl_pick

    for lo, hi, channels in forced_parts(combo, min_bytes, max_bytes, ranks):
        loss = slower_than_nccl_pick(fabric, collective, _pair(combo), lo, hi, ranks, domains, excluded=excluded,
                                     channels=channels)
        if loss is not None:
            return loss, channels
    return None


def _at_channels(channels: int | None, fabric) -> str:
    """" at N channel(s)" where a rule forces N, with the count it runs on where NCCL caps N (nccl_model.call_channels)."""
    from commbench.costmodel.nccl_model import call_channels

    if not channels:
        return ""
    runs = call_channels(fabric.nccl, channels) if fabric.nccl is not None else channels
    return f" at {channels} channel(s)" + (f" (runs on the communicator's {runs})" if runs != channels else "")


def forced_channel_notes(channels: int, fabric, lines: list[str]) -> list[str]:
    """What --channels N does to predicted rules, and the sizes where N channels would run slower than NCCL's own pick
    (`lines`: drop_slower_than_nccl's and follow_nccl_picks' lines; those naming N channels)."""
    modelled = f"; NCCL runs at most the model's {fabric.nccl.channels}" if fabric.nccl is not None else ""
    notes = [f"--channels {channels}: rules force {channels} channel(s) from where NCCL would lower them (0 below), "
             f"each pair priced at that count (busBw = nChannels x bw, {NCCL_RELEASE} tuning.cc:276{modelled})"]
    slower = [line for line in lines if _at_channels(channels, fabric) + " " in line]
    if slower:
        notes.append(f"{channels} channel(s) would run slower than NCCL's own pick on its own count at {len(slower)} "
                     "place(s), left to NCCL (dropped/held lines below): "
                     + ", ".join(line.split(" predicted ")[0] for line in slower))
    return notes


def own_count_where_not_priced(rules: list[Rule], fabric) -> tuple[list[Rule], list[str]]:
    """Predicted rules name a channel count only where the model priced the pair at it (predicted_points): NVLS, NVLS
    tree and CollNet (not nccl_model.CHANNEL_SCALED: nvlsChannels, CollNet's own count) and every rule from
    per-algorithm curves (no channel count) name 0, NCCL's own count, at which they were priced. Returns (rules, one
    note naming the collectives and pairs so changed, if any)."""
    from commbench.costmodel.choice import uses_nccl_model
    from commbench.costmodel.nccl_model import CHANNEL_SCALED

    out, changed = [], {}
    for rule in rules:
        curves = not uses_nccl_model(fabric, _PLUGIN_TO_NAME.get(rule.collective, ""))
        if (rule.channels > 0 or rule.nvls_channels) and (curves or rule.algo not in CHANNEL_SCALED):
            changed.setdefault(f"{rule.collective} " + ("(curves)" if curves else rule.algo),
                               rule.channels or rule.nvls_channels)
            rule = dataclasses.replace(rule, channels=0, nvls_channels=0)
        out.append(rule)
    notes = [f"NVLS, NVLS tree, CollNet and curve rules say channels 0 (NCCL's own count), not --channels "
             f"{'/'.join(map(str, sorted(set(changed.values()))))}: they run on nvlsChannels or CollNet's own count, "
             "the curves have none, and the model prices them only there: " + ", ".join(changed)] if changed else []
    return out, notes


def _pair(combo: TuningCombo) -> tuple[str, str]:
    from commbench.costmodel.nccl_tables import PROTOCOLS, canonical_name

    return combo.algo, canonical_name(combo.proto, PROTOCOLS)


def follow_nccl_picks(cells: list[Cell], fabric, domains: int) -> tuple[list[Cell], list[str]]:
    """NCCL's example plugin's predicted cells (covered: every size of a scale has a rule, fill-ins included, the first
    and last stretched to 0 and SIZE_MAX) held to NCCL's own model (costmodel.nccl_own), which no size of a rule may
    lose to: each cell is cut at the sizes where NCCL's own order of its pairs changes (nccl_own.own_rankings) and where
    its rule starts forcing its channel count (forced_parts), and
      * where the cell's choice, priced at the count its rule forces there (slower_at_forced_channels), is slower than
        NCCL's own pick on NCCL's own count, that part names NCCL's pick instead, channels 0 (a fill-in: without a rule
        the plugin would run the size on one channel, so "NCCL decides" is NCCL's pick on its own channels);
      * where its choice is a pair NCCL may leave out of a call (not always_in_table: LL128, NVLS, ...), the FALLBACK
        rules after it (Cell.fallback, Cell.fallbacks_after) are NCCL's own next picks in NCCL's order down to the first
        pair NCCL never leaves out, each on NCCL's own count (channels 0): the plugin skips a rule whose pair the call
        left out and applies the next, so a call runs NCCL's own pick among the pairs it left in, whichever those are.
    Cells of collectives without NCCL parameters (curves) keep add_fallbacks' fallback. Returns (cells, one line per
    part that now names NCCL's pick)."""
    from commbench.costmodel.nccl_own import own_rankings
    from commbench.results.nccl_tuner_targets import NCCL_PICK_FILL_IN, always_in_table

    out, lines = [], []
    for cell in cells:
        name = _nccl_checked_name(cell, fabric)
        if name is None:
            out.append(cell)
            continue
        def combo(pair: tuple[str, str]) -> TuningCombo:   # NCCL's own pick runs on NCCL's own count
            return dataclasses.replace(cell.choice, algo=pair[0], proto=pair[1].lower(), channels=None)

        pieces: list[tuple[int, int, TuningCombo, tuple[TuningCombo, ...], bool]] = []
        parts = [(lo, hi, ranking) for part_lo, part_hi, _ in forced_parts(cell.choice, cell.min_bytes, cell.max_bytes,
                                                                            cell.ranks)
                 for lo, hi, ranking in own_rankings(fabric, name, part_lo, part_hi, cell.ranks, domains)]
        for lo, hi, ranking in parts:
            choice, replaced = cell.choice, False
            if ranking and slower_at_forced_channels(fabric, name, cell.choice, lo, hi, cell.ranks,
                                                     domains) is not None:
                choice, replaced = combo(ranking[0]), True
            chain: list[TuningCombo] = []
            if not always_in_table(cell.collective, choice):
                for pair in ranking:
                    if pair == _pair(choice):
                        continue
                    chain.append(combo(pair))
                    if always_in_table(cell.collective, chain[-1]):
                        break
            if pieces and pieces[-1][2:] == (choice, tuple(chain), replaced) and pieces[-1][1] + 1 == lo:
                pieces[-1] = (pieces[-1][0], hi, choice, tuple(chain), replaced)
            else:
                pieces.append((lo, hi, choice, tuple(chain), replaced))
        held: list[tuple[int, int, TuningCombo]] = []   # the parts naming NCCL's pick, one line per run of one pick
        for lo, hi, choice, chain, replaced in pieces:
            if replaced and held and held[-1][2] == choice and held[-1][1] + 1 == lo:
                held[-1] = (held[-1][0], hi, choice)
            elif replaced:
                held.append((lo, hi, choice))
        bound = channel_bound(cell.choice, cell.ranks)
        lines += [f"{cell.collective} nNodes={cell.nodes} nRanks={cell.ranks} [{lo}-{hi}] predicted "
                  f"{cell.choice.algo}/{cell.choice.proto}"
                  + (f"{_at_channels(cell.choice.channels, fabric)} from {max(bound, lo)} B"
                     if bound is not None and bound <= hi else "")
                  + f" is slower there by NCCL's own model than its pick {pick.algo}/{pick.proto} on its own count: "
                  "the rule names NCCL's pick there, channels 0" for lo, hi, pick in held]
        for lo, hi, choice, chain, replaced in pieces:
            part = dataclasses.replace(cell, min_bytes=lo, max_bytes=hi, size_bytes=min(max(cell.size_bytes, lo), hi),
                                       choice=choice, fallback=chain[0] if chain else None, fallbacks_after=chain[1:],
                                       fallback_run_ids=())
            if replaced:
                part = dataclasses.replace(part, best=choice, speedup=None, filled=True, fill_in_reason=NCCL_PICK_FILL_IN)
            out.append(part)
    return out, lines


def nccl_check_notes(dropped: list[str], checked: bool, unchecked: bool, held: list[str] = ()) -> list[str]:
    """The header lines saying how many predicted choices NCCL's own model dropped, and why; `held`: the parts of NCCL's
    example plugin's rules that name NCCL's own pick instead (follow_nccl_picks)."""
    notes = []
    if checked:
        notes.append(f"checked against NCCL's own model (NVIDIA/nccl {NCCL_RELEASE} tuning.cc: its tables, tree "
                     f"correction factor and ring plateau, no commbench term): dropped {len(dropped)} predicted "
                     "choice(s) it rates slower than NCCL's own pick (a rule there could only make NCCL slower by its "
                     "own reckoning)" + (":" if dropped else ""))
        notes += [f"  dropped: {line}" for line in dropped]
        if held:
            notes.append(f"NCCL's example plugin runs a size without a rule on one channel, so {len(held)} part(s) of "
                         "its fill-ins and stretched rules name NCCL's own pick there instead:")
            notes += [f"  held: {line}" for line in held]
        notes.append("FALLBACK rules (NCCL's example plugin: for calls NCCL left the pair of the rules above out of) "
                     "name NCCL's own next picks in its own order, down to a pair NCCL never leaves out, so such a call "
                     "runs NCCL's own pick among the pairs it left in")
    if unchecked:
        notes.append("rules from per-algorithm curves are NOT checked against NCCL's own model: the fabric has no "
                     "NCCL parameters (use a preset, commbench systems)")
    return notes


def node_domains(fabric, *, ranks: int, nodes: int):
    """(fabric, scale-up domains) for `ranks` ranks over `nodes` NCCL nodes: NCCL counts one node per scale-up domain
    (results.nccl_nodes: a host, or a multi-node NVLink rack), and the cost model takes the domains a group spans,
    ceil(ranks / domains) ranks in each (costmodel.nccl_model.check_group), so the domains are `nodes`; the fabric
    grows to as many domains where it has fewer. CommbenchError (one line, naming --nodes) where no such placement
    exists: more nodes than ranks, or more ranks per node than a domain holds."""
    import math

    if not 1 <= nodes <= ranks:
        raise CommbenchError(f"--nodes={nodes} is invalid: from 1 to the {ranks} ranks (each node holds a rank)")
    per_node = math.ceil(ranks / nodes)
    if per_node > fabric.domain_size:
        raise CommbenchError(f"--nodes={nodes} is invalid: {ranks} ranks on {nodes} node(s) put {per_node} on a node, "
                             f"more than the {fabric.domain_size} GPUs of a {fabric.name} scale-up domain (NCCL's "
                             f"node); allowed from {math.ceil(ranks / fabric.domain_size)} to {ranks}")
    if nodes > fabric.num_domains:
        fabric = fabric.scaled(num_gpus=nodes * fabric.domain_size)
    return fabric, nodes


def unpredicted_collectives(fabric, points: list[TunedPoint]) -> list[str]:
    """One note per collective the tuner writes rules for that the fabric holds curves of but predicted_points gave no
    time for (probe CG F5: skipped in silence): a measured curve (algorithm "fitted": NCCL's own choice, one time per
    size) has no (algorithm, protocol) split to choose between, and once one is fitted the NCCL structure no longer
    prices the collective (choice.uses_nccl_model); other curves give no time for COST_MODEL_COMBOS at this scale."""
    predicted = {p.collective for p in points}
    lines = []
    for name, plugin_name in PLUGIN_COLLECTIVES.items():
        if plugin_name in predicted or name not in fabric.collectives:
            continue
        algorithms = sorted({c.algorithm for c in fabric.curves if c.collective == name})
        why = ("its measured curve (fitted) is NCCL's own choice, one time per size with no algorithm/protocol split "
               "to choose between" if "fitted" in algorithms else
               f"its curves ({', '.join(algorithms)}) give no time for {', '.join(COST_MODEL_COMBOS)} at this scale")
        lines.append(f"{plugin_name}: no rule, NCCL decides: {why}; measure it per pair (commbench bench "
                     f"{name} --nccl-algo ... --nccl-proto ...) and write measured rules")
    return lines


def from_fabric(fabric, *, ranks: int, nodes: int, sizes_bytes: list[int], channels: int | None = None,
                target: str = "commbench") -> TunerResult:
    if ranks < 2:
        raise CommbenchError(f"--gpus={ranks} is invalid: a collective needs >= 2 ranks")
    if target == "example-plugin" and channels is None:
        raise CommbenchError("--for example-plugin needs a channel count in every rule and the cost model has none "
                             "(without --channels, or with --channels 0, the rules say 0: NCCL's own count): give "
                             f"--channels N from 1 to {NCCL_MAX_CHANNELS} (NCCL_DEBUG=INFO prints the communicator's "
                             "count), or measure with --nccl-channels and write measured rules")
    points, sources = predicted_points(fabric, ranks=ranks, nodes=nodes, sizes_bytes=sizes_bytes, channels=channels)
    if not points:
        held = [c for c in fabric.latency_only if c.collective in PLUGIN_COLLECTIVES]
        raise CommbenchError(f"fabric {fabric.name!r} predicts none of {', '.join(PLUGIN_COLLECTIVES)} "
                             f"with algorithms {', '.join(COST_MODEL_COMBOS)}"
                             + (f" (its {'; '.join(c.label + ' at ' + c.range_text for c in held)} latency-only "
                                "curves measured a latency alone, no algorithm nor bandwidth to choose between: "
                                "measure larger sizes, e.g. bench -e 16M, with --nccl-algo/--nccl-proto for measured "
                                "rules)" if held else ""))
    chosen = choose_cells(points, need_baseline=False, any_channels=True, predicted_margin=PREDICTED_MARGIN)
    checked_fabric, domains = node_domains(fabric, ranks=ranks, nodes=nodes)
    chosen, dropped_cells = drop_slower_than_nccl(chosen, checked_fabric, domains)
    cells, _, switches = for_target(chosen, points, target, "time")
    replaced: list[str] = []
    if target == "example-plugin":   # its fill-ins, stretched ends and FALLBACKs, held to NCCL's own picks
        from commbench.results.nccl_tuner_targets import switch_backs

        cells, replaced = follow_nccl_picks(cells, checked_fabric, domains)
        switches = switch_backs(cells, points, "time")
    dropped = dropped_lines(dropped_cells, cells)
    notes = ["PREDICTED from the cost model: measure before trusting (commbench bench --nccl-algo ... then nccl-tuner)",
             f"a rule only where the fastest predicted pair leads every other by more than {100 * PREDICTED_MARGIN:g}% "
             "(the cost model's held-out median error); elsewhere NCCL decides"]
    if "nccl" in sources:
        notes.append("per (algorithm, protocol) times from the cost model's NCCL structure (costmodel/nccl_model.py, "
                     f"NVIDIA/nccl {NCCL_RELEASE} tuning.cc's tables) with commbench's small-size and pipeline terms: "
                     "the fastest pair by that model")
    if "curves" in sources:
        notes.append(PAIRING_NOTE)
    notes += unpredicted_collectives(fabric, points)
    rules = rules_for(cells, target, {})
    if channels is None:
        notes.append("the cost model has no channel count: rules say 0, NCCL's own count (set one with --channels)")
    else:
        rules, unpriced = own_count_where_not_priced(rules, checked_fabric)
        notes += (forced_channel_notes(channels, checked_fabric, dropped + replaced) if "nccl" in sources else []) \
            + unpriced
    notes += nccl_check_notes(dropped, "nccl" in sources, "curves" in sources, replaced)
    requires, unrequired = predicted_requirements(fabric, sources)
    return TunerResult(points=points, cells=cells, rules=rules, notes=notes + unrequired, csv_cells=cells,
                       csv_rules=rules, switch_backs=switches, sources=[fabric.name], requires=requires)


# The device name CUDA gives a preset's GPU (cuDeviceGetName, which torch.cuda.get_device_name returns): the SXM parts
# every preset describes, as costmodel/profile.py lists them ("SXM names carry no marker"). A GPU not here gets no
# `# requires: gpu` line (said in the header).
CUDA_DEVICE_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "b200": "NVIDIA B200",
                     "gb200": "NVIDIA GB200"}


def predicted_requirements(fabric, sources) -> tuple[list[str], list[str]]:
    """(`# requires:` values, notes) of predicted rules, as system_requirements gives measured ones: the NCCL release
    whose tables priced the pairs (nccl_tables.NCCL_RELEASE, where the NCCL structure did: `sources` holds "nccl") and
    the fabric's GPU by its CUDA device name (CUDA_DEVICE_NAMES). commbench's plugin then uses no rule under another
    NCCL or GPU, whose choices those tables and that GPU's links do not describe; a note says what is left unchecked."""
    import re

    requires, notes = [], []
    if "nccl" in sources:
        release = re.match(r"v?(\d+\.\d+\.\d+)", NCCL_RELEASE).group(1)   # "v2.27.7-1" -> "2.27.7"
        requires.append(f"nccl {release}")
    else:
        notes.append("no 'requires: nccl' line: the pairs were priced from the fabric's curves, whose NCCL version it "
                     "does not give; commbench's plugin uses these rules under any NCCL")
    gpu = fabric.gpu.name if fabric.gpu is not None else ""
    if gpu in CUDA_DEVICE_NAMES:
        requires.append(f"gpu {CUDA_DEVICE_NAMES[gpu]}")
    else:
        named = gpu or "the fabric's GPU"
        notes.append(f"no 'requires: gpu' line: the CUDA device name of {named} is not known here; "
                     "commbench's plugin uses these rules on any GPU")
    return requires, notes
