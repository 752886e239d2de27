#!/bin/bash
# Issue 21 (s43): Nsight Compute on ATTN_CAUSAL deep in a long prompt: the first attention word of the last chunk of
# an 8,192-token prompt (position 7,168; launches 0-15 are the 128-token warm run's, then 16 a chunk), to read what
# limits the kernel (shared-memory bandwidth, issue, or latency) before redesigning it for the 32k target.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 240 $NCU -k regex:tile_attn_causal --launch-skip 128 -c 1 --set full --import-source yes -o $OUT/attn_causal \
  python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 8192 --backends graph --prompt-paths program \
  --iters 1 --out $OUT/ttft_ncu.json > $OUT/ncu_attention.log 2>&1
$NCU --import $OUT/attn_causal.ncu-rep --page details > $OUT/attn_causal.txt 2>&1
$NCU --import $OUT/attn_causal.ncu-rep --page source --csv --print-source sass > $OUT/attn_causal_sass.csv 2>/dev/null
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Achieved Occ|Block Size|Grid Size|No Eligible|Stall|Shared|L1/TEX Hit|L2 Hit|Pipe" $OUT/attn_causal.txt | head -40
tail -3 $OUT/ncu_attention.log
