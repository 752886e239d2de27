#!/bin/bash
# Issue 18 (s51), call 5: the tile-wide stream with a lean loop (running addresses, its scales by ld.shared.u16)
# against base b in bench_gemv, alternated, twice each; then Nsight Compute on one in_proj-sized kernel at M = 8 in
# both trees (ncu_gemv.py): duration, throughput, issue and where the warps stall.
# carry [".whl", "build/commit", "build/base_files.tgz"]
mkdir -p build/v/b && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/b && tar xzf build/base_files.tgz -C build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
C=$(cat build/commit)
ROOT=$PWD
for r in 1 2; do
  (cd build/v/b && GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/b_$r --no-sweep --iters 40 > /dev/null 2>&1)
  GIT_COMMIT=$C PYTHONPATH=$ROOT:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/lean_$r --no-sweep --iters 40 > /dev/null 2>&1
done
python3 - <<'PY'
import json, os
for r in (1, 2):
    for t in ("b", "lean"):
        d = json.load(open(os.path.join(os.environ["OUT"], f"{t}_{r}", "gemv_bench.json")))
        print(f"{t:5}{r}", " ".join(f"{k['name']}{k['rows']}:{k['us']:.1f}" for k in d["kernels"]))
PY
for t in b lean; do
  dir=build/v/b; [ $t = lean ] && dir=.
  (cd $dir && PYTHONPATH=$PWD:/tmp/site timeout 100 ncu -k gemv_fp8_slices --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    python3 $ROOT/experiments/results/gemv_s51/ncu_gemv.py 8 > $OUT/ncu_$t.txt 2>&1)
  echo "== $t"; grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit" $OUT/ncu_$t.txt | head -24
done
