#!/bin/bash
# Issue 18 (s48), call 4 (prepared, not run): poll_first and head_keeps_rows change the megakernel alone (pf: warp 0
# of a primed GEMV tile leaves its ring to the pass, so that thread 0 polls the tile's counters at once; hk: a block's
# consecutive tiles of one word and k-slice keep their input rows; the discrete build's SASS is b's in both): the
# megakernel's GPU tests in trees `pf` and `hk` (call 1), the 27B's 256 greedy passes equal to the graph's among them;
# then, in the working tree, the MTP word tests whose setup moved into per_word.mtp_history (7b6a68e: run on the CPU
# only when it landed).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in pf hk; do
  (cd build/v/$t && MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") \
    PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider --durations=3 tests/gpu/test_megakernel_gpu.py \
    > $OUT/${t}_tests.log 2>&1)
  echo "-- $t"; tail -6 $OUT/${t}_tests.log
done
cd $ROOT
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 140 python3 -m pytest -q \
  -p no:cacheprovider tests/gpu/test_discrete_gpu.py -k mtp_instruction > $OUT/mtp_tests.log 2>&1
tail -3 $OUT/mtp_tests.log
