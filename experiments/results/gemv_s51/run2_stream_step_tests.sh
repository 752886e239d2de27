#!/bin/bash
# Issue 18 (s51), call 2: the tile-wide stream (D80: a GEMV tile's units in 16 equal contiguous warp shares, one ring
# fill a tile) against its base b (HEAD's gemv.cuh, gemv_tile.cuh, kernels.cu, kernels.py: build/base_files.tgz over a
# copy of the working tree): the whole step, both builds, M = 1 and 8, three rounds alternated; then the GPU tests of
# both builds on the working tree (megakernel == graph over the 27B's 256 greedy passes among them).
# carry [".whl", "build/commit", "build/base_files.tgz"]
mkdir -p build/v/b && tar cf - --exclude=./build --exclude=./.whl . | tar xf - -C build/v/b && tar xzf build/base_files.tgz -C build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
C=$(cat build/commit)
GIT_COMMIT=$C PYTHONPATH=$ROOT:/tmp/site timeout 280 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree b=build/v/b@$C --tree stream=.@$C+stream --reps 3 --rows 1,8 2>&1 | tail -6
rm -f $OUT/ct/time_step_*.json
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$C+stream PYTHONPATH=$ROOT:/tmp/site timeout 280 python3 -m pytest -q -x \
  -p no:cacheprovider tests/gpu/test_megakernel_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py \
  tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log
