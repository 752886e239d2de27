"""Load a Hugging Face checkpoint directory of the Qwen3.5 FP8 release, validating every tensor first.

Layout: ``config.json`` plus ``model.safetensors`` or sharded ``model-*.safetensors`` with
``model.safetensors.index.json``. Tensor names: the release's ``model.language_model.*`` /
``lm_head.weight`` / ``mtp.*``, or the flat text-only ``model.*``.

Each file is opened by the ``safetensors`` library first, which rejects a malformed, oversized or
truncated header and offsets outside the file. Its tensors are then mapped, not copied: the
library's NumPy backend cannot return float8 arrays (it looks for ``numpy.float8_e4m3fn``) and
copies what it returns, so the data are read through a read-only ``mmap`` at the offsets of the
header the library has just accepted. Nothing is handed out until every expected tensor has
passed (name, dtype, shape, finite values, finite positive scales).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from safetensors import SafetensorError, safe_open

from .config import ModelConfig, load_config
from .errors import CheckpointError
from .tensors import (BF16, F8, F32, FLAT_TEXT_PREFIX, INIT_A_LOG, INIT_DT_BIAS, TEXT_PREFIX, TensorSpec,
                      tensor_specs)
from .weights import WeightSet

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

NUMPY_DTYPES = {F8: ml_dtypes.float8_e4m3fn, BF16: ml_dtypes.bfloat16, F32: np.float32}
# Dtypes accepted besides the release's own: fp32 scales (what transformers allocates) and fp32
# A_log / dt_bias (vLLM and SGLang keep them as fp32 parameters; SPEC section 8 leaves it open).
ALSO_ACCEPTED = {INIT_A_LOG: {F32}, INIT_DT_BIAS: {F32}, "scale": {F32}}
SCAN_CHUNK = 1 << 26  # bytes per slice when scanning payloads for NaN/Inf


@dataclass
class _Entry:
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute byte offset of the data in the file
    nbytes: int


class SafetensorsFile:
    """One validated .safetensors file, memory-mapped read-only."""

    def __init__(self, path: str):
        self.path = path
        try:
            with safe_open(path, framework="np"):
                pass  # the library validates header, offsets and file size
        except FileNotFoundError:
            raise CheckpointError(f"{path}: file not found") from None
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{path}: not a valid safetensors file ({e})") from None
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data_start = 8 + header_len
        self.entries = {
            name: _Entry(e["dtype"], tuple(e["shape"]), data_start + e["data_offsets"][0],
                         e["data_offsets"][1] - e["data_offsets"][0])
            for name, e in header.items() if name != "__metadata__"
        }

    def array(self, name: str) -> np.ndarray:
        e = self.entries[name]
        dtype = NUMPY_DTYPES[e.dtype]
        count = e.nbytes // np.dtype(dtype).itemsize
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=e.offset).reshape(e.shape)


def _shard_map(checkpoint_dir: str) -> dict[str, str]:
    """Tensor name -> shard file name, from the index or from the single file."""
    index_path = os.path.join(checkpoint_dir, INDEX_FILE)
    if os.path.exists(index_path):
        try:
            with open(index_path, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
            raise CheckpointError(f"{index_path}: malformed index ({type(e).__name__}: {e})") from None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError(f"{index_path}: weight_map must map tensor names to file names")
        for file_name in set(weight_map.values()):
            if os.path.basename(file_name) != file_name or file_name in ("", ".", ".."):
                raise CheckpointError(f"{index_path}: shard name {file_name!r} is not a plain file name")
        return weight_map
    single = os.path.join(checkpoint_dir, SINGLE_FILE)
    if os.path.exists(single):
        return {name: SINGLE_FILE for name in SafetensorsFile(single).entries}
    raise CheckpointError(f"{checkpoint_dir}: no {SINGLE_FILE} or {INDEX_FILE}")


def _canonical(name: str, flat: bool) -> str | None:
    """Map a stored name to its canonical name; None for tensors the text engine ignores (vision).
    A name that maps nowhere is returned as is, so validation reports it as unexpected."""
    if name.startswith(("model.visual.", "visual.")):
        return None
    if flat and name.startswith(FLAT_TEXT_PREFIX):
        return TEXT_PREFIX + name[len(FLAT_TEXT_PREFIX):]
    return name


def load_checkpoint(checkpoint_dir: str | os.PathLike, config: ModelConfig | None = None,
                    check_payload: bool = True) -> WeightSet:
    """Validate and memory-map every tensor of a checkpoint directory."""
    checkpoint_dir = os.fspath(checkpoint_dir)
    if not os.path.isdir(checkpoint_dir):
        raise CheckpointError(f"{checkpoint_dir}: not a directory")
    config = config or load_config(checkpoint_dir)
    stored = _shard_map(checkpoint_dir)
    flat = not any(n.startswith(TEXT_PREFIX) for n in stored)
    canonical_to_stored = {}
    for name in stored:
        canon = _canonical(name, flat)
        if canon is not None:
            canonical_to_stored[canon] = name

    specs = tensor_specs(config)
    expected = {s.name for s in specs}
    unexpected = sorted(set(canonical_to_stored) - expected)
    if unexpected:
        raise CheckpointError(
            f"{checkpoint_dir}: tensor {canonical_to_stored[unexpected[0]]!r} (in {stored[canonical_to_stored[unexpected[0]]]}) "
            f"is not part of the model that config.json describes ({len(unexpected)} such tensors; "
            f"num_hidden_layers={config.num_hidden_layers}, mtp_num_hidden_layers={config.mtp_num_hidden_layers})")

    files: dict[str, SafetensorsFile] = {}
    tensors: dict[str, np.ndarray] = {}
    for spec in specs:
        stored_name = canonical_to_stored.get(spec.name)
        if stored_name is None:
            raise CheckpointError(f"{checkpoint_dir}: missing tensor {_stored_form(spec.name, flat)!r} "
                                  f"({spec.dtype} {list(spec.shape)})")
        file_name = stored[stored_name]
        if file_name not in files:
            files[file_name] = SafetensorsFile(os.path.join(checkpoint_dir, file_name))
        tensors[spec.name] = _validated(files[file_name], stored_name, spec, check_payload)
    return WeightSet(config, tensors, source=checkpoint_dir, files=list(files.values()))


def _stored_form(canonical: str, flat: bool) -> str:
    return FLAT_TEXT_PREFIX + canonical[len(TEXT_PREFIX):] if flat and canonical.startswith(TEXT_PREFIX) else canonical


def _validated(f: SafetensorsFile, name: str, spec: TensorSpec, check_payload: bool) -> np.ndarray:
    where = f"tensor {name!r} in {f.path}"
    entry = f.entries.get(name)
    if entry is None:
        raise CheckpointError(f"{where}: the index lists it but the file does not contain it")
    allowed = {spec.dtype} | ALSO_ACCEPTED.get("scale" if spec.is_scale else spec.init, set())
    if entry.dtype not in allowed:
        raise CheckpointError(f"{where}: dtype {entry.dtype}, expected {' or '.join(sorted(allowed))}")
    if entry.shape != spec.shape:
        raise CheckpointError(f"{where}: shape {list(entry.shape)}, expected {list(spec.shape)} from config.json")
    array = f.array(name)
    if spec.is_scale:
        _check_scales(array, where)
    elif check_payload or spec.numel <= 1 << 20:
        _check_finite(array, where)
    return array


def _check_scales(scale: np.ndarray, where: str) -> None:
    s = scale.astype(np.float32)
    bad = ~np.isfinite(s) | (s <= 0)
    if bad.any():
        block = tuple(int(i) for i in np.argwhere(bad)[0])
        raise CheckpointError(f"{where}: block scale {float(s[block])!r} at block {list(block)} "
                              f"({int(bad.sum())} bad); scales must be finite and positive")


def _check_finite(array: np.ndarray, where: str) -> None:
    """NaN/Inf scan on the raw bits, in slices so that a 2.5 GB table needs no float copy."""
    if array.dtype == ml_dtypes.float8_e4m3fn:
        bits, mask, special = array.reshape(-1).view(np.uint8), 0x7F, 0x7F  # e4m3fn: only NaN, S.1111.111
    elif array.dtype == ml_dtypes.bfloat16:
        bits, mask, special = array.reshape(-1).view(np.uint16), 0x7F80, 0x7F80  # exponent all ones
    else:
        bits, mask, special = array.reshape(-1).view(np.uint32), 0x7F800000, 0x7F800000
    step = SCAN_CHUNK // bits.itemsize
    for start in range(0, bits.size, step):
        chunk = bits[start:start + step]
        hits = np.flatnonzero((chunk & mask) == special)
        if hits.size:
            index = np.unravel_index(start + int(hits[0]), array.shape)
            raise CheckpointError(f"{where}: non-finite value at {[int(i) for i in index]}")
