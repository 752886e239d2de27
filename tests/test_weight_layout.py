"""The fp8 unit layout (megakernel/runtime/weight_layout.py): a permutation of the bytes, its inverse, and the
vector each lane reads as gemv.cuh documents it."""

import numpy as np
import pytest

from megakernel.runtime.weight_layout import from_units, to_units


def test_round_trip_and_a_true_permutation():
    w = np.random.default_rng(0).integers(0, 256, size=(48, 384), dtype=np.uint8)
    u = to_units(w)
    assert u.shape == w.shape and not np.array_equal(u, w)
    assert np.array_equal(np.sort(u, axis=None), np.sort(w, axis=None))
    assert np.array_equal(from_units(u, 48, 384), w)


@pytest.mark.parametrize("strip, block, g, t, i", [(0, 0, 0, 0, 0), (1, 2, 5, 3, 2), (2, 1, 7, 1, 3)])
def test_lane_vector_holds_rows_g_and_g8_of_two_mma_steps(strip, block, g, t, i):
    n, k = 48, 384
    index = np.arange(n * k).reshape(n, k)  # element ids, to see where each lands
    units = to_units(index).reshape(-1)
    unit = (strip * (k // 128) + block) * 2048
    lane = 4 * g + t
    vector = units[unit + 512 * i + 16 * lane:unit + 512 * i + 16 * lane + 16]
    want = [index[16 * strip + g + 8 * r, 128 * block + 32 * i + 8 * t + 4 * h + e]
            for h in range(2) for r in range(2) for e in range(4)]
    assert vector.tolist() == want


def test_shapes_that_are_not_whole_units_are_refused():
    with pytest.raises(ValueError, match="not whole"):
        to_units(np.zeros((24, 128), np.uint8))
    with pytest.raises(ValueError, match="not whole"):
        to_units(np.zeros((16, 200), np.uint8))
