"""experiments/mma_bits_probe.py's operands and its comparison (the kernels themselves run on the H200)."""

import numpy as np
from experiment_tools import load_experiment


def test_the_probe_operands_are_widened_e4m3_and_f16_operands_in_the_top_binade():
    probe = load_experiment("mma_bits_probe")
    a, b = probe.operands(4, 8, seed=1)
    assert a.shape == (4, 64, 128) and b.shape == (4, 8, 128) and a.dtype == b.dtype == np.float16
    assert np.isfinite(a).all() and np.isfinite(b).all() and np.abs(a).max() <= 448
    top = np.abs(b.astype(np.float64)).max(axis=2)
    assert np.all((top >= 2.0**15) & (top < 2.0**16))
    assert len(np.unique(np.floor(np.log2(np.abs(b[b != 0]).astype(np.float64))))) > 10  # a spread of binades


def test_the_comparison_counts_bits_not_values():
    probe = load_experiment("mma_bits_probe")
    ref = np.array([1.0, 2.0, 3.0], np.float32)
    got = ref.copy()
    got[1] = np.nextafter(got[1], np.float32(3))  # one ulp: a different bit pattern, a tiny error
    r = probe.compare(got, ref, ref.astype(np.float64), np.ones(3))
    assert r["bit_equal_to_mma_chain"] == 2 and 0 < r["max_error_over_magnitude"] < 1e-6
