"""Synthetic weights generated in GPU memory: the bytes of ``synthetic.synthesize``, made by CUDA.

The kernels (``megakernel/runtime/cuda/synthetic.cu``) follow the contract in ``synthetic.py`` step for
step, so every array here is byte-identical to its CPU counterpart; the 27B preset (about 30 GB)
is made in well under a minute without passing through host memory.

Representation. CuPy has no bfloat16 or float8 dtype, so arrays hold raw bit patterns:

* bf16 tensors, and the bf16 block scales of fp8 tensors (``<name>_scale_inv``): ``cupy.uint16``
  holding bfloat16 bits (``cupy.asnumpy(a).view(ml_dtypes.bfloat16)`` is the CPU array);
* fp8 tensors: ``cupy.uint8`` holding float8_e4m3fn bytes (``.view(ml_dtypes.float8_e4m3fn)``).

Shapes are those of the manifest (``spec.shape``; scales ``(rows / 128, cols / 128)``). Tensors
whose distribution is not normal-ish (A_log and dt_bias, which use float64 transcendentals, a few
dozen values a layer) are made by the CPU generator and uploaded.

CuPy is imported inside the functions, so this module imports on a machine without a GPU.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Iterator

import numpy as np

from . import cuda_build
from ..model import fp8, synthetic
from ..model.config import ModelConfig
from .cuda_build import arch_for  # noqa: F401  (re-exported: part of this module's interface)
from ..model.tensors import TensorSpec, scale_name, tensor_specs

if TYPE_CHECKING:  # pragma: no cover
    import cupy

CUDA_SOURCE = cuda_build.CUDA_DIR / "synthetic.cu"
MASK64 = (1 << 64) - 1
BF16_THREADS = 256  # synth_bf16's __launch_bounds__
BF16_BLOCKS_PER_SM = 8  # 8 x 256 threads fill an SM (30 registers a thread): one wave, grid-stride
RAW_DTYPES = {np.dtype(fp8.BF16): np.uint16, np.dtype(fp8.E4M3): np.uint8}  # ml_dtypes -> its bits


def _define(name: str) -> int:
    return cuda_build.define(CUDA_SOURCE, name)


@functools.cache
def fp8_threads() -> int:
    return _define("FP8_THREADS")


def _module(device_id: int):
    if fp8.BLOCK != _define("FP8_BLOCK"):
        raise RuntimeError(f"fp8.BLOCK = {fp8.BLOCK} but {CUDA_SOURCE.name} tiles by {_define('FP8_BLOCK')}")
    return cuda_build.module(CUDA_SOURCE, device_id)


@functools.cache
def _kernel_on(device_id: int, name: str):
    return _module(device_id).get_function(name)


def _kernel(name: str):
    import cupy

    return _kernel_on(cupy.cuda.Device().id, name)


@functools.cache
def _sm_count(device_id: int) -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


def key_words(seed: int, name: str) -> tuple[np.uint64, np.uint64]:
    """The Philox key of (seed, name) as the kernels take it: (k0 = low 64 bits, k1 = high)."""
    key = synthetic.tensor_key(seed, name)
    return np.uint64(key & MASK64), np.uint64(key >> 64)


def _normal_params(spec: TensorSpec) -> tuple[np.float32, np.float32]:
    """(c, mean) as float32, with c rounded from float64 exactly as synthetic.normalish does."""
    mean, std = synthetic.NORMAL_INIT[spec.init]
    return np.float32(std / synthetic.IRWIN_HALL_STD), np.float32(mean)


def _launch_bf16(spec: TensorSpec, seed: int, start: int, out: "cupy.ndarray") -> None:
    import cupy

    n = out.size
    if n == 0:
        return
    if spec.init not in synthetic.NORMAL_INIT:
        raise ValueError(f"{spec.name} ({spec.init}) is not generated on the GPU")
    # Philox blocks touched by [start, start + n), at one block a thread and step.
    blocks = (start + n - 1) // 4 - start // 4 + 1
    grid = min(-(-blocks // BF16_THREADS), BF16_BLOCKS_PER_SM * _sm_count(cupy.cuda.Device().id))
    c, mean = _normal_params(spec)
    k0, k1 = key_words(seed, spec.name)
    _kernel("synth_bf16")((grid,), (BF16_THREADS,), (k0, k1, np.uint64(start), np.uint64(n), c, mean, out))


def bf16_range_gpu(spec: TensorSpec, seed: int, start: int, count: int) -> "cupy.ndarray":
    """bf16 bits (uint16, flat) of elements start .. start + count - 1 of a normal-ish tensor."""
    import cupy

    if not 0 <= start <= start + count <= spec.numel:
        raise ValueError(f"elements {start}..{start + count} outside {spec.name} ({spec.numel} elements)")
    out = cupy.empty(count, dtype=cupy.uint16)
    _launch_bf16(spec, seed, start, out)
    return out


def _upload(arrays: dict[str, np.ndarray]) -> dict[str, "cupy.ndarray"]:
    import cupy

    return {name: cupy.asarray(a.view(RAW_DTYPES.get(a.dtype, a.dtype))) for name, a in arrays.items()}


def synthesize_gpu(spec: TensorSpec, seed: int, pow2_scales: bool = False) -> dict[str, "cupy.ndarray"]:
    """``synthetic.synthesize`` on the GPU: the same names and bytes, as raw-bit CuPy arrays."""
    import cupy

    if spec.init not in synthetic.NORMAL_INIT:
        return _upload(synthetic.synthesize(spec, seed, pow2_scales))
    if not spec.is_fp8:
        out = cupy.empty(spec.shape, dtype=cupy.uint16)
        _launch_bf16(spec, seed, 0, out)
        return {spec.name: out}

    rows = spec.shape[0]
    cols = spec.numel // rows
    b = fp8.BLOCK
    if rows % b or cols % b:
        raise ValueError(f"fp8 block quantisation needs dims that are multiples of {b}, got {spec.shape}")
    if rows // b > 65535:
        raise ValueError(f"{spec.name}: {rows // b} tile rows exceed the grid's y limit")
    q = cupy.empty(spec.shape, dtype=cupy.uint8)
    scales = cupy.empty((rows // b, cols // b), dtype=cupy.uint16)
    if q.size:
        c, mean = _normal_params(spec)
        k0, k1 = key_words(seed, spec.name)
        args = (k0, k1, np.uint64(rows), np.uint64(cols), c, mean, np.int32(bool(pow2_scales)), q, scales)
        _kernel("synth_fp8")((cols // b, rows // b), (fp8_threads(),), args)
    return {spec.name: q, scale_name(spec.name): scales}


def to_host(raw: "cupy.ndarray") -> np.ndarray:
    """A raw-bit CuPy array as the CPU generator's NumPy array (uint8 -> float8_e4m3fn, uint16 -> bfloat16)."""
    import cupy

    host = cupy.asnumpy(raw)
    return host.view(fp8.E4M3) if host.dtype == np.uint8 else host.view(fp8.BF16) if host.dtype == np.uint16 else host


def synthesize_on_host(spec: TensorSpec, seed: int, pow2_scales: bool = False) -> dict[str, np.ndarray]:
    """``synthetic.synthesize``'s arrays, byte for byte, made on the GPU and brought to the host (a 27B
    layer in a fraction of a second instead of seconds of CPU Philox)."""
    return {name: to_host(raw) for name, raw in synthesize_gpu(spec, seed, pow2_scales).items()}


def rows_on_host(spec: TensorSpec, seed: int, r0: int, r1: int) -> np.ndarray:
    """``synthetic.synthesize_rows`` (rows [r0, r1) of a bf16 tensor), made on the GPU."""
    if spec.is_fp8:
        raise ValueError(f"{spec.name}: rows of an fp8 tensor come with their block scales; synthesize it whole")
    cols = spec.numel // spec.shape[0]
    return to_host(bf16_range_gpu(spec, seed, r0 * cols, (r1 - r0) * cols)).reshape(r1 - r0, cols)


def synthetic_tensors_gpu(config: ModelConfig, seed: int = 0,
                          pow2_scales: bool = False) -> Iterator[tuple[str, "cupy.ndarray"]]:
    """(name, raw-bit CuPy array) for every tensor of the manifest, in manifest order."""
    for spec in tensor_specs(config):
        if not spec.is_scale:  # scales come with their weight
            yield from synthesize_gpu(spec, seed, pow2_scales).items()
