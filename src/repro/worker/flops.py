"""FLOPs of one step and what they achieve: the model's own count where it gives one, else measured.

A zoo model (and any `repro.models.api.Model` with `flops_per_example`) counts analytically; a
workload without a formula is measured by its framework on the compiled or traced step (JAX:
XLA's cost analysis of the step it compiled; torch: `torch.utils.flop_counter.FlopCounterMode`
over one step off the clock). The record says which (`results.flops_source`): the two measured
counts are each framework's own and may differ from each other (XLA counts the optimizer too).
"""

from __future__ import annotations


def per_step(config, entry, dims, workload, median_s: float) -> dict:
    batch = config.run.batch_size
    if entry.flops_known():
        per_step = entry.train_flops(dims, batch) if config.run.task == "train" else batch * entry.flops_per_example(dims)
        source = "analytic"
    else:
        measured = getattr(workload, "measured_flops", lambda: None)()
        if not measured:
            return {"flops_source": "unknown"}
        per_step, source = measured
    out = {"flops_per_step": per_step, "flops_source": source, "achieved_tflops": per_step / median_s / 1e12}
    peak = config.hardware.peak_tflops.get(config.precision.name)
    if peak:
        out["mfu"] = out["achieved_tflops"] / peak
    return out
