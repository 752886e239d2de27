#!/bin/bash
# Issue 21 (s45): where a 4,096-token time to first token goes outside the chunks' graphs (experiments/ttft_breakdown.py).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 experiments/ttft_breakdown.py --tokens 4096 --chunk 2048 --repeats 3 --out $OUT/breakdown.json 2>&1 | tail -5
