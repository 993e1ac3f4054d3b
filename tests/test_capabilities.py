"""Each backend declares what it can do in one table (backends/capabilities.py); the preflight refuses,
naming the backend and the capability, a config that asks for more, and the run path (process layout,
simulated CPU devices) reads the same entries."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys

import pytest

from repro import preflight
from repro.backends import capabilities
from repro.config import ConfigError


@pytest.mark.slow
def test_the_table_imports_without_any_framework():
    code = ("import sys, repro.backends, repro.backends.capabilities, repro.preflight.capabilities, "
            "repro.worker.seeding, repro.backends.layouts; "
            "print(sorted(m for m in ('torch', 'jax', 'torch_xla', 'omegaconf', 'hydra') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_declared_backend_has_its_module_and_the_loader_reads_the_table():
    from repro import backends

    assert backends.BACKENDS == {name: caps.module for name, caps in capabilities.BACKENDS.items()}
    for caps in capabilities.BACKENDS.values():
        assert importlib.util.find_spec(caps.module) is not None, caps.module


@pytest.mark.parametrize(("args", "says"), [
    (["framework=torch", "run.capture_ir=true"], "backend torch lacks the capability 'ir'"),
    (["framework=jax", "framework.compile=true"], "backend jax lacks the capability 'compile'"),
    (["framework=torch_compile", "sharding=dp"], "backend torch lacks the capability 'compiled_layouts: dp'"),
    (["framework=torch_xla", "framework.python=null"], "backend torch_xla runs in an interpreter of its own"),
    (["framework=torch", "sharding=tp", "model=vit"], "backend torch's capability 'tp_needs_plan'"),
    (["framework.backend=mxnet"], "framework.backend='mxnet' is not valid; choose one of: jax, torch, torch_xla"),
])
def test_what_a_shipped_backend_lacks_is_refused_by_name(args, says):
    with pytest.raises(ConfigError) as err:
        preflight.plan(["model=mlp", *args] if "model=vit" not in args else args)
    assert says in str(err.value)


# (capability, the value a backend lacking it declares, a config that needs it)
NEEDS = [
    ("ir", False, ["run.capture_ir=true"]),
    ("profile", False, ["run.profile=true"]),
    ("dtypes", ("float32",), ["precision=bf16"]),
    ("autocast", False, ["precision=amp_bf16"]),
    ("layouts", ("none",), ["sharding=fsdp"]),
]


@pytest.mark.parametrize(("capability", "lacking", "args"), NEEDS, ids=[n[0] for n in NEEDS])
def test_a_capability_missing_from_a_backend_is_refused_naming_both(monkeypatch, capability, lacking, args):
    """Take one capability from JAX's declaration: the same config, accepted before, is refused
    with a message naming backend jax and the capability, and the frameworks that still have it."""
    assert preflight.plan(["model=mlp", "framework=jax", *args]).jobs  # JAX has it: accepted
    monkeypatch.setitem(capabilities.BACKENDS, "jax",
                        dataclasses.replace(capabilities.BACKENDS["jax"], **{capability: lacking}))
    with pytest.raises(ConfigError) as err:
        preflight.plan(["model=mlp", "framework=jax", *args])
    message = str(err.value)
    assert "framework=jax" in message and f"backend jax lacks the capability '{capability}" in message, message
    assert "choose a framework that has it (" in message and "jax" not in message.split("has it (")[1].split(")")[0]


def test_the_run_path_reads_the_same_table(monkeypatch):
    """Process layout and simulated CPU devices follow the declarations, not backend names."""
    from repro.backends.layouts import process_count
    from repro.worker import seeding

    (config,) = preflight.plan(["model=mlp", "framework=jax", "sharding=fsdp"]).jobs
    assert process_count(config, 2, 3) == 6 and "XLA_FLAGS" in seeding.worker_env(config)
    monkeypatch.setitem(capabilities.BACKENDS, "jax", dataclasses.replace(
        capabilities.BACKENDS["jax"], processes=capabilities.ONE_PROCESS, cpu_devices=capabilities.CPU_NUM_DEVICES))
    env = seeding.worker_env(config)
    assert process_count(config, 2, 3) == 1 and env["CPU_NUM_DEVICES"] == "4" and "XLA_FLAGS" not in env
