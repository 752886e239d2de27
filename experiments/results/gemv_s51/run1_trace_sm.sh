#!/bin/bash
# Issue 18 (s50, run in s51): the graph trace of record again,
# now with each block's SM (D79), so that graph_trace_report.py can say whether a slow GEMV block is a slow SM
# (placement) or a slow tile (its index: gate_up's slow blocks repeat every 8, the period of its 144-row tiles
# against the 128-row scale blocks); then the report at M = 1 and 8 with the read bandwidth of the same run's
# bench (graph_trace.py prints it). On an H200 for figures that count; on an H100 it still answers the question.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 300 python3 experiments/graph_trace.py --out $OUT/gt --rows 1,8 --megakernel 2>&1 \
  | grep -E "^M =|megakernel traced|bandwidth"
GBPS=$(PYTHONPATH=$PWD:/tmp/site python3 -c "from discrete.kernels import read_bandwidth_gbps; print(read_bandwidth_gbps())")
for m in 1 8; do
  PYTHONPATH=$PWD:$PWD/experiments:/tmp/site python3 experiments/graph_trace_report.py $OUT/gt/graph_trace.json --rows $m \
    --gbps $GBPS --out $OUT/gt/graph_trace_kinds_m$m.json
done
