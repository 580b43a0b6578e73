"""Network namespaces, veth links and tbf rate limits for an emulated multi-rack fabric.

Rack k lives in namespace `<prefix>-r<k>`; its ranks talk to each other over that namespace's
loopback (the kernel routes traffic to a local address through `lo`, whatever the interface) and to
other racks through the interface `uplink` (10.201.0.<k+1>/24, private, visible only inside the
namespaces created here). Two racks are joined by one veth pair; more racks by a bridge in
`<prefix>-fab`. Every rack uplink is limited by a tbf qdisc to the scale-out rate in each direction. One rack has
no uplink (no veth, no tbf): its ranks talk over its loopback alone.
Everything created is deleted on exit, on error and on Ctrl-C (deleting a namespace deletes its links).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from commbench.errors import CommbenchError, invalid

SUBNET = "10.201.0"
UPLINK = "uplink"
MAX_RACKS = 200
MTU_BYTES = 9000  # jumbo frames, as scale-out fabrics use: fewer packets and ACKs per byte
MIN_BURST_BYTES = 32 * 1024   # above a jumbo frame (tbf drops a packet larger than its bucket)
# the rates an uplink takes: below 1 Mbit/s the 32 KiB minimum burst is over a quarter second of line rate (messages
# under it cross unthrottled, 1 MiB takes over 8 s); above 1 Tbit/s is beyond any NIC and loopback (tbf's burst, a
# 32-bit byte count, ends near 17 Tbit/s at 2 ms of line rate)
MIN_RATE_BITS_PER_S, MAX_RATE_BITS_PER_S = 1e6, 1e12
RATE_RANGE = ("allowed 1 Mbit/s (1mbit) to 1 Tbit/s (1tbit): below it tbf's 32 KiB minimum burst is over a quarter "
              "second of line rate, so messages under it are not rate-limited; above it no NIC runs, nor loopback")


@dataclass(frozen=True, kw_only=True)
class FabricSpec:
    num_racks: int
    ranks_per_rack: int
    scale_out_rate_bits_per_s: float | None   # None: one rack, no uplink to limit
    prefix: str

    def __post_init__(self) -> None:
        if not 1 <= self.num_racks <= MAX_RACKS:
            raise invalid("--racks", self.num_racks, f"allowed 1..{MAX_RACKS}")
        if (self.scale_out_rate_bits_per_s is None) != (self.num_racks == 1):
            raise invalid("scale_out_rate_bits_per_s", self.scale_out_rate_bits_per_s,
                          "a rate for 2 racks or more, none for one rack (it has no uplink)")
        if self.scale_out_rate_bits_per_s is not None and \
                not MIN_RATE_BITS_PER_S <= self.scale_out_rate_bits_per_s <= MAX_RATE_BITS_PER_S:
            raise invalid("scale_out_rate_bits_per_s", self.scale_out_rate_bits_per_s, RATE_RANGE)
        if self.ranks_per_rack < 1:
            raise invalid("--ranks-per-rack", self.ranks_per_rack, "must be >= 1")
        from commbench.comm.backends import max_local_ranks

        limit, why = max_local_ranks("gloo")
        if self.num_racks * self.ranks_per_rack > limit:
            raise CommbenchError(f"--racks={self.num_racks} x --ranks-per-rack={self.ranks_per_rack} = "
                                 f"{self.num_racks * self.ranks_per_rack} ranks is too many: allowed up to {limit} ({why})")
        if not self.prefix.replace("-", "").isalnum() or not self.prefix[0].isalnum() or len(self.prefix) > 20:
            raise invalid("--netns-prefix", self.prefix, "letters, digits and '-', starting with a letter or digit, at "
                          "most 20 characters")

    def rack_ns(self, k: int) -> str:
        return f"{self.prefix}-r{k}"

    @property
    def fabric_ns(self) -> str:
        return f"{self.prefix}-fab"

    def rack_addr(self, k: int) -> str:
        return f"{SUBNET}.{k + 1}"

    def namespaces(self) -> list[str]:
        return [self.rack_ns(k) for k in range(self.num_racks)] + ([self.fabric_ns] if self.num_racks > 2 else [])


def check_host() -> None:
    """Root and iproute2 are needed; say so in one line otherwise."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise CommbenchError("commbench emulate needs iproute2 ('ip' and 'tc' not found): "
                             "install it, e.g. apt-get install -y iproute2")
    if os.geteuid() != 0:
        raise CommbenchError("commbench emulate needs root (it creates network namespaces): run it as root or with sudo")


def _run(*args: str) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise CommbenchError(f"'{' '.join(args)}' failed: {detail[0] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def existing_namespaces() -> set[str]:
    return {line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()}


def tbf_burst_bytes(rate_bits_per_s: float) -> int:
    """The tbf bucket: what crosses an uplink at loopback speed once the bucket has refilled (the run header records
    it: a message up to about this size is not rate-limited). tc-tbf(8): at least rate / HZ (HZ <= 1000) to reach the
    rate; twice that, and at least MIN_BURST_BYTES."""
    return max(MIN_BURST_BYTES, int(rate_bits_per_s / 8 / 500))


def tbf_args(rate_bits_per_s: float) -> list[str]:
    # 50 ms queue for TCP
    return ["tbf", "rate", f"{int(rate_bits_per_s)}bit", "burst", str(tbf_burst_bytes(rate_bits_per_s)),
            "latency", "50ms"]


class Fabric:
    """Create on enter, delete on exit (also when setup fails half-way)."""

    def __init__(self, spec: FabricSpec) -> None:
        self.spec = spec
        self.created: list[str] = []

    def __enter__(self) -> "Fabric":
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def setup(self) -> None:
        spec = self.spec
        check_host()
        clash = sorted(set(spec.namespaces()) & existing_namespaces())
        if clash:
            raise invalid("--netns-prefix", spec.prefix, f"namespace(s) already in use: {', '.join(clash)} (left by a "
                          f"killed run? remove them with: commbench emulate --cleanup --netns-prefix {spec.prefix})")
        for ns in spec.namespaces():
            _run("ip", "netns", "add", ns)
            self.created.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            # per-namespace: keep TCP's window across the idle gaps between stages (datacenter tuning)
            _run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0")
        if spec.num_racks == 2:
            _run("ip", "link", "add", UPLINK, "netns", spec.rack_ns(0), "type", "veth",
                 "peer", "name", UPLINK, "netns", spec.rack_ns(1))
        elif spec.num_racks > 2:
            fab = spec.fabric_ns
            _run("ip", "-n", fab, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", fab, "link", "set", "br0", "up")
            for k in range(spec.num_racks):
                port = f"r{k}"
                _run("ip", "link", "add", UPLINK, "netns", spec.rack_ns(k), "type", "veth", "peer", "name", port, "netns", fab)
                _run("ip", "-n", fab, "link", "set", port, "master", "br0")
                _run("ip", "-n", fab, "link", "set", port, "mtu", str(MTU_BYTES), "up")
                _run("tc", "-n", fab, "qdisc", "add", "dev", port, "root", *tbf_args(spec.scale_out_rate_bits_per_s))
        if spec.num_racks >= 2:
            for k in range(spec.num_racks):
                ns = spec.rack_ns(k)
                _run("ip", "-n", ns, "addr", "add", f"{spec.rack_addr(k)}/24", "dev", UPLINK)
                _run("ip", "-n", ns, "link", "set", UPLINK, "mtu", str(MTU_BYTES), "up")
                _run("tc", "-n", ns, "qdisc", "add", "dev", UPLINK, "root", *tbf_args(spec.scale_out_rate_bits_per_s))

    def teardown(self) -> None:
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created.clear()

    def uplink_counters(self) -> list[dict]:
        """Bytes through each rack's uplink (the veth's own counters), per rack."""
        if self.spec.num_racks < 2:
            return []
        rows = []
        for k in range(self.spec.num_racks):
            stats = json.loads(_run("ip", "-n", self.spec.rack_ns(k), "-j", "-s", "link", "show", "dev", UPLINK))[0]["stats64"]
            rows.append({"rack": k, "tx_bytes": stats["tx"]["bytes"], "rx_bytes": stats["rx"]["bytes"],
                         "tx_packets": stats["tx"]["packets"]})
        return rows


def leftover_namespaces(prefix: str | None) -> list[str]:
    """Namespaces an emulated fabric left behind: `<prefix>-r<k>` / `<prefix>-fab`; without a prefix,
    those of the default prefix cb<pid> whose process is gone."""
    found = []
    for ns in sorted(existing_namespaces()):
        head, _, tail = ns.rpartition("-")
        if not (tail == "fab" or (tail.startswith("r") and tail[1:].isdigit())):
            continue
        if prefix is not None:
            if head == prefix:
                found.append(ns)
        elif head.startswith("cb") and head[2:].isdigit() and not os.path.exists(f"/proc/{head[2:]}"):
            found.append(ns)
    return found


def cleanup(prefix: str | None) -> list[str]:
    """Kill what still runs inside leftover namespaces, delete them; return their names."""
    import signal

    check_host()
    removed = []
    for ns in leftover_namespaces(prefix):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _run("ip", "netns", "del", ns)
        removed.append(ns)
    return removed
