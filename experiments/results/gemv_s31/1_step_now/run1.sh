# Call 1 (HEAD 143e371): where the step's time goes now. Every GEMV word's tiles inside whole steps (M = 1, 8),
# then the other words alone at 1k over every layer.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
timeout 120 python3 experiments/tile_phases.py --step --raw --out $OUT/sp 2>&1 | tail -3; date
timeout 150 python3 experiments/time_words.py --out $OUT/tw --context 1024 --tag head_1024 --words embed,gdn_core,scores,pv,merge,head,argmax,handoff 2>&1 | tail -2; date
ls -la $OUT/*
