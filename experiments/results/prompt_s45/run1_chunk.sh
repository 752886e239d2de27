#!/bin/bash
# Issue 21 (s45): time to first token at 1,024 and 4,096 tokens with prompt chunks of 1,024, 2,048 and 4,096
# rows, one after the other on one machine (PROMPT_MAX_ROWS raised to 4,096 for it). `bash run1_chunk.sh C..`:
# those chunk sizes instead.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site GIT_COMMIT=$(cat build/commit)
for chunk in ${*:-1024 2048 4096}; do
  timeout 240 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
    --prompt-paths program --prompt-chunk $chunk --iters 2 --out $OUT/chunk_$chunk.json 2>&1 | tail -4 \
    | tee $OUT/chunk_$chunk.log
done
