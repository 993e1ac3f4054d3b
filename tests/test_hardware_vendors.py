"""The GPU vendor seam (hardware.py `Vendor`; issue 57 item 2): a vendor is one registered class,
and every reader of the machine's accelerators (the profile check, the environment a record keeps,
the estimate's host, a timed loop's device state) sees a planted one without another edit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from repro import hardware
from repro.preflight import estimate
from repro.worker import machine

ACME = {"name": "Acme X1", "memory_mib": 196608, "driver": "6.2.1"}


@pytest.fixture
def acme():
    class Acme(hardware.Vendor):
        name, platform = "acme", "gpu"

        def devices(self):
            return (ACME,)

        def telemetry(self, own):
            return [{"index": 0.0, "utilization_gpu": 3.0, "other_processes": []}]

    before = hardware.accelerators()
    hardware.register(Acme)
    try:
        yield before
    finally:
        hardware.VENDORS.pop("acme")
        hardware.accelerators.cache_clear()


def test_a_planted_vendor_is_seen_by_every_reader_of_the_accelerators(acme):
    assert list(hardware.VENDORS)[:2] == ["nvidia", "cpu"] and hardware.VENDORS["acme"].platform == "gpu"
    assert hardware.accelerators() == (*acme, ACME)  # after NVIDIA's own, whatever this machine has
    found = hardware.detect()
    assert found["gpus"][-1] == "Acme X1"
    profile = SimpleNamespace(name="acme_x1", platform="gpu", device_match="x1", device_count=1)
    assert hardware.mismatch(profile, found) is None
    two = SimpleNamespace(name="acme_x1x2", platform="gpu", device_match="x1", device_count=len(found["gpus"]) + 1)
    assert "declares" in hardware.mismatch(two, found) and "Acme X1" in hardware.mismatch(two, found)
    assert "Acme X1" in estimate.hardware_here()[2]
    assert machine.gpus()[-1]["utilization_gpu"] == 3.0


def test_the_registry_refuses_a_nameless_a_platformless_and_a_taken_name():
    with pytest.raises(ValueError, match="needs a `name` and the `platform`"):
        hardware.register(type("Nameless", (hardware.Vendor,), {"platform": "gpu"}))
    with pytest.raises(ValueError, match="needs a `name` and the `platform`"):
        hardware.register(type("Nowhere", (hardware.Vendor,), {"name": "nowhere"}))
    with pytest.raises(ValueError, match="'nvidia' is registered already"):
        hardware.register(type("Again", (hardware.Nvidia,), {}))
    assert list(hardware.VENDORS) == ["nvidia", "cpu"]


def test_the_cpu_is_the_second_member_and_gives_what_records_kept_before_it_was_one():
    """The host's CPU answers the same two queries (hardware.py `Cpu`): its device is the record's
    `environment.cpu` and its telemetry `machine.cpu_frequency`, with the keys records have always
    had; it is never an accelerator (`environment.gpus`, the GPU telemetry)."""
    import os

    from repro.worker import envcapture

    cpu = hardware.host_cpu()
    assert (cpu.name, cpu.platform, cpu.title) == ("cpu", "cpu", "CPU")
    (device,) = cpu.devices()
    assert device == {"model": hardware.cpu_model(), "cores": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                      "isa": list(hardware.cpu_isa())}
    assert envcapture.capture({})["cpu"] == device
    (freq,) = cpu.telemetry(set())
    assert set(freq) >= {"governor"} and all(k.endswith("_mhz") for k in set(freq) - {"governor"})
    assert machine.cpu_frequency() == freq or set(machine.cpu_frequency()) == set(freq)  # the clock moves
    assert device["model"] not in [g["name"] for g in hardware.accelerators()]
    assert all("utilization_gpu" in d or "index" in d for d in hardware.telemetry(set()))
