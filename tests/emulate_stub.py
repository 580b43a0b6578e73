"""`commbench emulate` without namespaces: its Fabric and rank launcher replaced, so a test can read the fabric spec
the command would build and what it prints, as a user without root would not see it."""

from __future__ import annotations


def no_fabric(monkeypatch) -> dict:
    """emulate's fabric and ranks replaced (no namespaces, no ranks run): returns a dict whose "spec" is the
    FabricSpec emulate built, once it has run."""
    import commbench.cli.emulate as emulate_cli

    seen: dict = {}

    class Fabric:
        def __init__(self, spec):
            seen["spec"] = spec

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def uplink_counters(self):
            return []

    monkeypatch.setattr(emulate_cli, "Fabric", Fabric)
    monkeypatch.setattr(emulate_cli, "run_ranks", lambda spec, command, restyle=None, left_out=None: 0)
    return seen
