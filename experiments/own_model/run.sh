#!/usr/bin/env bash
# Issue 33's must-show, from a folder outside the repo: examples/own_model installed (editable, in its
# own git repository) into a fresh venv that sees repro's venv; jax, torch and torch.compile from one
# start, 3 interleaved repeats, 50 steps; then the example's source changed and committed, and one
# run replayed --as-recorded. Usage: bash experiments/own_model/run.sh OUT   (OUT: an empty folder)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
PY=$REPO/.venv/bin/python
cp -r "$REPO/examples/own_model" "$OUT/pkg"
git -C "$OUT/pkg" init -q && git -C "$OUT/pkg" add -A && git -C "$OUT/pkg" -c user.name=u -c user.email=u@u commit -qm example
"$($PY -c 'import sys; print(sys._base_executable)')" -m venv --without-pip "$OUT/venv"
SITE=$("$OUT/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')')" > "$SITE/_parent.pth"
mkdir -p "$OUT/sweep_dir" && cd "$OUT/sweep_dir"
export MLFLOW_TRACKING_URI="sqlite:///$OUT/sweep_dir/mlflow.db"
"$OUT/venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$OUT/pkg"
R=("$OUT/venv/bin/python" -m repro)
"${R[@]}" --config-dir "$OUT/pkg/conf" -m framework=jax,torch,torch_compile model=resconv run.init=shared \
  run.repeats=3 run.steps=50 run.warmup=5 run.batch_size=8 ledger.dir="$OUT/sweep_dir/ledger" 2>&1 | tee "$OUT/sweep.log"
"${R[@]}" sync --ledger "$OUT/sweep_dir/ledger" > "$OUT/sync.log" 2>&1   # MLflow complete before it is read
SWEEP=$(grep -o 'compare --sweep [^ ]*' "$OUT/sweep.log" | head -1 | cut -d' ' -f3)
"${R[@]}" compare --sweep "$SWEEP" --wide --ledger "$OUT/sweep_dir/ledger" > "$OUT/compare_wide.txt"
"${R[@]}" report --sweep "$SWEEP" --ledger "$OUT/sweep_dir/ledger" --out "$OUT/report" > /dev/null
sed -i 's/x\.mean(axis=(1, 2))/x.max(axis=(1, 2))/; s/x\.mean(dim=(2, 3))/x.amax(dim=(2, 3))/' "$OUT/pkg/own_model.py"
git -C "$OUT/pkg" -c user.name=u -c user.email=u@u commit -qam "max pooling"
ID=$("$PY" -c "
import json, pathlib, sys
runs = [json.loads(p.read_text()) for p in pathlib.Path('$OUT/sweep_dir/ledger').glob('*/*.json')]
print(next(r['id'] for r in runs if r.get('kind') == 'run' and r['config']['framework']['name'] == 'jax' and r.get('status') == 'ok'))")
"${R[@]}" replay "$ID" --ledger "$OUT/sweep_dir/ledger" > "$OUT/replay_plain.log" 2>&1 || true
"${R[@]}" replay "$ID" --as-recorded --ledger "$OUT/sweep_dir/ledger" > "$OUT/replay_as_recorded.log" 2>&1
