#!/bin/bash
# Issue 18 (s51), call 6: bigfirst (a GEMV tile runs its largest pass first, the one it primes; D80) against base b
# (HEAD's gemv_tile.cuh and kernels.cu over a copy of the working tree): arena digests (the same bits expected: each
# pass's sums are its own), the whole step in both builds (3 rounds, M = 1 and 8), bench_gemv's gate_up twice each,
# then bigfirst's graph trace with the report (gate_up's blocks by index and by SM).
# carry [".whl", "build/commit", "build/base_files.tgz"]
mkdir -p build/v/b && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/b && tar xzf build/base_files.tgz -C build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
C=$(cat build/commit)
ROOT=$PWD
mkdir -p $OUT/ad
(cd build/v/b && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
  --rows 1,8 --speculative --context 1024 --tag b 2>&1 | tail -1)
PYTHONPATH=$ROOT:$ROOT/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
  --rows 1,8 --speculative --context 1024 --tag bigfirst 2>&1 | tail -1
python3 - <<'PY'
import json, os
d = {t: json.load(open(os.path.join(os.environ["OUT"], "ad", f"arena_digest_{t}.json")))["passes"] for t in ("b", "bigfirst")}
print("bigfirst digests equal to b:", d["bigfirst"] == d["b"], [(x["rows"], x["digests"] == y["digests"]) for x, y in zip(d["b"], d["bigfirst"])])
PY
GIT_COMMIT=$C PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree b=build/v/b@$C --tree bigfirst=.@$C+bigfirst --reps 3 --rows 1,8 2>&1 | tail -4
rm -f $OUT/ct/time_step_*.json
for r in 1 2; do
  (cd build/v/b && GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 40 python3 experiments/bench_gemv.py \
    --out /tmp/bench/b_$r --no-sweep --iters 40 --shapes gate_up 2>&1 | grep -E "^gate_up")
  GIT_COMMIT=$C+bigfirst PYTHONPATH=$ROOT:/tmp/site timeout 40 python3 experiments/bench_gemv.py \
    --out /tmp/bench/bigfirst_$r --no-sweep --iters 40 --shapes gate_up 2>&1 | grep -E "^gate_up"
done
GIT_COMMIT=$C+bigfirst PYTHONPATH=$ROOT:$ROOT/experiments:/tmp/site timeout 150 python3 experiments/graph_trace.py \
  --out $OUT/gt --rows 1,8 --megakernel 2>&1 | grep -E "^M =|megakernel traced"
GBPS=$(PYTHONPATH=$ROOT:/tmp/site python3 -c "from discrete.kernels import read_bandwidth_gbps; print(read_bandwidth_gbps())")
PYTHONPATH=$ROOT:$ROOT/experiments:/tmp/site python3 experiments/graph_trace_report.py $OUT/gt/graph_trace.json --rows 1 \
  --gbps $GBPS --out $OUT/gt/graph_trace_kinds_m1.json | grep -E "kind|gate_up|down|in_proj|out_proj"
rm -f $OUT/gt/graph_records_m8.npz $OUT/gt/megakernel_records_m8.npz
