"""The decode GEMV's f16 operand (gemv.cuh f16_operand) run on the CPU by tests/simt_runner.py against the
reference's rule (megakernel/reference/ops.py f16_operand), bit for bit, from one (row, k-block) pair a half-warp
to many (8 rows of 80 k-blocks: more pairs than a block's 32 half-warps take at once). The rows hold what a block
can hold: zeros of both signs, values more than 2^32 below their block's largest (rounded to f16's subnormal grid
or to zero), all-zero blocks and blocks of tiny values (P clamped). D76's rejected form with G lanes a pair
(`experiments/results/gemv_s47/operand_lanes.patch`) passed it at G = 16, 8, 4, 2 and 1. The GPU runs the same
function in tests/gpu/test_gemv_gpu.py."""

import ctypes

import numpy as np
import pytest

from megakernel.reference import ops
from megakernel.runtime import cuda_build
from simt_runner import library, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"CPU runner: {unavailable()}")
GEMV = cuda_build.CUDA_DIR / "gemv.cuh"
MAX_SLICE_BLOCKS = cuda_build.define(GEMV, "MAX_SLICE_BLOCKS")
X_PAD = cuda_build.define(GEMV, "X_PAD")
K_BLOCK = 128


def bf16_rows(rng, m: int, blocks: int) -> np.ndarray:
    """bf16 bits [m, blocks * 128]: random signs, exponents spread over each block's own range, and the corners."""
    width = blocks * K_BLOCK
    exponent = rng.integers(0, 48, size=(m, width)) + rng.integers(60, 160, size=(m, blocks)).repeat(K_BLOCK, axis=1)
    bits = (rng.integers(0, 2, size=(m, width)) << 15) | (np.clip(exponent, 1, 254) << 7) | rng.integers(0, 128, (m, width))
    bits = bits.astype(np.uint16)
    flat = bits.reshape(-1)
    corners = rng.choice(flat.size, size=flat.size // 16, replace=False)
    flat[corners[0::3]] = 0x0000
    flat[corners[1::3]] = 0x8000
    if m * blocks > 2:
        bits[0, :K_BLOCK] = 0  # a block of zeros: P at its clamp
        bits[-1, -K_BLOCK:] = (rng.integers(1, 8, K_BLOCK) << 7).astype(np.uint16)  # tiny values: P clamped too
    return bits


def run_on_cpu(bits: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    m, width = bits.shape
    x = np.full((m, stride), 0x7E7E, dtype=np.uint16)  # the padding must come back as it went in
    x[:, :width] = bits
    p = np.full((m, MAX_SLICE_BLOCKS), 99, dtype=np.int8)
    message = ctypes.create_string_buffer(256)
    assert library().simt_f16_operand(x.ctypes.data, m, width // K_BLOCK, stride, p.ctypes.data, message, len(message)) == 0, \
        message.value.decode()
    return x, p


@pytest.mark.parametrize("m, blocks", [(1, 16), (2, 16), (1, 46), (2, 32), (8, 16), (3, 40), (4, 46), (8, 32),
                                       (8, 46), (8, 64), (8, 80)])
def test_the_f16_operand_on_the_cpu_is_the_reference_rule(m, blocks):
    rng = np.random.default_rng(m * 1000 + blocks)
    bits = bf16_rows(rng, m, blocks)
    stride = blocks * K_BLOCK + (X_PAD if m > 1 else 0)
    x, p = run_on_cpu(bits, stride)
    values = (bits.astype(np.uint32) << 16).view(np.float32)
    for r in range(m):
        want, unscale = ops.f16_operand(values[r])
        assert np.array_equal(x[r, :blocks * K_BLOCK], want.astype(np.float16).view(np.uint16)), f"row {r}"
        assert np.array_equal(p[r, :blocks].astype(np.float64), -np.log2(unscale.astype(np.float64))), f"row {r}"
        assert (p[r, blocks:] == 99).all()
    assert (x[:, blocks * K_BLOCK:] == 0x7E7E).all()


def test_a_wrong_exponent_would_be_caught():
    """Negative control: the kernel's output against the rule with every block's P one higher (the top binade at
    2^16, past f16's range) differs; the check above would see a block whose maximum missed a lane's pieces."""
    rng = np.random.default_rng(7)
    bits = bf16_rows(rng, 8, 46)
    x, _ = run_on_cpu(bits, 46 * K_BLOCK + X_PAD)
    values = (bits.astype(np.uint32) << 16).view(np.float32)[3].reshape(-1, K_BLOCK)
    _, unscale = ops.f16_operand(values.reshape(-1))
    with np.errstate(over="ignore"):
        wrong = (values * (np.float32(2.0) / unscale[:, None])).astype(np.float16)
    assert not np.array_equal(x[3, :46 * K_BLOCK], wrong.reshape(-1).view(np.uint16))
