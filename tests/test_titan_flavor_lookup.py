"""Probe BN (2026-12-06): a TorchTitan 'does not fit' refusal of kimi-k2 on 128 H100 took 40-77 CPU seconds (about
1.4 s under Megatron): no_fit_message rebuilds the request per GPU count, and each rebuild matched the model against
TorchTitan's zoo flavors by loading every zoo model once per size field. The zoo's sizes are now read once."""

from __future__ import annotations

from commbench.planner.models import zoo
from commbench.planner.models.zoo import load_model
from commbench.planner.search import frameworks
from commbench.planner.search.frameworks import TITAN_ZOO_FLAVORS, titan_sized_flavor


def test_matching_a_model_to_the_flavors_reads_each_zoo_model_once(monkeypatch):
    calls = []
    real = zoo.load_model

    def counting(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(zoo, "load_model", counting)
    frameworks._zoo_sizes.cache_clear()
    model = load_model("kimi-k2")
    for _ in range(20):   # as no_fit_message's trial requests do
        titan_sized_flavor(model)
    assert len(calls) <= len(TITAN_ZOO_FLAVORS), calls
    frameworks._zoo_sizes.cache_clear()


def test_a_zoo_flavor_is_still_matched_and_another_model_is_not():
    name = next(iter(TITAN_ZOO_FLAVORS))
    assert titan_sized_flavor(load_model(name)) == name
    assert "kimi-k2" not in TITAN_ZOO_FLAVORS and titan_sized_flavor(load_model("kimi-k2")) is None
