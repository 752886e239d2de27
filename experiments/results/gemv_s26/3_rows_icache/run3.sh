# Call 3. Trees (experiments/make_tree.py from 6ddbd2f): base; m1 = + rows_constant.patch (the megakernel
# built per Program rows: Word::rows() a compile-time constant, -12 % SASS at M = 1); tr = +
# ../../gemv_s25/next/one_kernel_trace.patch (a traced pass runs the plain pass's code); tr2 = tr +
# attention_twice_diagnostic.patch (every attention tile run twice: the trace shows a warm run's cost).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o3 && mkdir -p /tmp/o3
PYTHONPATH=$root:/tmp/site timeout 330 python3 experiments/compare_trees.py --out /tmp/o3/ct --tree base=build/v/base --tree m1=build/v/m1 --tree tr=build/v/tr --tree tr2=build/v/tr2 --reps 2 --rows 1,8 2>&1 | tail -10
for t in tr tr2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 -m megakernel trace --model synthetic:qwen3.5-27b --steps 2 --context 1024 --out /tmp/o3/trace_$t.json.gz --records /tmp/o3/trace_${t}_records.npz 2>&1 | tail -1); done
(cd build/v/m1 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o3/gpu_tests_m1.log | tail -2)
rm -f /tmp/o3/trace_*.json.gz
cp -r /tmp/o3/* $OUT/
