"""Load a Hugging Face checkpoint directory of the Qwen3.5 FP8 release, validating every tensor first.

Layout: ``config.json`` plus ``model.safetensors`` or sharded ``model-*.safetensors`` with
``model.safetensors.index.json``. Tensor names: the release's ``model.language_model.*`` /
``lm_head.weight`` / ``mtp.*``, or the flat text-only ``model.*``.

Checkpoints are read only as safetensors and JSON: no pickle, no code execution. Each file is
mapped read-only and its header checked here first, so that each defect gets one clear line
(header length beyond the file or over 100 MB, header not UTF-8 / JSON / an object, an entry
without dtype, shape and data_offsets, offsets past the end of the file, offsets that disagree
with dtype x shape, overlapping tensors, bytes that belong to no tensor); the ``safetensors``
library then opens the file as a second check. The tensors are mapped, not copied: the library's
NumPy backend cannot return float8 arrays (it looks for ``numpy.float8_e4m3fn``) and copies what
it returns, so the data are read through the ``mmap`` at the offsets of the checked header.
Nothing is handed out until every expected tensor has passed (name, dtype, shape, finite values,
finite positive scales). Symlinks are followed (Hugging Face cache snapshots link into ``blobs/``).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from safetensors import SafetensorError, safe_open

from .config import ModelConfig, load_config
from ..errors import CheckpointError
from ..progress import bytes_bar
from .side_files import MAX_INDEX_BYTES, DuplicateKey, check_regular_file, no_duplicate_keys, read_json
from .tensors import (BF16, F8, F32, FLAT_TEXT_PREFIX, INIT_A_LOG, INIT_DT_BIAS, TEXT_PREFIX, TensorSpec,
                      tensor_specs)
from .weights import WeightSet

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

NUMPY_DTYPES = {F8: ml_dtypes.float8_e4m3fn, BF16: ml_dtypes.bfloat16, F32: np.float32}
# Dtypes accepted besides the release's own: fp32 scales (what transformers allocates) and fp32
# A_log / dt_bias (vLLM and SGLang keep them as fp32 parameters; docs/SPEC-qwen35.md section 8 leaves it open).
ALSO_ACCEPTED = {INIT_A_LOG: {F32}, INIT_DT_BIAS: {F32}, "scale": {F32}}
SCAN_CHUNK = 1 << 26  # bytes per slice when scanning payloads for NaN/Inf
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
# Bytes per element of the safetensors dtypes; a dtype not listed here is left to the library.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}


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
        check_regular_file(path, CheckpointError, "a safetensors file")
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < 8:
                    raise self._invalid(f"{size} bytes, shorter than the 8-byte header length")
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise CheckpointError(f"{path}: cannot be read ({e.strerror or e})") from None
        try:
            self.entries = self._check(size)
        except BaseException:
            self._map.close()
            raise

    def _check(self, size: int) -> dict[str, _Entry]:
        (header_len,) = struct.unpack_from("<Q", self._map, 0)
        if header_len > size - 8:
            raise self._invalid(f"header length field says {header_len} bytes, the file has {size - 8} after it")
        if header_len > MAX_HEADER_BYTES:
            raise self._invalid(f"header of {header_len} bytes is over the {MAX_HEADER_BYTES}-byte limit")
        entries = self._check_entries(self._parse_header(self._map[8:8 + header_len]), 8 + header_len, size)
        try:
            with safe_open(self.path, framework="np"):
                pass  # a second opinion: the library's own checks of header, offsets and file size
        except (SafetensorError, OSError) as e:
            raise self._invalid(f"safetensors: {' '.join(str(e).split())}") from None
        return entries

    def _invalid(self, reason: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: not a valid safetensors file: {reason}")

    def _parse_header(self, raw: bytes) -> dict:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._invalid(f"header is not UTF-8 (byte {e.start}: {e.reason})") from None
        try:
            header = json.loads(text, object_pairs_hook=no_duplicate_keys)
        except json.JSONDecodeError as e:
            raise self._invalid(f"header is not valid JSON ({e.msg} at byte {e.pos})") from None
        except DuplicateKey as e:
            raise self._invalid(f"header names {e} twice") from None
        except ValueError as e:  # e.g. an integer too long to convert
            raise self._invalid(f"header is not valid JSON ({e})") from None
        except RecursionError:
            raise self._invalid("header JSON is nested too deeply") from None
        if not isinstance(header, dict):
            raise self._invalid(f"header is a JSON {type(header).__name__}, expected an object")
        return header

    def _check_entries(self, header: dict, data_start: int, size: int) -> dict[str, _Entry]:
        metadata = header.get("__metadata__", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise self._invalid("__metadata__ is not an object of strings")
        data_len = size - data_start
        spans, entries = [], {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            where = f"tensor {name!r}"
            if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
                raise self._invalid(f"{where} is not an object with dtype, shape and data_offsets")
            dtype, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
            if not isinstance(dtype, str):
                raise self._invalid(f"{where}: dtype {dtype!r} is not a string")
            if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
                raise self._invalid(f"{where}: shape {shape!r} is not a list of non-negative integers")
            if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets)
                    or offsets[0] > offsets[1]):
                raise self._invalid(f"{where}: data_offsets {offsets!r} is not [begin, end] with 0 <= begin <= end")
            begin, end = offsets
            if end > data_len:
                raise self._invalid(f"{where}: data_offsets [{begin}, {end}] point past the end of the file "
                                    f"(the data section has {data_len} bytes)")
            if dtype in DTYPE_BYTES:
                nbytes = DTYPE_BYTES[dtype] * math.prod(shape)
                if nbytes != end - begin:
                    raise self._invalid(f"{where}: {dtype} {shape} takes {nbytes} bytes but data_offsets "
                                        f"[{begin}, {end}] span {end - begin}")
            spans.append((begin, end, name))
            entries[name] = _Entry(dtype, tuple(shape), data_start + begin, end - begin)
        covered = 0
        previous = None
        for begin, end, name in sorted(spans):
            if begin < covered:
                raise self._invalid(f"tensors {previous!r} and {name!r} overlap (bytes {begin}..{min(end, covered)})")
            if begin > covered:
                raise self._invalid(f"data bytes {covered}..{begin} belong to no tensor")
            covered, previous = end, name
        if covered != data_len:
            raise self._invalid(f"data bytes {covered}..{data_len} belong to no tensor")
        return entries

    def array(self, name: str) -> np.ndarray:
        e = self.entries[name]
        dtype = NUMPY_DTYPES[e.dtype]
        count = e.nbytes // np.dtype(dtype).itemsize
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=e.offset).reshape(e.shape)


def _is_count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _shard_map(checkpoint_dir: str) -> dict[str, str]:
    """Tensor name -> shard file name, from the index or from the single file."""
    index_path = os.path.join(checkpoint_dir, INDEX_FILE)
    if os.path.lexists(index_path):
        index = read_json(index_path, CheckpointError, MAX_INDEX_BYTES)
        if not isinstance(index, dict) or "weight_map" not in index:
            raise CheckpointError(f"{index_path}: malformed index (no weight_map object)")
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError(f"{index_path}: weight_map must map tensor names to file names")
        for file_name in set(weight_map.values()):
            if os.path.basename(file_name) != file_name or file_name in ("", ".", ".."):
                raise CheckpointError(f"{index_path}: shard name {file_name!r} is not a plain file name")
        return weight_map
    single = os.path.join(checkpoint_dir, SINGLE_FILE)
    if os.path.lexists(single):
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
    with bytes_bar(sum(s.nbytes for s in specs), "reading the checkpoint") as bar:
        for spec in specs:
            stored_name = canonical_to_stored.get(spec.name)
            if stored_name is None:
                raise CheckpointError(f"{checkpoint_dir}: missing tensor {_stored_form(spec.name, flat)!r} "
                                      f"({spec.dtype} {list(spec.shape)})")
            file_name = stored[stored_name]
            if file_name not in files:
                files[file_name] = SafetensorsFile(os.path.join(checkpoint_dir, file_name))
            tensors[spec.name] = _validated(files[file_name], stored_name, spec, check_payload)
            bar.update(spec.nbytes)
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
