"""backends/jax_backend.py: the jitted step does the workload's work and nothing more."""

from __future__ import annotations

import numpy as np

from test_same_start import resolved, workload


def test_a_forward_step_returns_its_loss_and_copies_no_parameters(tmp_path):
    # a forward step that returned its (undonated) state made XLA copy every parameter each step
    w = workload(resolved("framework=jax", "model=gemm", "run.task=forward", "run.steps=8"), tmp_path)
    params = w.state[0]
    losses = [w.loss(w.step(i)) for i in range(3)]
    assert np.isfinite(losses).all()
    assert w.state[0] is params  # a forward step leaves the state as it was
    info = w.compile_info()
    assert info["xla_output_bytes"] <= 8, info  # the scalar loss, no copy of the 64×64 weight
