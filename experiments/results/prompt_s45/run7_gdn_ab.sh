#!/bin/bash
# Issue 21 (s45, for the next session): GDN_CHUNK's prefetch and QK beside the solve (D74, 3c53bdc, CPU-verified).
# The prompt GPU tests at the head, then time to first token at 1,024 and 4,096 tokens with the chunk profiles: head,
# build/v/gdn_base (`python experiments/make_tree.py build/v/gdn_base --commit 3c53bdc~1`), head again, one machine.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/gpu_prompt_tests.log
bench() { timeout 150 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -5 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head.json
(cd build/v/gdn_base && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
   PYTHONPATH=$PWD:/tmp/site bench $OUT/ab_gdn_base.json)
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head2.json
