#!/bin/bash
# Issue 18 (s51), call 3: bench_gemv (every shape, M = 1 and 8, each GEMV kernel alone) of base b and of the
# tile-wide stream, alternated, twice each: which shapes the stream made slower in the step (call 2).
# carry [".whl", "build/commit", "build/base_files.tgz"]
mkdir -p build/v/b && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/b && tar xzf build/base_files.tgz -C build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
C=$(cat build/commit)
for r in 1 2; do
  (cd build/v/b && GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/b_$r --no-sweep --iters 40 2>&1 | grep -E "M=|read bandwidth"); echo "-- b $r"
  GIT_COMMIT=$C+stream PYTHONPATH=$ROOT:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/stream_$r --no-sweep --iters 40 2>&1 | grep -E "M=|read bandwidth"; echo "-- stream $r"
done
