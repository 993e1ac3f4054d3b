#!/usr/bin/env bash
# The GPU pass on a lent NVIDIA machine (H100/H200: no network, no Hydra, MLflow or DVC), in two calls that
# follow each other on one warm machine (README.md here gives them as typed, with the carry):
#
#   bash experiments/gpu/device_pass.sh 1   # call 1 (<= 9 min): install; +exp=vit_l4 (3 rounds); gpu-marked tests
#   bash experiments/gpu/device_pass.sh 2   # call 2 (<= 5 min): install; price of determinism (ViT-B/16, jax and
#                                           # torch eager, both fill modes); the fill decision; GPU A/A (torch, jax)
#
# What travels is one pack in .pack/ (`repro env pack current --runtime-only --max-size 60MiB ...`, README.md):
# the wheels the image lacks, their manifest and sums, and the commit as a git bundle (every record names it).
# Nothing is downloaded here. Each part holds a wall budget inside its call's limit (a sweep's
# `verdict.budget_s` with run.repeats=auto: no round starts that would pass it; `timeout` behind it), most
# informative first, so a cut call still leaves what finished. Whatever finished is in OUT ($OUT, or the
# second argument): callN.log (all the call printed), summaryN.txt (one screen), image-packages.txt (the
# image's own list, for the next pack's --have) and callN.tar.gz (ledger, MLflow store, reports).
#
# Rehearsal without a GPU (tests/test_device_pass.py runs this file, both calls, on CPU): DEVICE_PASS_HW names
# the hardware profile in place of nvidia-smi's GPU, and these knobs shrink the work, never the lines run:
#   DEVICE_PASS_PRESET (b16)  DEVICE_PASS_PRECISION (tf32)  DEVICE_PASS_ROUNDS (3)  DEVICE_PASS_TRIALS (4)
#   DEVICE_PASS_AA_REPEATS (2)  DEVICE_PASS_AA_S (each A/A's budget: half of what is left, then the rest)
#   DEVICE_PASS_LIMIT_S (540 / 300)  DEVICE_PASS_BUDGET_X (100: every part's budget, in %)
#   DEVICE_PASS_EXTRA (overrides for every run, e.g. run.steps=10)  DEVICE_PASS_VIT_L4 (vit_l4's own)
#   DEVICE_PASS_SITE (/tmp/site)  DEVICE_PASS_WORK (/tmp/gpu_pass)  PACK (.pack)
set -uo pipefail
CALL=${1:?usage: device_pass.sh 1|2 [OUT]}
OUT=${2:-${OUT:?usage: device_pass.sh 1|2 OUT (or OUT in the environment)}}
case "$CALL" in 1) LIMIT=${DEVICE_PASS_LIMIT_S:-540} ;; 2) LIMIT=${DEVICE_PASS_LIMIT_S:-300} ;;
  *) echo "device_pass.sh: call $CALL is not 1 or 2"; exit 2 ;; esac
START=$SECONDS RESERVE=25 MIN_PART=20  # RESERVE: the summary and the tarball at the end
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
PACK=${PACK:-.pack} SITE=${DEVICE_PASS_SITE:-/tmp/site} W=${DEVICE_PASS_WORK:-/tmp/gpu_pass}
PRESET=${DEVICE_PASS_PRESET:-b16} PRECISION=${DEVICE_PASS_PRECISION:-tf32} ROUNDS=${DEVICE_PASS_ROUNDS:-3}
TRIALS=${DEVICE_PASS_TRIALS:-4} AA_REPEATS=${DEVICE_PASS_AA_REPEATS:-2} FAILED=0 REPORTS=()
read -ra EXTRA <<< "${DEVICE_PASS_EXTRA:-}"; read -ra VIT_L4 <<< "${DEVICE_PASS_VIT_L4:-}"
LOG=$OUT/call$CALL.log SUMMARY=$OUT/summary$CALL.txt
exec > >(tee -a "$LOG") 2>&1
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( LIMIT - (SECONDS - START) - RESERVE )); }
scale() { echo $(( $1 * ${DEVICE_PASS_BUDGET_X:-100} / 100 )); }
clip() {  # the first $1 characters of each line; cut -c counts bytes, and a cut through a multibyte one is not UTF-8
  python3 -c 'import sys; n = int(sys.argv[1]); sys.stdout.buffer.writelines(
    line.decode("utf-8", "replace").rstrip("\n")[:n].encode() + b"\n" for line in sys.stdin.buffer)' "$1"
}

finish() {  # always: the summary's results, and what the call made, into OUT; rc 1 where a part failed
  local rc=$?; (( rc == 124 || rc == 137 )) && rc=0  # the last part cut at its budget: counted below, not here
  (( rc == 0 && FAILED > 0 )) && rc=1
  say "call $CALL: ended rc $rc after $((SECONDS - START)) s of its $LIMIT s ($FAILED part(s) failed; a part cut at its budget is not a failure)"
  {  # the logs' one-line results, then the reports' sentences (the close wraps its lines; report.md does not)
    grep -hE "fill decision|A/A|run-to-run|run\.repeats=auto:|[0-9]+ (passed|failed|skipped)|interrupted after" \
      "$W"/c"$CALL"-*.log
    grep -hE "^- .*(faster than|equivalent within|cannot tell yet|no price to measure|deterministic mode costs)" \
      "${REPORTS[@]}"
  } 2>/dev/null | clip 300 | head -30 >> "$SUMMARY"
  # MLflow is written in the background after each command: the tarball's mlflow.db waits for it (bounded;
  # the ledger in the tarball is the truth, and `repro sync` there rebuilds whatever is missing)
  [ -d "$W/ledger" ] && { timeout 20 python3 -m repro sync --ledger "$W/ledger" > "$W/c$CALL-sync.log" 2>&1 \
    || say "sync: rc $? (the tarball's mlflow.db may lack runs: \`repro sync --ledger ledger\` rebuilds them)"; }
  mkdir -p "$W"; tar -czf "$OUT/call$CALL.tar.gz" -C "$W" . 2>/dev/null
  ls -la "$OUT"
  exit "$rc"
}
trap finish EXIT

part() {  # NAME BUDGET_S CMD...: CMD under the smaller of its budget and what the call has left
  local name=$1 want; want=$(scale "$2"); shift 2
  local have; have=$(left)
  local budget=$(( want < have ? want : have ))
  if (( budget < MIN_PART )); then say "$name: skipped: ${have} s left of the call"; return 0; fi
  echo "== $name (budget $budget s, $((SECONDS - START)) s into call $CALL)"
  local t0=$SECONDS rc
  timeout -k 40 "$budget" "$@" 2>&1 | tee "$W/c$CALL-$name.log"; rc=${PIPESTATUS[0]}
  say "$name: rc $rc in $((SECONDS - t0)) s (budget $budget s)$( ((rc == 124 || rc == 137)) && echo ': cut at its budget')"
  (( rc == 0 || rc == 124 || rc == 137 )) || FAILED=$((FAILED + 1))
  return "$rc"
}
budget_s() { local b; b=$(scale "$1"); b=$(( b < $(left) ? b : $(left) )); echo $(( b > 40 ? b - 30 : b )); }  # verdict.budget_s: room for the close

# ---- both calls: the image's list, the pack checked and installed, the code's commit, the hardware -----------
mkdir -p "$W"
python3 -m pip list --format=freeze > "$OUT/image-packages.txt"  # the image's own list: the next pack's --have
(cd "$PACK/wheels" && sha256sum -c --quiet ../SHA256SUMS) || { say "the pack's files do not match its SHA256SUMS"; exit 1; }
rm -rf "$SITE"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$PACK"/wheels/*.whl \
  || { say "the pack's wheels did not install"; exit 1; }
say "installed $(ls "$PACK"/wheels/*.whl | wc -l) wheels ($(du -sm "$PACK" | cut -f1) MB pack) into $SITE in $((SECONDS - START)) s"
export PYTHONPATH=$SITE:$PWD/src PYTHONUNBUFFERED=1 COLUMNS=200  # one sentence a line in the logs
if [ ! -d .git ] && [ -f "$PACK/code.bundle" ]; then  # the tree travelled without its history: the bundle has it
  git init -q && git fetch -q "$PACK/code.bundle" HEAD && git reset -q FETCH_HEAD
  printf '/%s/\n' "$PACK" >> .git/info/exclude
fi
say "code: $(git log --oneline -1 2>&1 | clip 100); $(git status --short | wc -l) paths differ from it"
if [ -n "${DEVICE_PASS_HW:-}" ]; then
  HW=$DEVICE_PASS_HW GPU="none (a rehearsal: hardware=$HW)"
else
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case "$GPU" in *H200*) HW=h200 ;; *H100*) HW=h100 ;; *) say "no H100/H200: '$GPU'"; exit 1 ;; esac
  nvidia-smi > "$W/nvidia-smi.txt" 2>&1
fi
say "gpu: $GPU -> hardware=$HW"
python3 -c "import torch, jax, flax, optax, hydra, mlflow, transformers; print('torch', torch.__version__, 'jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, 'hydra', hydra.__version__, 'mlflow', mlflow.__version__, 'transformers', transformers.__version__, jax.devices())" 2>&1 \
  | tail -1 | tee -a "$SUMMARY" | grep -q "^torch " || { say "the stack does not import"; exit 1; }
R=(ledger.dir=$W/ledger tracking.uri=sqlite:///$W/mlflow.db progress.mode=plain)
AUTO=(run.repeats=auto verdict.max_repeats=$ROUNDS)
report() {  # the experiment's report.md (its newest sweep), rebuilt from the ledger alone
  REPORTS+=("$W/reports/$1/report.md")
  python3 -m repro report --ledger "$W/ledger" --experiment "$1" --out "$W/reports/$1" > "$W/c$CALL-report_$1.txt" 2>&1 \
    || { say "report $1: failed (see c$CALL-report_$1.txt in the tarball)"; FAILED=$((FAILED + 1)); }
}

if [ "$CALL" = 1 ]; then
  # vit_l4 first (the headline: 6 configs, a round ~2 min on an H200), then the gpu-marked tests in what is left
  part vit_l4 390 python3 -m repro +exp=vit_l4 hardware="$HW" model.preset="$PRESET" precision="$PRECISION" "${AUTO[@]}" \
    verdict.budget_s="$(budget_s 390)" "${VIT_L4[@]}" "${EXTRA[@]}" "${R[@]}"
  report vit_l4
  PYTEST=(-m gpu tests/test_gpu.py tests/test_profile.py -q -p no:cacheprovider -o "addopts=-ra --strict-markers")
  python3 -c "import xdist, pytest_timeout" 2>/dev/null && PYTEST+=(-n 0 --timeout 240)
  part gpu_tests 240 python3 -m pytest "${PYTEST[@]}"
else
  # the price of determinism on ViT-B/16: jax (deterministic, free) and torch eager (deterministic with and
  # without the NaN fill, free): 5 configs, run.repeats=auto up to ROUNDS rounds inside its budget
  part price 170 python3 -m repro +exp=price_of_determinism hardware="$HW" model=vit model.preset="$PRESET" precision="$PRECISION" \
    framework=jax,torch "${AUTO[@]}" verdict.budget_s="$(budget_s 170)" "${EXTRA[@]}" "${R[@]}"
  report price_of_determinism
  # the fill decision: torch deterministic without the NaN fill, bit-identical across processes or not
  python3 - "$W/ledger" <<'EOF' 2>&1 | tee "$W/c$CALL-fill.log"
import sys
from repro.ledger import Ledger
from repro.report import identity
runs = [r for r in Ledger(sys.argv[1]).heads(kind="run") if r.get("status") == "ok"
        and (r["config"].get("tracking") or {}).get("experiment") == "price_of_determinism"
        and r["config"]["framework"]["name"] == "torch" and r["config"]["run"].get("deterministic")]
for fill, words in ((False, "fill_uninitialized_memory=false"), (None, "the NaN fill (torch's default)")):
    these = [r for r in runs if r["config"]["run"].get("fill_uninitialized_memory") is fill]
    found = identity.of(these)
    print(f"fill decision: torch deterministic with {words}: "
          + (found.text or f"{len(these)} process(es): nothing to compare"))
EOF
  # a GPU A/A in free mode, each framework: the noise floor a verdict on this GPU is read against
  part aa_torch "${DEVICE_PASS_AA_S:-$(( $(left) / 2 ))}" python3 -m repro calibrate --trials "$TRIALS" --repeats "$AA_REPEATS" framework=torch model=vit \
    model.preset="$PRESET" precision="$PRECISION" hardware="$HW" run.deterministic=false "${EXTRA[@]}" "${R[@]}"
  part aa_jax "${DEVICE_PASS_AA_S:-$(left)}" python3 -m repro calibrate --trials "$TRIALS" --repeats "$AA_REPEATS" framework=jax model=vit \
    model.preset="$PRESET" precision="$PRECISION" hardware="$HW" run.deterministic=false "${EXTRA[@]}" "${R[@]}"
fi
