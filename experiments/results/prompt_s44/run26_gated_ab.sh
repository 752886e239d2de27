#!/bin/bash
# Issue 21 (s44, for the next session): GATED_PREPARE streamed in registers (D73, CPU-verified only). The prompt
# GPU tests at the head, then time to first token at 1,024 tokens with the chunk profile, head against
# build/v/base (4803a35: the staged GATED_PREPARE; `python experiments/make_tree.py build/v/base --commit 4803a35`)
# and head again, one machine.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/run26_gpu_prompt_tests.log
bench() { timeout 100 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -3 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/run26_head.json
(cd build/v/base && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
   PYTHONPATH=$PWD:/tmp/site bench $OUT/run26_base.json)
GIT_COMMIT=$(cat build/commit) bench $OUT/run26_head2.json
