"""Write checkpoints in exactly the layout of the Qwen3.5 FP8 release (what ``checkpoint.py`` reads).

The directory is assembled under a temporary name and renamed into place at the end, so an
interrupted write never leaves something that looks like a checkpoint.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from typing import Callable

import numpy as np
from safetensors.numpy import save_file

from .checkpoint import INDEX_FILE, SINGLE_FILE
from .config import ModelConfig, quantization_config_dict
from ..errors import CheckpointError
from ..progress import bytes_bar
from .synthetic import GENERATOR_VERSION, synthesize
from .tensors import TensorSpec, modules_to_not_convert, tensor_specs
from .weights import WeightSet

DEFAULT_SHARD_BYTES = 4 << 30


def config_json(c: ModelConfig, extra: dict | None = None) -> dict:
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": c.text_config_dict(),
        "tie_word_embeddings": False,
        "quantization_config": quantization_config_dict(modules_to_not_convert(c)),
        **(extra or {}),
    }


def _plan_shards(specs: list[TensorSpec], shard_bytes: int) -> list[list[TensorSpec]]:
    """Group tensors in manifest order; an fp8 weight and its scale always share a shard."""
    shards: list[list[TensorSpec]] = [[]]
    size = 0
    for spec in specs:
        if shards[-1] and size + spec.nbytes > shard_bytes and not spec.is_scale:
            shards.append([])
            size = 0
        shards[-1].append(spec)
        size += spec.nbytes
    return shards


def _write(out_dir: str, c: ModelConfig, shard_bytes: int, produce: Callable[[list[TensorSpec]], dict[str, np.ndarray]],
           extra_config: dict | None, tokenizer: bool = True) -> None:
    from .tokenizer import write_tokenizer_files  # imported late: building the tokenizer is slow

    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise CheckpointError(f"{out_dir}: exists and is not an empty directory; refusing to overwrite")
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    # The name is chosen before the try and the folder made inside it: a signal raised as an exception
    # (cli.py: SIGTERM) right after mkdtemp's mkdir, before `tmp` was bound, left the folder behind.
    tmp = os.path.join(parent, f".partial-{secrets.token_hex(8)}")
    try:
        try:
            os.mkdir(tmp, 0o700)
        except FileExistsError:
            tmp = None  # not ours to remove
            raise
        shards = _plan_shards(tensor_specs(c), shard_bytes)
        names = [SINGLE_FILE] if len(shards) == 1 else [
            f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
        weight_map, total = {}, sum(s.nbytes for s in tensor_specs(c))
        with bytes_bar(total, f"writing {os.path.basename(out_dir)}") as bar:
            for file_name, shard in zip(names, shards):
                tensors = produce(shard)
                save_file(tensors, os.path.join(tmp, file_name), metadata={"format": "pt"})
                weight_map.update({name: file_name for name in tensors})
                bar.update(sum(t.nbytes for t in tensors.values()))
        if len(shards) > 1:
            _dump_json(os.path.join(tmp, INDEX_FILE), {"metadata": {"total_size": total}, "weight_map": weight_map})
        _dump_json(os.path.join(tmp, "config.json"), config_json(c, extra_config))
        _dump_json(os.path.join(tmp, "generation_config.json"),
                   {"bos_token_id": 248044, "pad_token_id": 248044, "eos_token_id": list(c.eos_token_ids)})
        if tokenizer:
            write_tokenizer_files(tmp)
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)  # empty, checked above
        os.replace(tmp, out_dir)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _dump_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_synthetic_checkpoint(out_dir: str, c: ModelConfig, seed: int = 0, pow2_scales: bool = False,
                               shard_bytes: int = DEFAULT_SHARD_BYTES) -> None:
    """Generate shard by shard, so peak memory is about one shard (the 27B preset is 30 GB)."""
    def produce(shard: list[TensorSpec]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for spec in shard:
            if not spec.is_scale:
                out.update(synthesize(spec, seed, pow2_scales))
        return out

    provenance = {"megakernel_synthetic": {"generator": GENERATOR_VERSION, "preset": c.name, "seed": seed,
                                           "pow2_scales": pow2_scales}}
    _write(out_dir, c, shard_bytes, produce, provenance)


def save_checkpoint(weights: WeightSet, out_dir: str, shard_bytes: int = DEFAULT_SHARD_BYTES,
                    rename: Callable[[str], str] | None = None, tokenizer: bool = True) -> None:
    """Write an in-memory WeightSet; ``rename`` maps canonical names to stored ones (e.g. flat naming);
    ``tokenizer``: with the tokenizer files (a checkpoint to hand out), or weights and configs only."""
    rename = rename or (lambda name: name)

    def produce(shard: list[TensorSpec]) -> dict[str, np.ndarray]:
        return {rename(s.name): np.ascontiguousarray(weights[s.name]) for s in shard}

    _write(out_dir, weights.config, shard_bytes, produce, None, tokenizer)
