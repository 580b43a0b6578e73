"""What sets one run of a results file apart from another in a report: the NCCL version, the devices, the
hosts, the world size, a real or emulated fabric, and on gloo the torch version (from each run's header).

Two runs that agree in all of these are repeats of one setup; runs that differ are not the same
measurement, and a report keeps them apart and labels each by what differs (`labels_by_what_differs`),
naming them with the shared one-line text of mixed runs (records.mixed_runs_text) where it says so.
"""

from __future__ import annotations

from typing import Callable

from commbench.results.records import RunHeader, mixed_runs_text


def _hosts(h: RunHeader) -> str:
    hosts = sorted(set(h.hostnames))
    return "hosts " + (",".join(hosts[:3]) + (f" +{len(hosts) - 3}" if len(hosts) > 3 else "") if hosts else "unknown")


def _fabric(h: RunHeader) -> str:
    from commbench.results.emulated import setup_text

    return setup_text(h.emulated)


def _gloo_torch(h: RunHeader) -> str:
    """On gloo torch is the collective implementation (torch.distributed's ProcessGroupGloo, built into torch), as
    NCCL's library is on NCCL: its version is the run's; "" for other backends (torch only launches NCCL's kernels)."""
    return f"torch {h.torch_version or 'unknown'} (gloo)" if h.backend == "gloo" else ""


def _gloo_threads(h: RunHeader) -> str:
    """On gloo the ranks' torch intra-op threads (torch_threads) decide a collective's time (README: 2 ms against
    20-80 ms per 512 KiB reduce_scatter with one thread per core): part of the run's setup; "" for other backends
    (their collectives run on the device) and where the header does not record it (_known)."""
    if h.backend != "gloo" or not h.torch_threads:
        return ""
    counts = sorted(set(h.torch_threads))
    return f"{counts[0]} torch thread(s) per rank" if len(counts) == 1 else \
        f"torch threads per rank {','.join(map(str, h.torch_threads))}"


def fabric_env(header: RunHeader) -> str:
    """A run's NCCL_* settings that change the fabric NCCL uses (NCCL_P2P_DISABLE, NCCL_IB_HCA, ...): not the
    tuned ones (NCCL_ALGO/NCCL_PROTO are fitted apart, forced channel counts skipped: fit_records) nor NCCL_DEBUG*."""
    from commbench.comm.nccl_tuning import TUNED_ENV_KEYS

    kept = {k: v for k, v in sorted(header.nccl_settings().items())  # with NCCL's configuration files'
            if k not in TUNED_ENV_KEYS and not k.startswith("NCCL_DEBUG")}
    return " ".join(f"{k}={v}" for k, v in kept.items()) or "no NCCL_* settings"


# what (plural, as the mixed-runs text names it) -> the value a label shows
SETUP_FIELDS: dict[str, Callable[[RunHeader], str]] = {
    "NCCL versions": lambda h: f"NCCL {h.nccl_version or 'none'}",
    "devices": lambda h: ", ".join(sorted(set(h.devices))) or "devices unknown",
    "hosts": _hosts,
    "world sizes": lambda h: f"world size {h.world_size}",
    "fabrics": _fabric,
    "torch versions on gloo": _gloo_torch,
    "torch threads on gloo": _gloo_threads,
}
SYSTEM_FIELDS = ("NCCL versions", "devices", "hosts")  # what makes an NCCL tuning result another system's
# what makes `compare`'s NEW another measurement than BASE
# (and what `sweep --resume` refuses to add to a file, with the NCCL_* settings: resume_setup_changes) and `fit`
# refuses to merge (costmodel.profile.check_one_fabric)
GATE_FIELDS = ("NCCL versions", "devices", "fabrics", "torch versions on gloo", "torch threads on gloo")
# what `compare` notes where NEW differs from BASE but judges it: the torch that launched NCCL's collectives, the
# commbench that measured them (a harness change may move times: said, never refused)
NOTED_FIELDS: dict[str, Callable[[RunHeader], str]] = {
    "torch versions on NCCL": lambda h: f"torch {h.torch_version}" if h.backend != "gloo" else "",
    "commbench versions": lambda h: f"commbench {h.commbench_version}",
}


def setup_of(header: RunHeader, fields=tuple(SETUP_FIELDS)) -> tuple:
    """The run's setup: its value of each field; every host (the fabric's value names every parameter of an
    emulated one: results/emulated.py setup_text)."""
    whole = {"hosts": ",".join(sorted(set(header.hostnames)))}
    return tuple(whole.get(what, SETUP_FIELDS[what](header)) for what in fields)


def same_setup(a: RunHeader | None, b: RunHeader | None) -> bool:
    """Both headers known, their setups equal and their NCCL_* environments too (a combination of an NCCL
    tuning sweep is a launch with its own NCCL_ALGO/NCCL_PROTO: not a continuation of NCCL's default)."""
    if a is None or b is None:
        return False
    known = [what for what in SETUP_FIELDS if what not in _UNKNOWN_IS_NO_CHANGE or (_known(a, what) and _known(b, what))]
    return setup_of(a, known) == setup_of(b, known) and a.nccl_settings() == b.nccl_settings()


# fields a header written before they were recorded does not hold: unknown on either side is no change
_UNKNOWN_IS_NO_CHANGE = ("torch threads on gloo",)


def resume_setup_changes(earlier: RunHeader, header: RunHeader) -> list[str]:
    """"torch threads on gloo: 1 torch thread(s) per rank -> 2 torch thread(s) per rank" per field of GATE_FIELDS,
    and the NCCL_* settings (fabric_env), in which a launch (`header`) differs from the run its file already holds
    (`earlier`): what `compare` would refuse as another setup and `fit` as a mix, so `sweep --resume` refuses to put
    both in one file. A field either header does not record is no change."""
    changes = [f"{what}: {SETUP_FIELDS[what](earlier) or 'none'} -> {SETUP_FIELDS[what](header) or 'none'}"
               for what in GATE_FIELDS if _known(earlier, what) and _known(header, what)
               and SETUP_FIELDS[what](earlier) != SETUP_FIELDS[what](header)]
    if fabric_env(earlier) != fabric_env(header):
        changes.append(f"NCCL_* settings: {fabric_env(earlier)} -> {fabric_env(header)}")
    return changes


def labels_by_what_differs(runs: dict[str, RunHeader | None], fields=tuple(SETUP_FIELDS), *,
                           unique: bool = True) -> dict[str, str]:
    """{run id: the values of `fields` in which the runs differ, e.g. "NCCL 2.21.5, hosts n1"}. `unique`: a run
    whose label another run shares (repeats of one setup, or a difference the short label does not show)
    also gets "run <id>"; a run without a header (provenance unknown) is "run <id>"."""
    known = {run_id: h for run_id, h in runs.items() if h is not None}
    differing = [what for what in fields if len({SETUP_FIELDS[what](h) for h in known.values()}) > 1]
    labels = {run_id: ", ".join(filter(None, (SETUP_FIELDS[what](h) for what in differing)))
              for run_id, h in known.items()}
    count: dict[str, int] = {}
    for label in labels.values():
        count[label] = count.get(label, 0) + 1
    out = {}
    for run_id in runs:
        if run_id not in known:
            out[run_id] = f"run {run_id}"
        elif unique and (not labels[run_id] or count[labels[run_id]] > 1):
            out[run_id] = ", ".join(filter(None, (labels[run_id], f"run {run_id}")))
        else:
            out[run_id] = labels[run_id]
    return out


def _known(header: RunHeader, what: str) -> bool:
    """Whether the header records `what` (imports of nccl-tests logs may name no devices or NCCL version, and no
    torch: nccl-tests runs without it)."""
    torch_known = header.torch_version is not None
    return {"devices": bool(set(header.devices) - {"unknown"}), "hosts": bool(set(header.hostnames) - {"unknown"}),
            "NCCL versions": header.nccl_version is not None or header.backend == "gloo",
            "torch versions on gloo": header.backend == "gloo" and torch_known,
            "torch versions on NCCL": header.backend != "gloo" and torch_known,
            "torch threads on gloo": header.backend == "gloo" and bool(header.torch_threads),
            "commbench versions": bool(header.commbench_version) and header.launcher != "nccl-tests"}.get(what, True)


def runs_without_header(records) -> list[str]:
    """The run ids of a file's measurements that no header record of the file describes, in file order: a file
    written without one (by hand, by another tool, its header line lost) has a setup nobody can check."""
    from commbench.results.records import Measurement

    described = {r.run_id for r in records if isinstance(r, RunHeader)}
    return list(dict.fromkeys(r.run_id for r in records if isinstance(r, Measurement) and r.run_id not in described))


def setup_unknown_text(runs: list[str], path: str | None = None, unreadable: list[str] = ()) -> str:
    """The one line naming a file's runs without a readable header record (runs_without_header: written by hand or
    by another tool, its header line lost, or a header of a newer schema_version the reader skipped, said by
    `unreadable`, the file's unreadable lines): their setup cannot be checked against other runs'. compare and
    report say it and judge or draw such runs as measured; fit refuses to merge them with other runs
    (costmodel.profile.check_setup_known). Each caller adds what it does with them."""
    why = f"; the file's unreadable line(s): {'; '.join(unreadable[:2])}" + (" ..." if len(unreadable) > 2 else "") \
        if unreadable else ""
    return (f"{path + ': ' if path else ''}{len(runs)} run(s) without a readable header record (run "
            f"{', '.join(runs[:3])}{' ...' if len(runs) > 3 else ''}{why}): their setup (NCCL version, devices, "
            "emulated fabric) is unknown and cannot be checked")


def setup_changes(base: list[RunHeader], new: list[RunHeader], fields=GATE_FIELDS, *, new_name: str = "new",
                  table: dict[str, Callable[[RunHeader], str]] = SETUP_FIELDS) -> list[str]:
    """"devices (base: cpu (x86_64); new: NVIDIA H100 80GB HBM3)" per field in which a run of `new` holds a value
    no run of `base` does; none where either side has no header (provenance unknown). `new_name`: what the second
    side is called in the text ("history" for the --history folder's runs); `table`: where `fields` are read
    (NOTED_FIELDS for what compare only notes)."""
    texts = []
    for what in fields if base and new else ():
        def values(side):  # a header that does not know the field (an nccl-tests log's devices) is no change
            return sorted({table[what](h) for h in side if _known(h, what)})
        if values(base) and not set(values(new)) <= set(values(base)):
            texts.append(f"{what} (base: {' | '.join(values(base))}; {new_name}: {' | '.join(values(new))})")
    return texts


def mixed_setup_texts(runs: dict[str, RunHeader], fields=tuple(SETUP_FIELDS)) -> list[str]:
    """"NCCL versions (NCCL 2.21.5: run a; NCCL 2.27.3: run b)" per field in which the runs differ."""
    texts = []
    for what in fields:
        named = mixed_runs_text({run_id: SETUP_FIELDS[what](h) for run_id, h in runs.items()})
        if named:
            texts.append(f"{what} ({named})")
    return texts


Placement = tuple[tuple[int, ...], ...]   # the ranks of each host (or rack), by lowest rank: no names


def _header_racks(header: RunHeader) -> Placement | None:
    racks = (header.topology or {}).get("racks")
    if not isinstance(racks, list) or not racks or not all(isinstance(r, list) and r for r in racks):
        return None
    return tuple(sorted(tuple(sorted(int(x) for x in r)) for r in racks))


def rank_placement(header: RunHeader) -> tuple[Placement, Placement | None] | None:
    """Which ranks shared a host, and (where the header records them) a scale-up domain: the partitions of the ranks
    (host names left out: CI runners differ run to run), which decide the links each group crosses; None where a
    host is unknown."""
    hosts = [h for h in header.hostnames if h and h != "unknown"]
    if not hosts or len(hosts) != len(header.hostnames):
        return None
    by_host = tuple(sorted(tuple(r for r, h in enumerate(hosts) if h == host) for host in dict.fromkeys(hosts)))
    return by_host, _header_racks(header)


def node_layout(header: RunHeader) -> tuple[str, str | None] | None:
    """How the run's ranks sat on nodes: ("2 host(s) x 4 rank(s)" (uneven: "3 hosts of 4+2+2 ranks", in host order),
    the header's scale-up domains where it records them: "2 rack(s) x 4 rank(s)", else None); None where a host is
    unknown. Not the host names (CI runners differ run to run): the counts, which decide the links a collective
    crosses, and where the ranks are not placed host by host (rack by rack) in rank order, which ranks (Slurm's
    cyclic placement: "(ranks 0,2;1,3)")."""
    placement = rank_placement(header)
    if placement is None:
        return None
    by_host, racks = placement
    hosts = [h for h in header.hostnames]
    return _counts_text(list({h: hosts.count(h) for h in dict.fromkeys(hosts)}.values()), "host", by_host), \
        (_counts_text([len(r) for r in racks], "rack", racks) if racks else None)


def _counts_text(counts: list[int], what: str, placed: Placement) -> str:
    from commbench.comm.topology import format_racks

    text = f"{len(counts)} {what}(s) x {counts[0]} rank(s)" if len(set(counts)) == 1 else \
        f"{len(counts)} {what}s of {'+'.join(map(str, counts))} ranks"
    in_order = [r for group in placed for r in group] == list(range(sum(len(g) for g in placed)))
    return text if in_order else f"{text} (ranks {format_racks(placed, limit=4)})"


def _layout_text(layout: tuple[str, str | None]) -> str:
    return layout[0] + (f", {layout[1]}" if layout[1] else "")


def layout_changes(base: list[RunHeader], new: list[RunHeader], *, new_name: str = "new") -> list[str]:
    """"node layout at world size 8 (base: 2 host(s) x 4 rank(s); new: 1 host(s) x 8 rank(s))" per world size at which
    a run of `new` sat on a node layout no run of `base` at that world size did: other host counts or ranks per host,
    or (where both headers record scale-up domains) other racks. The same rank count on another layout is another
    setup: an intra-node run judged against an inter-node baseline hides up to the NVLink/network gap. Runs whose hosts
    are unknown are no change; nor is a rack split only one side records."""
    texts = []
    for size in sorted({h.world_size for h in new}):
        b = {(p, node_layout(h)) for h in base if h.world_size == size and (p := rank_placement(h))}
        n = {(p, node_layout(h)) for h in new if h.world_size == size and (p := rank_placement(h))}
        if b and any(not any(hb == hn and (rb is None or rn is None or rb == rn) for (hb, rb), _ in b)
                     for (hn, rn), _ in n):
            texts.append(f"node layout at world size {size} (base: {' | '.join(sorted(_layout_text(t) for _, t in b))}; "
                         f"{new_name}: {' | '.join(sorted(_layout_text(t) for _, t in n))})")
    return texts
