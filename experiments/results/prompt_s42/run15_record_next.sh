#!/bin/bash
# Issue 21 (next session, after run14_next.sh passes): the table and plot of record on an H200 — time to first token
# at 128 / 1,024 / 4,096 / 32,768 tokens in both GPU builds, with the chunk profiles (the 32k chunk's ATTN_CAUSAL
# words say how far attention is from the 6 s target's share).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 400 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 128,1024,4096,32768 \
  --backends graph,megakernel --prompt-paths program --iters 2 --out $OUT/ttft_record.json --plot $OUT/ttft_record.png \
  2>&1 | tail -12 | tee $OUT/ttft_record.log
