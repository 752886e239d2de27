#!/bin/bash
# Issue 18 (s48), call 4 (prepared, not run): poll_first changes the megakernel alone (warp 0 of a primed GEMV tile
# leaves its ring to the pass, so that thread 0 polls the tile's counters at once; the discrete build's SASS is
# b's): the megakernel's GPU tests in tree `pf` (call 1), the 27B's 256 greedy passes equal to the graph's among them;
# then, in the working tree, the MTP word tests whose setup moved into per_word.mtp_history (7b6a68e: run on the CPU
# only when it landed).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
cd build/v/pf
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") \
  PYTHONPATH=$PWD:/tmp/site timeout 360 python3 -m pytest -q -p no:cacheprovider --durations=3 tests/gpu/test_megakernel_gpu.py \
  > $OUT/pf_tests.log 2>&1
tail -6 $OUT/pf_tests.log
cd $ROOT
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m pytest -q \
  -p no:cacheprovider tests/gpu/test_discrete_gpu.py -k mtp_instruction > $OUT/mtp_tests.log 2>&1
tail -3 $OUT/mtp_tests.log
