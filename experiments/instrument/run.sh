#!/usr/bin/env bash
# The instrument's measurements (issue: the instrument), one after another on a quiet machine:
# each step's output in $OUT/<step>.txt, its ledger in $OUT/<step>/ledger. Run from the repo root:
#   OUT=/tmp/instrument experiments/instrument/run.sh [step ...]
# Steps (default: all, in this order):
#   new_jax_vit old_jax_vit new_torch_vit old_torch_vit new_jax_mlp old_jax_mlp
#   gap_jax_vit gap_fixed5_jax_vit fixed5_pair auto_aa_jax_vit lever_steps lever_loud lever_order lever_random lever_reruns
# "new" is today's protocol (run.steps=auto, quiet window, random order in AB/BA pairs, reruns);
# "old" turns all four levers off (run.steps=20, --loud, --order fixed, verdict.max_reruns=0), as
# before them; a lever_* step turns one lever off (lever_random: random order, unpaired rounds).
set -uo pipefail
OUT=${OUT:?set OUT to an empty folder}
PY=${PY:-python}
mkdir -p "$OUT"
VIT_J="framework=jax model=vit model.preset=tiny"
VIT_T="framework=torch model=vit model.preset=tiny"
MLP_J="framework=jax model=mlp model.preset=tiny"
OLDF="--loud --order fixed"  # flags first: the overrides end the command line
OLDO="run.steps=20 verdict.max_reruns=0"
step() {  # step NAME ARGS...: one repro command, its own ledger and MLflow store, timed
  local name=$1; shift
  mkdir -p "$OUT/$name"
  local t0=$(date +%s.%N)
  MLFLOW_TRACKING_URI="sqlite:///$OUT/$name/mlflow.db" "$PY" -m repro "$@" "ledger.dir=$OUT/$name/ledger" \
    progress.mode=plain >"$OUT/$name.log" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  { echo "# $PY -m repro $* ledger.dir=$OUT/$name/ledger  (rc $rc, wall $(echo "$t1 - $t0" | bc) s, $(date -u +%FT%TZ))"
    grep -E "^(run-to-run|paired|sampling|run medians|order|label|false|smallest|allocation|gap|stored|repro)" "$OUT/$name.log"
  } >"$OUT/$name.txt"
  cat "$OUT/$name.txt"
}
ALL="new_jax_vit old_jax_vit new_torch_vit old_torch_vit new_jax_mlp old_jax_mlp gap_jax_vit gap_fixed5_jax_vit fixed5_pair
auto_aa_jax_vit lever_steps lever_loud lever_order lever_random lever_reruns"
for s in ${@:-$ALL}; do
  case $s in
    new_jax_vit) step $s calibrate --trials 16 $VIT_J ;;
    old_jax_vit) step $s calibrate --trials 16 $OLDF $VIT_J $OLDO ;;
    new_torch_vit) step $s calibrate --trials 16 $VIT_T ;;
    old_torch_vit) step $s calibrate --trials 16 $OLDF $VIT_T $OLDO ;;
    new_jax_mlp) step $s calibrate --trials 16 $MLP_J ;;
    old_jax_mlp) step $s calibrate --trials 16 $OLDF $MLP_J $OLDO ;;
    gap_jax_vit) step $s calibrate --gap 0.05 --trials 20 $VIT_J ;;
    gap_fixed5_jax_vit) step $s calibrate --gap 0.05 --trials 20 --repeats 5 $VIT_J ;;  # fixed run.repeats=5's power
    fixed5_pair) step $s -m "framework=jax,torch" model=vit model.preset=tiny run.repeats=5 ;;
    auto_aa_jax_vit) step $s calibrate --auto --trials 40 $VIT_J verdict.max_repeats=5 ;;
    lever_steps) step $s calibrate --trials 12 $VIT_J run.steps=20 ;;
    lever_loud) step $s calibrate --trials 12 --loud $VIT_J ;;
    lever_order) step $s calibrate --trials 12 --order fixed $VIT_J ;;
    lever_random) step $s calibrate --trials 12 --order random $VIT_J ;;
    lever_reruns) step $s calibrate --trials 12 $VIT_J verdict.max_reruns=0 ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
