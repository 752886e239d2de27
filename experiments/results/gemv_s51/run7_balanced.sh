#!/bin/bash
# Issue 18 (s51), call 7: bal (every warp streams in every pass: a pass of s strips deals the 16 warps round the
# strips, 16 // s + (strip < 16 % s) a strip, where 16 // s a strip left 4 warps idle in a 96-row pass; new GPU bits
# for passes of 3, 5, 6 or 7 strips) against base b (HEAD's gemv.cuh over a copy of the working tree): the whole
# step in both builds, M = 1 and 8, three rounds; then the GEMV and megakernel GPU tests on bal (the working tree).
# carry [".whl", "build/commit", "build/base_files.tgz"]
mkdir -p build/v/b && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/b && tar xzf build/base_files.tgz -C build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
C=$(cat build/commit)
ROOT=$PWD
GIT_COMMIT=$C PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree b=build/v/b@$C --tree bal=.@$C+bal --reps 3 --rows 1,8 2>&1 | tail -4
rm -f $OUT/ct/time_step_*.json
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$C+bal PYTHONPATH=$ROOT:/tmp/site timeout 110 python3 -m pytest -q \
  -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log
