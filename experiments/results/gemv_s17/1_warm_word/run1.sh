set -x
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site GIT_COMMIT=$(cat build/commit) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
for t in base warm; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 150 python3 experiments/tile_phases.py --out $OUT/tp_$t 2>&1 | tail -40); done
timeout 300 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree warm=build/v/warm --tree warm_all=build/v/warm_all --reps 2 --rows 1,8 2>&1 | tail -20
