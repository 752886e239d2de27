set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o6
cd build/v/d50
export PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 -m megakernel trace --model synthetic:qwen3.5-27b --steps 2 --context 1024 --out /tmp/o6/trace.json.gz --records /tmp/o6/trace_records.npz 2>&1 | tail -3
tar czf $OUT/sixth.tgz -C /tmp/o6 .
(cd experiments && timeout 250 python3 time_words.py --out /tmp/o6 --tag all --rows 1 --context 1024 --words argmax,down,embed,gate_up,gdn_core,handoff,head,in_proj,merge,o_proj,out_proj,pv,qkv,scores 2>&1 | tail -16)
tar czf $OUT/sixth.tgz -C /tmp/o6 .
