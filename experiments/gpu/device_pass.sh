#!/usr/bin/env bash
# The GPU pass on a lent NVIDIA machine (H100/H200) that has no network and no Hydra, MLflow or
# DVC. What travels is one pack in .pack/ (README.md here: `repro env pack current --python 3.12
# --platform manylinux_2_28_x86_64 --have experiments/gpu/image-packages.txt --keep ...`): the wheels the
# image lacks or has at another version, their manifest and sha256 sums, and the commit as a git bundle
# (so every record names its commit). Nothing is downloaded here.
#
#   bash experiments/gpu/device_pass.sh OUT tests      # gpu-marked tests + precision read-back sweep
#   bash experiments/gpu/device_pass.sh OUT vit_l4     # +exp=vit_l4 on this GPU's hardware profile (3 repeats, ~6 min)
#   bash experiments/gpu/device_pass.sh OUT price      # +exp=price_of_determinism, jax and torch eager (~6 min)
#   bash experiments/gpu/device_pass.sh OUT price_compile  # the same for torch.compile on ViT-B/16 (~6 min)
#   bash experiments/gpu/device_pass.sh OUT calibrate [TRIALS]  # repro calibrate: this GPU's noise floor
#
# Each part leaves its log, the ledger and the MLflow store (tarred) and the reports in OUT.
set -uo pipefail
OUT=${1:?usage: device_pass.sh OUT PART}; PART=${2:?usage: device_pass.sh OUT PART}
mkdir -p "$OUT"
PACK=${PACK:-.pack}
python3 -m pip list --format=freeze > "$OUT/image-packages.txt"  # the image's list, for the next pack's --have
(cd "$PACK/wheels" && sha256sum -c --quiet ../SHA256SUMS) || { echo "the pack's wheels do not match its manifest"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/wheels/*.whl \
  || { echo "wheels did not install"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
if [ ! -d .git ] && [ -f "$PACK/code.bundle" ]; then
  git init -q && git fetch -q "$PACK/code.bundle" HEAD && git reset -q FETCH_HEAD
  printf '/%s/\n' "$PACK" >> .git/info/exclude
fi
git log --oneline -1 2>&1; git status --short | head
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) HW=h200 ;; *H100*) HW=h100 ;; *) echo "no H100/H200: $GPU"; exit 1 ;; esac
echo "gpu: $GPU -> hardware=$HW"
W=/tmp/gpu_$PART; mkdir -p "$W"
R=(ledger.dir=$W/ledger tracking.uri=sqlite:///$W/mlflow.db progress.mode=plain)
pack() { tar -czf "$OUT/$PART.tar.gz" -C "$W" . 2>/dev/null; ls -la "$OUT"; }
trap pack EXIT

case "$PART" in
tests)
  { nvidia-smi; python3 -c "import torch, jax, flax, optax, hydra, mlflow, transformers; print('torch', torch.__version__, 'jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, 'hydra', hydra.__version__, 'mlflow', mlflow.__version__, 'transformers', transformers.__version__); print(jax.devices())"; } 2>&1 | tee "$OUT/env.log"
  # a smoke run first: a broken install shows here in seconds
  timeout 120 python3 -m repro framework=torch model=mlp model.preset=tiny hardware=$HW run.steps=6 run.warmup=2 \
    "${R[@]}" tracking.experiment=smoke 2>&1 | tee "$OUT/smoke.log" | tail -20 || exit 1
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py tests/test_profile.py -n 0 -q -p no:cacheprovider \
    --timeout 280 -o addopts="-ra --strict-markers --durations=10" 2>&1 | tee "$OUT/gpu_tests.log" | tail -30
  # precision read-back beside TF32: bf16 params and AMP bf16, each framework, ViT-B/16 batch 32
  timeout 240 python3 -m repro -m framework=jax,torch,torch_compile precision=bf16,amp_bf16 model=vit model.preset=b16 \
    hardware=$HW run.steps=30 run.warmup=10 "${R[@]}" tracking.experiment=precision_$HW 2>&1 | tee "$OUT/precision.log" | tail -40
  ;;
vit_l4)
  timeout 580 python3 -m repro +exp=vit_l4 hardware=$HW "${R[@]}" 2>&1 | tee "$OUT/vit_l4.log" | tail -60
  ;;
price)  # ViT-B/16 and ResNet-50, deterministic vs free (torch: with and without its NaN fill), 3 repeats:
  # 10 configs x 3 rounds of 10-25 s jobs (a torch.compile job takes ~36 s: its own call, below)
  timeout 580 python3 -m repro +exp=price_of_determinism hardware=$HW framework=jax,torch "${R[@]}" 2>&1 \
    | tee "$OUT/price.log" | tail -60
  ;;
price_compile)
  timeout 580 python3 -m repro +exp=price_of_determinism hardware=$HW framework=torch_compile model=vit "${R[@]}" \
    2>&1 | tee "$OUT/price_compile.log" | tail -40
  ;;
calibrate)
  timeout 560 python3 -m repro calibrate --trials "${3:-16}" --repeats 2 framework=torch model=vit model.preset=b16 \
    precision=tf32 hardware=$HW run.steps=30 run.warmup=10 "${R[@]}" 2>&1 | tee "$OUT/calibrate.log" | tail -40
  ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
