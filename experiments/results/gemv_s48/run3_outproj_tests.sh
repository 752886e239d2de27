#!/bin/bash
# Issue 18 (s48), call 3 (prepared, not run): the out_proj lever's own correctness on the 27B, whose tiling it
# changes (the tiny preset keeps its slices, so the tiny GPU tests do not see it; the CPU runner's 27B-wide pass did):
# words of every opcode of the 27B against the interpreter (out_proj is the first GEMV_RESIDUAL), and 256 greedy
# passes of the megakernel equal to the graph's, in tree `or` (call 1), then in tree `oq` (or, and qkv in one slice).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
for t in or oq; do
  (cd build/v/$t && MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") \
    PYTHONPATH=$PWD:/tmp/site timeout 270 python3 -m pytest -q -p no:cacheprovider --durations=3 \
    tests/gpu/test_per_word_27b_gpu.py "tests/gpu/test_megakernel_gpu.py::test_27b_synthetic_256_greedy_passes_equal_graph" \
    > $OUT/${t}_tests.log 2>&1)
  echo "-- $t"; tail -6 $OUT/${t}_tests.log
done
