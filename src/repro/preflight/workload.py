"""A workload outside the zoo, proved before anything runs: both twins build, agree and convert.

The zoo's models are proved by the test suite (tests/test_models_parity.py); a model of your own
package (`model._target_`, repro.models.api) is proved here, once per source and dims: in a child
process (the parent imports neither framework) it builds the Flax and the torch module, makes one
batch, and checks
- the parameter counts are equal (and names the tensors only one side has),
- the outputs of one batch have the same shape,
- the weight converter round-trips (torch -> canonical -> flax -> canonical is the identity, and
  back), and after copying torch's weights into flax both compute the same outputs; where the
  default converter paired tensors of one shape by declaration order alone, a disagreement names
  them.
A failure is a ConfigError (exit 2, nothing run or written) naming the file and the piece. A pass
is kept in `$XDG_CACHE_HOME/repro/workload-checks/`, keyed by the workload's source sha256, its
dims and the framework versions, so the next command pays nothing.

`python -m repro.preflight.workload '{"target": ..., "dims": {...}}'` is the child.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

from repro import models, paths
from repro.config import schema
from repro.config.schema import ConfigError

FORMAT = 1
TIMEOUT_S = 600
OUTPUT_RTOL = 1e-4  # relative to the largest output: the same function, fp32, two frameworks
LAYOUTS_DECLARED = {"fsdp": ("fsdp",), "tp": ("tp",), "dp_tp": ("tp",)}


def check(cfg: schema.Config) -> None:
    """Refuse a broken workload of your own (nothing for the zoo's models)."""
    target = getattr(cfg.model, models.TARGET_KEY, None)
    if not target:
        return
    entry = models.entry_of(cfg.model)
    declared = getattr(entry, "partitioning", {}) or {}
    for need in LAYOUTS_DECLARED.get(cfg.sharding.name, ()):
        if not declared.get(need):
            raise ConfigError(f"sharding={cfg.sharding.name}: model={cfg.model.name} ({entry.file}) declares no "
                              f"{need} partitioning (partitioning = {{'{need}': True}} on the class, once its "
                              "layers split that way); sharding=dp works for every model")
    if cfg.framework.backend == "torch_xla" and not getattr(entry, "torch_xla", False):
        raise ConfigError(f"framework={cfg.framework.name}: model={cfg.model.name} ({entry.file}) does not say it "
                          "runs under PyTorch/XLA (torch_xla = True on the class, with your package installed in "
                          "the PyTorch/XLA interpreter); use framework=torch or torch_compile")
    dims = schema.dims(cfg.model)
    if problem := proved(target, dims, entry.file):
        raise ConfigError(f"model={cfg.model.name}: {entry.file}: {problem}")


def _cache_file(target: str, dims: dict) -> Path | None:
    from importlib import metadata

    from repro.envs import workload_source

    source = workload_source.describe(target)
    if "sha256" not in source:
        return None
    versions = []
    for name in ("jax", "flax", "torch", "numpy"):
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    key = hashlib.sha256(json.dumps([FORMAT, target, dims, source["sha256"], versions, sys.prefix],
                                    sort_keys=True).encode()).hexdigest()
    return paths.cache_root() / "workload-checks" / f"{key}.json"


def proved(target: str, dims: dict, file: str) -> str | None:
    """None when the workload passed (now or before, same source); else what is wrong."""
    cached = _cache_file(target, dims)
    if cached is not None and cached.is_file():
        return None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.src_dir()), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([sys.executable, "-m", "repro.preflight.workload", json.dumps({"target": target, "dims": dims})],
                              capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return f"building both twins and running one batch took over {TIMEOUT_S} s"
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return f"the check of both twins ended without a result (exit {done.returncode}): {done.stderr.strip()[-600:]}"
    if result.get("problem"):
        return result["problem"]
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(result))
        except OSError:
            pass  # a cache: the next command checks again
    return None


# ---- the child process -----------------------------------------------------------------------

class Problem(Exception):
    pass


def _where(e: BaseException, file: str) -> str:
    """`file:line` of the innermost frame in the workload's own file, where the error came from."""
    lines = [f"line {fs.lineno}" for fs in traceback.extract_tb(e.__traceback__) if fs.filename == file]
    return f" ({lines[-1]})" if lines else ""


def _step(what: str, file: str, fn):
    try:
        return fn()
    except Problem:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: named, not raised
        raise Problem(f"{what} failed{_where(e, file)}: {type(e).__name__}: {e}") from None


def _groups(entry, fmodel, tmodel) -> list[str]:
    """Tensors the default converter paired by declaration order alone (one shape and kind, several
    tensors), as `flax paths <-> torch names`."""
    from repro.models import api, state_flax, state_torch

    if entry.by_path or type(entry).flax_state is not api.Model.flax_state:
        return []
    flax_by, torch_by = {}, {}
    for key, path, _ in state_flax.ordered(fmodel):
        flax_by.setdefault(key.split("#")[0] + "." + key.rsplit(".", 1)[-1], []).append(path)
    for key, name in state_torch.ordered(tmodel):
        torch_by.setdefault(key.split("#")[0] + "." + key.rsplit(".", 1)[-1], []).append(name)
    return [f"{sig}: flax {', '.join(flax_by[sig])} <-> torch {', '.join(torch_by.get(sig, []))}"
            for sig in flax_by if len(flax_by[sig]) > 1]


def probe(target: str, dims: dict) -> dict:
    import numpy as np

    entry = models.load(target)
    file = entry.file
    dims = entry.dims_of(dims)  # as its methods take them (the recorded values: the dict itself)
    x, y = _step("make_batch(dims, 2, rng)", file, lambda: entry.make_batch(dims, 2, np.random.default_rng(0)))

    import jax
    import jax.numpy as jnp
    from flax import nnx

    fmodel = _step("flax_module(dims, rngs, dtype=None, param_dtype=float32)", file,
                   lambda: entry.build_flax(dims, nnx.Rngs(0), dtype=None, param_dtype=jnp.float32))
    f_params = int(sum(np.prod(a.shape) for a in jax.tree_util.tree_leaves(nnx.state(fmodel, nnx.Param))))

    import torch

    tmodel = _step("torch_module(dims)", file, lambda: entry.build_torch(dims))
    t_params = int(sum(p.numel() for p in tmodel.parameters()))
    f_shapes = _step("the converter's flax_shapes", file, lambda: entry.flax_shapes(fmodel))
    t_shapes = _step("the converter's torch_shapes", file, lambda: entry.torch_shapes(tmodel))
    if f_params != t_params:
        only_f = sorted(set(f_shapes) - set(t_shapes))
        only_t = sorted(set(t_shapes) - set(f_shapes))
        raise Problem(f"Flax and torch parameter counts differ: flax_module has {f_params:,}, torch_module "
                      f"{t_params:,}; tensors (shape#rank.kind) only in flax: {only_f or 'none'}, only in torch: "
                      f"{only_t or 'none'}")

    tx = torch.from_numpy(np.ascontiguousarray(x))
    if entry.image_input:
        tx = tx.permute(0, 3, 1, 2).contiguous()
    f_out = np.asarray(_step("the flax module's forward on one batch", file, lambda: fmodel(jnp.asarray(x))))
    with torch.no_grad():
        t_out = _step("the torch module's forward on one batch", file, lambda: tmodel(tx)).float().numpy()
    for framework, out in (("flax", f_out), ("torch", t_out)):
        if not np.all(np.isfinite(out)):  # not the converter's fault: no weights were exchanged yet
            bad = "NaN" if np.isnan(out).any() else "inf"
            raise Problem(f"the {framework} module's forward returns {bad} on one batch of 2 (input {tuple(x.shape)}, "
                          f"its own initial weights): {int((~np.isfinite(out)).sum())} of {out.size} outputs are not "
                          f"finite; a workload must compute finite outputs before its twins can be compared")
    if f_out.shape != t_out.shape:
        raise Problem(f"output shapes differ between the frameworks on one batch of 2 (input {tuple(x.shape)}): "
                      f"flax {tuple(f_out.shape)}, torch {tuple(t_out.shape)}")

    if set(f_shapes) != set(t_shapes) or any(tuple(f_shapes[k]) != tuple(t_shapes[k]) for k in f_shapes):
        diff = sorted(set(f_shapes) ^ set(t_shapes)) or [k for k in f_shapes if tuple(f_shapes[k]) != tuple(t_shapes[k])]
        raise Problem(f"the weight converter's layouts differ (run.init=shared could not load one draw into both): "
                      f"{diff[:8]}")
    state = _step("torch_state(torch model)", file, lambda: entry.torch_state(tmodel))
    _step("load_flax_state(flax model, state)", file, lambda: entry.load_flax_state(fmodel, state))
    back = _step("flax_state(flax model)", file, lambda: entry.flax_state(fmodel))
    broken = [k for k in state if k not in back or not np.array_equal(np.asarray(state[k]), np.asarray(back[k]))]
    if broken:
        raise Problem(f"the weight converter does not round-trip torch -> flax -> torch: {broken[:8]} come back "
                      "changed (flax_state / load_flax_state)")
    _step("load_torch_state(torch model, state)", file, lambda: entry.load_torch_state(tmodel, back))
    again = entry.torch_state(tmodel)
    broken = [k for k in back if not np.array_equal(np.asarray(back[k]), np.asarray(again[k]))]
    if broken:
        raise Problem(f"the weight converter does not round-trip flax -> torch -> flax: {broken[:8]} come back "
                      "changed (torch_state / load_torch_state)")
    f_out = np.asarray(fmodel(jnp.asarray(x)))
    with torch.no_grad():
        t_out = tmodel(tx).float().numpy()
    err = float(np.max(np.abs(f_out - t_out)) / max(float(np.max(np.abs(t_out))), 1e-12))
    if not err <= OUTPUT_RTOL:
        groups = _groups(entry, fmodel, tmodel)
        why = ("; the default converter paired these tensors by declaration order alone, and that pairing is "
               "ambiguous: " + " | ".join(groups) + " — declare them in the same order in both twins, or give "
               "the class its own converter (flax_state/load_flax_state, torch_state/load_torch_state)") if groups \
            else "; the twins compute different functions, or the converter maps a tensor wrongly"
        raise Problem(f"the weight converter does not make the twins agree: with torch's weights copied into flax, "
                      f"outputs on one batch differ by {err:.3g} (relative; bound {OUTPUT_RTOL:g}){why}")
    return {"problem": None, "param_count": t_params, "output_shape": list(t_out.shape), "max_rel_diff": err}


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    try:
        result = probe(args["target"], args["dims"])
    except Problem as e:
        result = {"problem": str(e)}
    except models.ModelLoadError as e:
        result = {"problem": str(e)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
