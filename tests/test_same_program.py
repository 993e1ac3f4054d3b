"""The same program is not a price (issue 58 item 4): where both modes of a determinism pair ran one compiled
program under the same settings (XLA:CPU: `run.deterministic` changes nothing), the pair gets no verdict, its
sentence and price row say so; where the programs or torch's switches differ, it is judged as before. Records
built by hand: no processes."""

from __future__ import annotations

from test_determinism_condition import WOBBLE, _sweep

from repro import repeats
from repro.report import comparison, determinism_price, markdown
from repro.report import verdict as V

XLA_CPU = {"deterministic_kernels": True, "autotuning": False, "xla_flags": "", "default_matmul_precision": None}


def _torch_state(deterministic: bool, fill) -> dict:
    return {"deterministic_kernels": deterministic, "autotuning": False, "torch_deterministic_algorithms": deterministic,
            "cudnn_deterministic": deterministic, "cudnn_benchmark": False, "cublas_workspace_config": None,
            "fill_uninitialized_memory": deterministic and fill is not False, "float32_matmul_precision": "highest"}


def _price_sweep(jax_programs=("hlo1", "hlo1"), slower_jax=1.35):
    """jax deterministic / free (deterministic 1.35x slower by the clock) and torch eager in three modes."""
    records = _sweep({("jax", True, None): [slower_jax * w for w in WOBBLE], ("jax", False, None): WOBBLE,
                      ("torch", True, None): [1.4 * w for w in WOBBLE], ("torch", True, False): [1.1 * w for w in WOBBLE],
                      ("torch", False, None): WOBBLE},
                     ("framework", "run.deterministic", "run.fill_uninitialized_memory"))
    for r in records:
        run, fw = r["config"]["run"], r["config"]["framework"]["name"]
        if fw == "jax":
            r["effective"] = {"determinism": dict(XLA_CPU), "platform": "cpu",
                              "program_sha256": jax_programs[0 if run["deterministic"] else 1]}
        else:
            r["effective"] = {"determinism": _torch_state(run["deterministic"], run["fill_uninitialized_memory"]),
                              "platform": "cpu"}
    return records


def test_one_xla_program_in_both_modes_gets_no_verdict_and_says_why():
    c = comparison.build(_price_sweep())
    (jax,) = [v for v in c.tables[0].verdicts if v.axis == "run.deterministic" and "jax" in v.what]
    assert jax.outcome == V.UNFAIR and not jax.decided and "faster" not in jax.text
    assert jax.same.startswith("XLA:CPU has no nondeterministic kernels to replace; one compiled program in 10 runs, "
                               "sha256 hlo1")
    assert jax.text == (f"deterministic vs free on {jax.what}: the same program in both modes ({jax.same}): "
                        "no price to measure")
    prices = {p.framework: p for p in determinism_price.prices(c)}
    assert prices["jax"].same and prices["jax"].cells()["ratio"] == "—" and prices["jax"].cells()["ci"] == "—"
    (line,) = [x for x in determinism_price.lines(c) if x.startswith("jax")]
    assert line.startswith("jax on cpu: the same program in both modes (XLA:CPU has no nondeterministic kernels to "
                           "replace; one compiled program in 10 runs, sha256 hlo1): no price to measure (vit/tiny)")
    # torch's switches differ between its modes: judged as before, the fill's share too
    torch = prices["torch"]
    assert not torch.same and torch.outcome == V.FASTER and torch.cells()["outcome"] == "deterministic slower"
    assert torch.fill_share is not None
    page = "\n".join(markdown.price_lines(c))
    assert "| vit/tiny | jax | — | — | the same program in both modes (XLA:CPU" in page
    assert "| vit/tiny | torch | 1.40 |" in page
    # run.repeats=auto does not wait for a pair it cannot judge
    assert all("jax" not in v.what or v.axis == "framework" for v in repeats._verdicts(_price_sweep()))


def test_a_different_program_or_a_record_without_one_is_judged():
    for programs in (("hlo1", "hlo2"), ("hlo1", None)):
        c = comparison.build(_price_sweep(programs))
        (jax,) = [v for v in c.tables[0].verdicts if v.axis == "run.deterministic" and "jax" in v.what]
        assert not jax.same and jax.outcome == V.FASTER and "deterministic" in jax.text and "no price" not in jax.text


def test_same_program_reads_every_run_and_the_settings():
    runs = [r for r in _price_sweep() if r["config"]["framework"]["name"] == "jax"]
    assert determinism_price.same_program(runs)
    runs[3]["effective"]["determinism"]["xla_flags"] = "--xla_cpu_enable_fast_math=true"
    assert determinism_price.same_program(runs) is None  # one run under other flags: not the same settings
    gpu = [{"effective": {"determinism": {**XLA_CPU, "xla_flags": "--xla_gpu_deterministic_ops=true"}, "platform": "gpu",
                          "program_sha256": "p"}}] * 2
    assert determinism_price.same_program(gpu) == ("XLA_FLAGS --xla_gpu_deterministic_ops=true in both; one compiled "
                                                  "program in 2 runs, sha256 p")
    torch = [{"effective": {"determinism": _torch_state(False, None), "platform": "cuda"}}] * 2
    assert determinism_price.same_program(torch).startswith("torch on cuda read back the same determinism state in 2 runs: "
                                                            "cublas_workspace_config=None, cudnn_benchmark=False")
    assert determinism_price.same_program([{"effective": {"determinism": {"deterministic_kernels": True}}}] * 2) is None
    assert determinism_price.same_program([]) is None
