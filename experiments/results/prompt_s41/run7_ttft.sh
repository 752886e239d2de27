#!/bin/bash
# Issue 21, D70: time to first token through the prompt program (graph build), a chunk's profile by opcode; then
# GDN_CHUNK of D69 in the same tree for the A/B of its chunk-profile line.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 330 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 128,1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $OUT/ttft.json --plot $OUT/ttft.png 2>&1 | tail -60 | tee $OUT/ttft.log
cp build/prompt_gdn_d69.cuh megakernel/runtime/cuda/prompt_gdn.cuh
timeout 200 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_gdn_d69.json 2>&1 | tail -40 | tee $OUT/ttft_gdn_d69.log
