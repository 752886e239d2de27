#!/bin/bash
# The new GPU test (three-way with GPU-made weights) and the tests that read weights through per_word.HostWeightsFromGpu.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1
timeout 540 python3 -m pytest -q -x tests/gpu/test_synthetic_gpu.py tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee $OUT/gpu_tests.log
