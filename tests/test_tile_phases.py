"""experiments/tile_phases.py on CPU: the --step archive holds one slot per GEMV word of the step in program
order, sized by its tiles; the per-word summary reads phases from the stamps as the probe writes them."""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler import lower
from isa import GEMV_OPS
from megakernel.model.config import preset

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def tile_phases():
    before = os.environ.get("MEGAKERNEL_TILE_STAMPS")
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        spec = importlib.util.spec_from_file_location("tile_phases", EXPERIMENTS / "tile_phases.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXPERIMENTS))
        if before is None:  # the probe sets it for its own process; not for the tests that follow
            os.environ.pop("MEGAKERNEL_TILE_STAMPS", None)
        else:
            os.environ["MEGAKERNEL_TILE_STAMPS"] = before
    return module


def test_archive_plan_is_every_gemv_word_in_order(tile_phases):
    program = lower(preset("tiny"), rows=2, sms=7, capacity=64)
    plan = tile_phases.archive_plan(program)
    gemv = [i for i, w in enumerate(program.words) if w.opcode in GEMV_OPS]
    assert [i for i, _ in plan] == gemv and len(gemv) > 0
    assert all(tiles == program.words[i].tiles > 0 for i, tiles in plan)


def test_summarize_reads_the_phases(tile_phases):
    tiles, ghz = 4, 2.0  # clocks per ns
    s = np.zeros((tiles + 3, tile_phases.STAMP_SLOTS), dtype=np.uint64)  # rows past `tiles`: another word's
    s[tiles:] = 10**12
    for b in range(tiles):
        t0 = 1000 * b
        # clock64 stamps: 0 start, 8 addressed, 9 staged, 1 input rows done, 3 passes done, 4 end
        for slot, at in ((0, 0), (8, 200), (9, 600), (1, 1000), (3, 9000), (4, 10000)):
            s[b, slot] = t0 + at
        s[b, 5] = b % 2  # SM
        s[b, 6], s[b, 7] = 5000 + b, 5000 + b + int(10000 / ghz)  # globaltimer ns
    out = tile_phases.summarize(s, tiles)
    assert out["sm_ghz"] == pytest.approx(ghz, rel=1e-3)
    assert out["addressing_us"]["median"] == pytest.approx(0.1, abs=0.01)  # 200 clocks at 2 GHz
    assert out["staging_us"]["median"] == pytest.approx(0.2, abs=0.01)
    assert out["passes_us"]["median"] == pytest.approx(4.0, abs=0.01)
    assert out["max_tiles_per_sm"] == 2
