#!/usr/bin/env bash
# `repro calibrate` before and after a change to what happens around a run's measured window,
# alternating halves (base, head, base, head) on one quiet machine: each half 8 A/A trials of
# jax vit tiny (2 rounds each), its output in $OUT/<side>-<half>.txt, its ledger in $OUT/ledger-<side>-<half>.
#   BASE=/path/to/old/checkout HEAD=/path/to/new/checkout OUT=/tmp/ahead experiments/instrument/ahead_ab.sh
# Each side runs its own checkout's code (PYTHONPATH=<tree>/src) with the venv the tree has.
set -uo pipefail
BASE=${BASE:?the checkout before the change} HEAD=${HEAD:?the checkout after it} OUT=${OUT:?an empty folder}
TRIALS=${TRIALS:-8}
mkdir -p "$OUT"
for half in 1 2; do
  for side in base head; do
    tree=$BASE; [ "$side" = head ] && tree=$HEAD
    echo "== $side half $half $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/log"
    (cd "$tree" && env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$tree/src" MLFLOW_TRACKING_URI="sqlite:///$OUT/mlflow-$side.db" \
      timeout 900 .venv/bin/python -m repro calibrate --trials "$TRIALS" framework=jax model=vit model.preset=tiny \
      "ledger.dir=$OUT/ledger-$side-$half" progress.mode=none >"$OUT/$side-$half.txt" 2>&1)
    echo "rc $? $(date -u +%T)" | tee -a "$OUT/log"
    sleep 5
  done
done
