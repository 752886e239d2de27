#!/bin/bash
# Issue 18 (s51), call 4: is it the order in which a warp reads its units? bench_gemv of base b and of `contig` (b
# whose two-phase strips give each phase a contiguous half of the k-blocks instead of every other one: the read
# order of the tile-wide stream, nothing else changed), alternated, twice each.
# carry [".whl", "build/commit", "build/base_files.tgz", "build/contig_files.tgz"]
for t in b contig; do
  mkdir -p build/v/$t && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/$t
done
tar xzf build/base_files.tgz -C build/v/b && tar xzf build/contig_files.tgz -C build/v/contig
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
C=$(cat build/commit)
for r in 1 2; do
  for t in b contig; do
    (cd build/v/$t && GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
      --out $OUT/${t}_$r --no-sweep --iters 40 > /dev/null 2>&1)
  done
done
python3 - <<'PY'
import json, os
for r in (1, 2):
    for t in ("b", "contig"):
        d = json.load(open(os.path.join(os.environ["OUT"], f"{t}_{r}", "gemv_bench.json")))
        print(f"{t:7}{r}", " ".join(f"{k['name']}{k['rows']}:{k['us']:.1f}" for k in d["kernels"]))
PY
