#!/usr/bin/env bash
# Create the PyTorch/XLA worker environment: scripts/make_xla_env.sh [DIR]  (default: .venv-xla
# at the repo root; `make xla-env` runs it).
#
# torch-xla 2.9.0 (the newest on PyPI) imports only beside torch==2.9.0, while the main venv
# has torch 2.13, so framework=torch_xla runs its worker in this separate interpreter
# (conf/framework/torch_xla.yaml: framework.python). The worker imports the repro source of
# this checkout through PYTHONPATH, so besides torch and torch-xla the env needs only what
# repro's modules import: repro's core dependencies, read from pyproject.toml's
# [project].dependencies (numpy, omegaconf + PyYAML, rich, psutil, hydra-core: all small) and
# its `hf` extra (transformers, for model.impl=hf: the published ViT study ran it on torch_xla).
# repro itself is not installed here. Nothing here touches the main .venv.
#
# torch 2.9.0 from PyPI is the CUDA build: ~4 GB to download, ~6.5 GB on disk. triton
# (0.6 GB) is uninstalled: nothing on the CPU uses it.
#
# Idempotent: when DIR/bin/python already imports torch_xla and the worker's modules
# (repro.worker.worker, repro.backends.torch_xla_backend), it does nothing. When repro's
# imports have grown, a rerun installs only what is missing.
# Variables: PYTHON (the interpreter that makes the venv, default python3); UV_PYTHON (an interpreter with
# uv, which then installs with pip's settings; unset: the new env's own pip).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/.venv-xla}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION=2.9.0
TORCH_XLA_VERSION=2.9.0

CHECK="import torch, torch_xla
assert torch.__version__.split('+')[0] == '$TORCH_VERSION', torch.__version__
assert torch_xla.__version__.split('+')[0] == '$TORCH_XLA_VERSION', torch_xla.__version__
import repro.worker.worker, repro.backends.torch_xla_backend, transformers"
check() {  # the worker's own imports, as the launcher runs it (PYTHONPATH=<repo>/src)
    PJRT_DEVICE=CPU PYTHONPATH="$ROOT/src" "$DIR/bin/python" -c "$CHECK" "$@"
}

if [ -x "$DIR/bin/python" ] && check >/dev/null 2>&1; then
    echo "make_xla_env: $DIR already has torch $TORCH_VERSION + torch_xla $TORCH_XLA_VERSION and the worker's imports; nothing to do"
    exit 0
fi

mapfile -t CORE < <("$PYTHON" -c '
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]  # core deps, and transformers for model.impl=hf
    print("\n".join(project["dependencies"] + project["optional-dependencies"]["hf"]))' "$ROOT/pyproject.toml")

start=$SECONDS
echo "make_xla_env: creating or updating $DIR (torch==$TORCH_VERSION torch-xla==$TORCH_XLA_VERSION, ~4 GB download; ${CORE[*]})"
"$PYTHON" -m venv "$DIR"
WANT=("torch==$TORCH_VERSION" "torch-xla==$TORCH_XLA_VERSION" "${CORE[@]}")
if [ -n "${UV_PYTHON:-}" ]; then
    # uv, from the interpreter that has it, with pip's settings (src/repro/envs/pipconf.py): from uv's cache
    # by hard links, 16-23 s where pip took 102 s (the Makefile's figures). No --compile-bytecode (it made
    # this 37 s): the check below imports what a worker imports, which writes their bytecode.
    PYTHONPATH="$ROOT/src" "$UV_PYTHON" -m repro.envs.pipconf -q --python "$DIR/bin/python" "${WANT[@]}"
else
    # (Lines about pip's configured local indexes that lack a package are dropped: noise.)
    "$DIR/bin/python" -m pip install -q --disable-pip-version-check "${WANT[@]}" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
# triton: GPU kernels only. Uninstall it (files and metadata, so the run's package list does
# not claim it); fall back to deleting the folder.
"$DIR/bin/python" -m pip uninstall -q -y triton 2>/dev/null || true
rm -rf "$DIR"/lib/python3*/site-packages/triton

if ! check; then
    echo "make_xla_env: $DIR cannot import torch_xla or the worker's modules (see above)" >&2
    exit 1
fi
echo "make_xla_env: $DIR ready in $((SECONDS - start)) s ($(du -sh "$DIR" | cut -f1))"
