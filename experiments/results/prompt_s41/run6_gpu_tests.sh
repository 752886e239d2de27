#!/bin/bash
# Issue 21, D70: the prompt programs' kernels on the H200 for the first time; the decode words after D69's launcher
# change.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee $OUT/gpu.txt
MEGAKERNEL_REQUIRE_GPU=1 timeout 360 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -80 | tee $OUT/prompt_gpu_tests.log
MEGAKERNEL_REQUIRE_GPU=1 timeout 180 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py 2>&1 \
  | tail -30 | tee $OUT/discrete_gpu_tests.log
