"""backends/jax_backend.py: the jitted step does the workload's work and nothing more."""

from __future__ import annotations

import numpy as np

from test_same_start import resolved, workload


def test_a_forward_step_returns_its_loss_and_output_copies_no_parameters_and_keeps_the_loss_off_the_dot(tmp_path):
    # a forward step that returned its (undonated) state made XLA copy every parameter each step;
    # one that returned its loss alone let XLA:CPU fuse the loss's reduction into the GEMM's dot,
    # a slower kernel than the dot alone
    w = workload(resolved("framework=jax", "model=gemm", "run.task=forward", "run.steps=8"), tmp_path)
    params = w.state[0]
    losses = [w.loss(w.step(i)) for i in range(3)]
    assert np.isfinite(losses).all()
    assert w.state[0] is params  # a forward step leaves the state as it was
    info = w.compile_info()
    out_bytes = w.batches[0][1].nbytes  # the model's output has its target's shape (regression)
    assert info["xla_output_bytes"] <= 64 + out_bytes, info  # loss, output, tuple table; no copy of the weight
    fused = [block for block in w._compiled.as_text().split("\n}\n") if " dot(" in block]
    assert fused and not any(" reduce(" in block for block in fused), fused
