#!/bin/bash
# Issue 21 (s46): Nsight Compute on ATTN_CAUSAL late in a 32,768-token prompt (launch ~231 of the prompt's 256
# attention words: a chunk near position 28,000), to read what limits it before changing it: issue, latency
# (6 warps an SM at 242 registers and 198 KB of shared memory), or the L2 -> shared memory traffic of the K/V tiles.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 420 $NCU -k regex:"tile_attn_causal" --launch-skip 230 -c 1 --set full --import-source yes \
  -o $OUT/attn python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 32768 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_ncu.json > $OUT/ncu_attn.log 2>&1
$NCU --import $OUT/attn.ncu-rep --page details > $OUT/attn.txt 2>&1
$NCU --import $OUT/attn.ncu-rep --page source --csv --print-source sass > $OUT/attn_sass.csv 2>/dev/null
grep -E "tile_|Duration|Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occ|Grid Size|Block Size|L2 Hit|Eligible|Est\. " \
  $OUT/attn.txt | head -80
tail -3 $OUT/ncu_attn.log
