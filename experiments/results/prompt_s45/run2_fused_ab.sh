#!/bin/bash
# Issue 21 (s45): the prompt GPU tests at the head, then time to first token at 1,024 and 4,096 tokens with the
# chunk profiles, head then each tree of build/v named (made by experiments/make_tree.py), one after the other on
# one machine. Run as `bash run2_fused_ab.sh` (D74: the head with the fused promotion against build/v/unfused,
# 067bc3a). Next session: `bash run2_fused_ab.sh gdn_base gdn head` with build/v/gdn_base made at 3c53bdc~1 and
# build/v/gdn at 168add5~1: GDN_CHUNK's prefetch and QK beside the solve (3c53bdc), then the fused promotion with
# its factors before the wait (168add5, ee2d58a), both CPU-verified; `head` times the head again.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/gpu_prompt_tests.log
bench() { timeout 150 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -5 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head.json
for tree in ${*:-unfused}; do
  if [ "$tree" = head ]; then GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head2.json; continue; fi
  (cd build/v/$tree && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
     PYTHONPATH=$PWD:/tmp/site bench $OUT/ab_$tree.json)
done
