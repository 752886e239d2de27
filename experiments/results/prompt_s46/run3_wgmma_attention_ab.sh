#!/bin/bash
# Issue 21 (s46, D75): ATTN_CAUSAL on wgmma (q.k from shared memory by m64n64k16, P.V by m64n128k16 with the values
# MN-major; tile = a query head x 128 rows), CPU-verified by tests/test_prompt_words_on_cpu.py. The prompt GPU tests
# first (every word against the interpreter); only if they pass, time to first token at 4,096 and 32,768 tokens
# with the chunk profiles, the head then build/v/base (the mma.sync form, made by experiments/make_tree.py), one
# after the other on one machine.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 170 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  > $OUT/gpu_prompt_tests_full.log
tail -4 $OUT/gpu_prompt_tests_full.log | tee $OUT/gpu_prompt_tests.log
grep -q " passed" $OUT/gpu_prompt_tests.log && ! grep -q "failed" $OUT/gpu_prompt_tests.log || \
  { grep -E "^E |Error|problem" $OUT/gpu_prompt_tests_full.log | head -30; exit 1; }
bench() { timeout 190 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 4096,32768 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -6 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head.json
for tree in ${*:-base}; do
  (cd build/v/$tree && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
     PYTHONPATH=$PWD:/tmp/site bench $OUT/ab_$tree.json)
done
