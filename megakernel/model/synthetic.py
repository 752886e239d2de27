"""Deterministic synthetic weights: every element is a function of (seed, tensor name, element index).

The generator is counter-based (Philox4x64-10, NumPy's ``np.random.Philox``), so any slice of any
tensor can be produced independently, and a GPU kernel that implements the same Philox rounds and
the same float32 steps produces the same bytes (the 27B preset does not fit this machine's memory
and will be generated directly in GPU memory).

Contract for element i of tensor ``name`` (a GPU port must follow it exactly):

* key = first 16 bytes of sha256(f"megakernel.synthetic.v1|{seed}|{name}"), little-endian, as the
  128-bit Philox key (k0 = low 64 bits, k1 = high 64 bits).
* r = word (i mod 4) of Philox4x64-10(counter = (i div 4 + 1, 0, 0, 0), key).
  (NumPy increments its counter before each block, hence the +1.)
* Linear/embedding/norm/conv tensors: "normal-ish" by Irwin-Hall over the four 16-bit lanes of r:
  s = lane0 + lane1 + lane2 + lane3 - 131070 (an exact integer), value = float32(s) * c (+ mean),
  with c = float32(std / sqrt(4 (65536^2 - 1) / 12)); one rounded multiply, one rounded add.
  Then bf16 (round to nearest even) or fp8 block quantisation (``fp8.quantize``).
* A_log and dt_bias (48 values per layer) use float64 transcendentals and are made on the CPU only.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np

from . import fp8
from .config import ModelConfig, preset
from ..errors import ConfigError
from ..progress import bytes_bar
from .tensors import (INIT_A_LOG, INIT_CONV, INIT_DT_BIAS, INIT_EMBED, INIT_LINEAR, INIT_NORM_1P,
                      INIT_NORM_PLAIN, TensorSpec, scale_name, tensor_specs)
from .weights import WeightSet

GENERATOR_VERSION = "megakernel.synthetic.v1"
LANE_SUM_OFFSET = 2 * 65535  # centres the sum of four uint16 lanes
IRWIN_HALL_STD = math.sqrt(4 * (65536**2 - 1) / 12)
CHUNK_ELEMENTS = 1 << 23  # bounds temporaries (~100 MB) when generating the large tables
SYNTH_WORKERS = 4  # threads generating tensors at once (a chunk's temporaries each)

# (mean, std) of each normal-ish family. Linear ~ N(0, 0.02) as in common inits; zero-centred norm
# weights small but well above bf16 resolution around 1 so that (1 + w) vs w mistakes show.
NORMAL_INIT = {
    INIT_LINEAR: (0.0, 0.02),
    INIT_EMBED: (0.0, 0.02),
    INIT_NORM_1P: (0.0, 0.1),
    INIT_NORM_PLAIN: (1.0, 0.1),
    INIT_CONV: (0.0, 0.3),
}


def tensor_key(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"{GENERATOR_VERSION}|{seed}|{name}".encode()).digest()
    return int.from_bytes(digest[:16], "little")


def random_words(key: int, start: int, count: int) -> np.ndarray:
    """uint64 words for elements start .. start + count - 1 (see the module contract)."""
    first_block, skip = divmod(start, 4)
    stream = np.random.Philox(key=key, counter=first_block)
    return stream.random_raw(skip + count)[skip:]


def normalish(words: np.ndarray, mean: float, std: float) -> np.ndarray:
    assert sys.byteorder == "little"  # lane j = bits 16j .. 16j+15 of each word
    lanes = words.view(np.uint16).reshape(-1, 4)
    s = lanes[:, 0].astype(np.int32)  # column adds: ~2x faster than sum(axis=1) on 4-wide rows
    for j in (1, 2, 3):
        s += lanes[:, j]
    s -= np.int32(LANE_SUM_OFFSET)
    values = s.astype(np.float32) * np.float32(std / IRWIN_HALL_STD)
    if mean:
        values = values + np.float32(mean)
    return values


def uniform01(words: np.ndarray) -> np.ndarray:
    """float64 in [0, 1) from the top 53 bits (CPU-only tensors)."""
    return (words >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _float_values(spec: TensorSpec, seed: int, start: int, count: int) -> np.ndarray:
    words = random_words(tensor_key(seed, spec.name), start, count)
    if spec.init in NORMAL_INIT:
        return normalish(words, *NORMAL_INIT[spec.init])
    u = uniform01(words)
    if spec.init == INIT_A_LOG:
        return np.log(1.0 + 15.0 * u)  # A = exp(A_log) ~ U(1, 16), the usual GDN init
    if spec.init == INIT_DT_BIAS:
        # dt ~ logU(1e-3, 1e-1) stored as its inverse softplus, the Mamba-2 convention.
        dt = np.exp(math.log(1e-3) + u * (math.log(1e-1) - math.log(1e-3)))
        return np.log(np.expm1(dt))
    raise ValueError(f"no synthetic distribution for {spec.name} ({spec.init})")


def _row_chunks(rows: int, cols: int, multiple: int) -> Iterator[tuple[int, int]]:
    step = max(multiple, (CHUNK_ELEMENTS // max(cols, 1)) // multiple * multiple)
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)


def synthesize(spec: TensorSpec, seed: int, pow2_scales: bool = False) -> dict[str, np.ndarray]:
    """The tensor for ``spec`` (and its scale when it is fp8), generated in row chunks."""
    rows = spec.shape[0]
    cols = spec.numel // rows
    if spec.is_fp8:
        q = np.empty((rows, cols), dtype=fp8.E4M3)
        s = np.empty((rows // fp8.BLOCK, cols // fp8.BLOCK), dtype=fp8.BF16)
        for r0, r1 in _row_chunks(rows, cols, fp8.BLOCK):
            values = _float_values(spec, seed, r0 * cols, (r1 - r0) * cols).reshape(r1 - r0, cols)
            q[r0:r1], s[r0 // fp8.BLOCK:r1 // fp8.BLOCK] = fp8.quantize(values, pow2_scales)
        return {spec.name: q, scale_name(spec.name): s}
    out = np.empty((rows, cols), dtype=fp8.BF16)
    for r0, r1 in _row_chunks(rows, cols, 1):
        out[r0:r1] = synthesize_rows(spec, seed, r0, r1)
    return {spec.name: out.reshape(spec.shape)}


def synthesize_rows(spec: TensorSpec, seed: int, r0: int, r1: int) -> np.ndarray:
    """Rows [r0, r1) of a bf16 tensor (not fp8: its scales cover 128 rows), the same bytes as those rows
    of ``synthesize``: an embedding lookup or a slice of the head without the whole table."""
    if spec.is_fp8:
        raise ValueError(f"{spec.name}: rows of an fp8 tensor come with their block scales; synthesize it whole")
    cols = spec.numel // spec.shape[0]
    return _float_values(spec, seed, r0 * cols, (r1 - r0) * cols).astype(fp8.BF16).reshape(r1 - r0, cols)


def synthetic_tensors(c: ModelConfig, seed: int = 0, pow2_scales: bool = False) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) for every tensor of the manifest, in manifest order."""
    for spec in tensor_specs(c):
        if not spec.is_scale:  # scales come with their weight
            yield from synthesize(spec, seed, pow2_scales).items()


def synthetic_weights(c: ModelConfig, seed: int = 0, pow2_scales: bool = False, source: str | None = None) -> WeightSet:
    """Every tensor of the manifest, generated by up to SYNTH_WORKERS threads (synthesize_specs)."""
    specs = [spec for spec in tensor_specs(c) if not spec.is_scale]
    with bytes_bar(sum(s.nbytes for s in tensor_specs(c)), "synthesising weights") as bar:
        tensors = synthesize_specs(specs, seed, pow2_scales, min(SYNTH_WORKERS, os.cpu_count() or 1), bar.update)
    return WeightSet(c, tensors, source or f"synthetic:{c.name}:{seed}")


def synthesize_specs(specs: list[TensorSpec], seed: int, pow2_scales: bool, workers: int,
                     progress=None) -> dict[str, np.ndarray]:
    """The tensors of `specs` (and the fp8 ones' scales) by `workers` threads (NumPy's Philox draws and
    conversions release the GIL; each tensor's bytes depend only on its own key, so the order of work changes
    nothing); progress(bytes) after each tensor."""
    tensors: dict[str, np.ndarray] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for arrays in pool.map(lambda spec: synthesize(spec, seed, pow2_scales), specs):
            tensors.update(arrays)
            if progress is not None:
                progress(sum(a.nbytes for a in arrays.values()))
    return tensors


def parse_synthetic(model: str) -> tuple[ModelConfig, int] | None:
    """'synthetic:<preset>[:seed]' -> (config, seed); None for anything else (a directory path)."""
    if not model.startswith("synthetic:"):
        return None
    parts = model.split(":")
    if len(parts) not in (2, 3) or not parts[1]:
        raise ConfigError(f"bad model {model!r}: expected synthetic:<preset>[:seed]")
    seed = 0
    if len(parts) == 3:
        if not parts[2].isdigit():
            raise ConfigError(f"bad model {model!r}: the seed must be a non-negative integer")
        seed = int(parts[2])
    return preset(parts[1]), seed
