"""Small synthetic weight sets kept on disk, so that a command on `synthetic:tiny` starts in a fraction of
a second instead of regenerating ~270 MB (docs/DECISIONS.md D27).

The cache is a checkpoint like any other, without tokenizer files (checkpoint_writer.save_checkpoint), under the tokenizer's cache
directory (`$MEGAKERNEL_CACHE`, else ~/.cache/megakernel), named by a digest of everything the bytes depend
on: the generator's source, the preset's config, the seed and the scale rule. It is read back through the
checkpoint loader (memory-mapped, validated), and a damaged entry is rebuilt. Presets above
MAX_CACHED_BYTES (the 27B) are never written; a cache directory that cannot be written is no error.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

from . import fp8, synthetic
from .checkpoint import load_checkpoint
from .checkpoint_writer import config_json, save_checkpoint
from .config import ModelConfig
from ..errors import CheckpointError, ConfigError
from .tensors import tensor_specs
from .tokenizer import cache_dir
from .weights import WeightSet

MAX_CACHED_BYTES = 1 << 30


def entry_path(c: ModelConfig, seed: int, pow2_scales: bool) -> pathlib.Path:
    """Where this weight set lives in the cache."""
    h = hashlib.sha256()
    for module in (synthetic, fp8):  # an edit to the generator is a new entry, whatever its version says
        h.update(pathlib.Path(module.__file__).read_bytes())
    h.update(json.dumps([config_json(c), seed, pow2_scales], sort_keys=True).encode())
    return cache_dir() / f"synthetic-{c.name}-{h.hexdigest()[:16]}"


def cached_synthetic_weights(c: ModelConfig, seed: int = 0, pow2_scales: bool = False) -> WeightSet:
    """synthetic.synthetic_weights(c, seed, pow2_scales), from the cache when it holds them."""
    source = f"synthetic:{c.name}:{seed}"
    if sum(spec.nbytes for spec in tensor_specs(c)) > MAX_CACHED_BYTES:
        return synthetic.synthetic_weights(c, seed, pow2_scales, source)
    path = entry_path(c, seed, pow2_scales)
    if path.is_dir():
        try:
            stored = load_checkpoint(str(path))
            return WeightSet(c, stored.tensors, source, stored.files)
        except (CheckpointError, ConfigError, OSError, ValueError):
            shutil.rmtree(path, ignore_errors=True)  # damaged: build it again
    weights = synthetic.synthetic_weights(c, seed, pow2_scales, source)
    try:
        save_checkpoint(weights, str(path), tokenizer=False)  # written aside, renamed into place: never half an entry
    except (CheckpointError, OSError):
        pass  # another process got there first, or the cache cannot be written: the weights are in memory
    return weights
