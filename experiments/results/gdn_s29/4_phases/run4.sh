# Call 4 (HEAD = 1ddb6bd's tile + the GDN phase stamps, SASS unchanged without them): GDN_CORE's phases by
# the stamp probe (layer 0, M = 1 and 8); the whole step, base (ebf846b, the tile landed last session)
# against cand, alternated in one process.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
(cd build/v/cand && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 experiments/tile_phases.py --out /tmp/o --rows 1,8 --layers 0 --gdn 2>&1 | grep -i "gdn_core\|error" | tail -6)
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree cand=build/v/cand --reps 3 --rows 1,8 2>&1 | tail -5
cp /tmp/o/tile_phases.json /tmp/o/ct/compare_trees.json $OUT/ 2>/dev/null
