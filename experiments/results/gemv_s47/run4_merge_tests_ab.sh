#!/bin/bash
# Issue 19 / 18 (s47), call 4: ATTN_MERGE split only where a tile's threads need it (c7d1071, tree mg2; the
# working tree): the GPU suite but the prompt tests (untouched), then the 27B step at 1k against 213d537
# (compare_trees, M = 1 and 8, three rounds).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 270 python3 -m pytest -q \
  -p no:cacheprovider tests/gpu --ignore=tests/gpu/test_prompt_gpu.py --durations=3 > $OUT/gpu_tests.log 2>&1
tail -6 $OUT/gpu_tests.log
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree base=build/v/base --tree mg2=build/v/mg2 --reps 3 --rows 1,8 2>&1 | tail -6
