#!/bin/bash
# Issue 23: the 27B three-way, the goldens' seed (0) on both scale rules, two processes side by side.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
export OPENBLAS_NUM_THREADS=4 OMP_NUM_THREADS=4 MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 MALLOC_TOP_PAD_=1000000000
nproc; free -g | head -2; python3 -c "import numpy, ml_dtypes, cupy; print(numpy.__version__, ml_dtypes.__version__, cupy.__version__)"
timeout ${LIMIT:-560} python3 experiments/exact_distance.py --goldens tests/fixtures/oracle_27b.npz,tests/fixtures/oracle_27b_pow2.npz \
  --seeds "${SEEDS:-}" ${SKIP:-} --layer-at-a-time --rows-at-once --weights-on-gpu --jobs 2 --workers 4 --out $OUT/${NAME:-seed0} 2>&1 | tee $OUT/${NAME:-seed0}.log
echo rc=${PIPESTATUS[0]}
