"""tests/device_order.py, the device's RMSNorm summation order in NumPy (used by the per-word GPU checks):
equal to a literal transcription of the device's loops, and to the engine's NumPy RMSNorm except for rare
elements one bf16 ulp apart."""

import numpy as np

import device_order
from megakernel.runtime.cuda_build import tile_threads
from megakernel.reference import ops
from megakernel.reference.numerics import bf16


def device_loops(x: np.ndarray) -> np.float32:
    """gemv_tile.cuh norm_rows' sums of squares and common.cuh warp_sum, thread by thread, lane by lane."""
    threads = tile_threads()
    ss = [np.float32(0)] * threads
    for t in range(threads):
        for c in range(t, x.size // 8, threads):
            for e in range(8):
                ss[t] = np.float32(ss[t] + np.float32(x[8 * c + e] * x[8 * c + e]))

    def warp_sum(lanes):
        lanes = list(lanes)
        for offset in (16, 8, 4, 2, 1):
            lanes = [np.float32(lanes[lane] + lanes[lane ^ offset]) for lane in range(32)]
        return lanes[0]

    warps = [warp_sum(ss[w * 32:(w + 1) * 32]) for w in range(threads // 32)]
    return warp_sum(warps + [np.float32(0)] * (32 - len(warps)))


def test_the_sum_is_the_device_loops_bit_for_bit():
    rng = np.random.default_rng(7)
    for k in (256, 5120, 1032):  # 32, 640 (a second, partial round) and 129 pieces
        x = bf16(rng.standard_normal((1, k)).astype(np.float32) * 3)
        assert device_order.sum_of_squares(x)[0] == device_loops(x[0]), k


def test_the_norm_differs_from_the_engines_only_in_rare_single_ulps():
    rng = np.random.default_rng(8)
    x = bf16(rng.standard_normal((64, 5120)).astype(np.float32) * 20)
    w = bf16(rng.standard_normal(5120).astype(np.float32) * 0.1)
    ours, engine = device_order.rms_norm_1p(x, w, 1e-6), ops.rms_norm_1p(x, w, 1e-6)
    ulps = np.abs(ours.view(np.int32) - engine.view(np.int32)) >> 16  # bf16 values in fp32: the top 16 bits
    assert ulps.max() <= 1 and ulps.mean() < 1e-3
    assert not np.array_equal(device_order.sum_of_squares(x), (x * x).sum(-1, dtype=np.float32))  # another order
