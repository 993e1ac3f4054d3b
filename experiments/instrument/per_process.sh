#!/usr/bin/env bash
# What makes processes of one config differ on this host (issue: the instrument, item 6): the same
# A/A calibration (`--trials 8`, today's protocol) with one process-level setting changed at a time.
#   OUT=/tmp/per_process experiments/instrument/per_process.sh
# Steps, for torch vit tiny and jax mlp tiny: base (as is), hugetlb (glibc's malloc asks for
# transparent huge pages: GLIBC_TUNABLES=glibc.malloc.hugetlb=1; this host's THP is "madvise"),
# threads1 (run.threads=1: one compute thread).
set -uo pipefail
OUT=${OUT:?set OUT to an empty folder}
PY=${PY:-python}
mkdir -p "$OUT"
one() {  # one NAME ENV ARGS...: calibrate with ENV (k=v or -) in its environment
  local name=$1 setting=$2; shift 2
  mkdir -p "$OUT/$name"
  local t0=$(date +%s)
  if [ "$setting" = - ]; then setting="REPRO_UNUSED=1"; fi
  env "$setting" MLFLOW_TRACKING_URI="sqlite:///$OUT/$name/mlflow.db" "$PY" -m repro calibrate --trials 8 "$@" \
    "ledger.dir=$OUT/$name/ledger" progress.mode=plain >"$OUT/$name.log" 2>&1
  echo "# $name: $setting $* (rc $?, $(( $(date +%s) - t0 )) s)" | tee "$OUT/$name.txt"
  grep -E "^(run-to-run|paired|sampling|allocation)" "$OUT/$name.log" | tee -a "$OUT/$name.txt"
}
for cfg in "torch_vit framework=torch model=vit model.preset=tiny" "jax_mlp framework=jax model=mlp model.preset=tiny"; do
  set -- $cfg; tag=$1; shift
  one "${tag}_base" - "$@"
  one "${tag}_hugetlb" GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$@"
  one "${tag}_threads1" - "$@" run.threads=1
done
