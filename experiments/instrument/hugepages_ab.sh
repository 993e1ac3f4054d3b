#!/usr/bin/env bash
# Item 6 of the instrument issue, decided: does glibc's malloc on transparent huge pages
# (GLIBC_TUNABLES=glibc.malloc.hugetlb=1; this host's THP is "madvise") lower the per-process
# noise a verdict's unit carries? The same A/A calibration as is and with it, alternating halves
# (as is, huge pages, as is, huge pages) on one quiet machine, $TRIALS trials each (default 8):
# each half's calibrate summary in $OUT/<setting>-<half>.txt, its ledger in $OUT/ledger-<setting>-<half>.
#   OUT=/tmp/hugepages experiments/instrument/hugepages_ab.sh [framework=torch model=vit model.preset=tiny]
set -uo pipefail
OUT=${OUT:?an empty folder}
TRIALS=${TRIALS:-8}
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(framework=torch model=vit model.preset=tiny)
mkdir -p "$OUT"
for half in 1 2; do
  for setting in asis hugetlb; do
    tunables=REPRO_UNUSED=1; [ "$setting" = hugetlb ] && tunables=GLIBC_TUNABLES=glibc.malloc.hugetlb=1
    echo "== $setting half $half $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/log"
    env "$tunables" MLFLOW_TRACKING_URI="sqlite:///$OUT/mlflow-$setting.db" timeout 900 .venv/bin/python -m repro \
      calibrate --trials "$TRIALS" "${ARGS[@]}" "ledger.dir=$OUT/ledger-$setting-$half" progress.mode=none \
      >"$OUT/$setting-$half.txt" 2>&1
    echo "rc $? $(date -u +%T)" | tee -a "$OUT/log"
    sleep 5
  done
done
