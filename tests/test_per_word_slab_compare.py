"""tests/gpu/per_word.py's comparison of operand slabs by the values they encode (SLAB_VALUES: GATED_PREPARE,
whose silu goes through the device's expf): a one-ulp flip of one value passes there and fails the bit-for-bit
rule every other prepare word keeps; many values moved, or one moved far, fail both."""

import sys
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "gpu"))

from isa import DType  # noqa: E402
from isa.operand_layout import SLAB_BYTES, slabs  # noqa: E402
from per_word import compare  # noqa: E402

NAME = "L5.out_proj.operand"
PROGRAM = SimpleNamespace(buffers=[SimpleNamespace(name=NAME, dtype=DType.I32)])


def encoded(rows: np.ndarray) -> np.ndarray:
    """bf16 rows [128, 256] -> their f16 slabs as the buffer holds them (int32 rows of a slab), each
    (row, k-block) scaled by a power of two as the prepare words do (values exact in f16)."""
    x = rows.astype(np.float32).reshape(128, 2, 128)
    p = np.clip(np.floor(np.log2(14.0 / np.abs(x).max(axis=2))), -20, 20)
    x16 = (x * 2.0 ** p[..., None]).reshape(128, 256).astype(np.float16)
    return slabs(x16, (2.0 ** -p).astype(np.float32)).reshape(-1, SLAB_BYTES // 4).view(np.int32)


def test_operand_slabs_compare_by_value_only_for_slab_value_words():
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((128, 256)).astype(ml_dtypes.bfloat16)
    flipped = rows.copy()
    flipped.view(np.uint16)[31, 2014 % 256] += 1  # one value one bf16 ulp away
    cpu, gpu = encoded(rows), encoded(flipped)
    assert compare(PROGRAM, NAME, gpu, cpu, as_slab_values=True) is None
    assert "int32 values differ" in compare(PROGRAM, NAME, gpu, cpu)

    many = rows.copy()
    many.view(np.uint16)[::4, ::8] += 4  # 1,024 values four ulps away: not rare
    assert "beyond 2 ulps" in compare(PROGRAM, NAME, encoded(many), cpu, as_slab_values=True)
    far = rows.copy()
    far[7, 100] = ml_dtypes.bfloat16(float(rows[7, 100]) + 1.0)  # one value moved by ~1/4 of the largest
    assert "beyond" in compare(PROGRAM, NAME, encoded(far), cpu, as_slab_values=True)
