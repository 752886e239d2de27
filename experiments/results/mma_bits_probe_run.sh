#!/bin/bash
# Issue 21: wgmma against mma.sync, bit for bit, on one k-block's products.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 experiments/mma_bits_probe.py --out $OUT 2>&1 | tee $OUT/mma_bits_probe.log
