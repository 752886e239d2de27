"""Helpers for tests that build small checkpoints and break them in one precise way."""

import dataclasses
import json
import os

from safetensors.numpy import save_file

from megakernel.model.checkpoint import INDEX_FILE, SafetensorsFile
from megakernel.model.config import preset


def micro_config():
    """tiny with a 2,048-row vocabulary: every structural feature, ~1 % of the bytes."""
    return dataclasses.replace(preset("tiny"), vocab_size=2048, defined_vocab=2048, name="micro")


def shard_of(checkpoint_dir, tensor_name):
    index = os.path.join(checkpoint_dir, INDEX_FILE)
    if not os.path.exists(index):
        return os.path.join(checkpoint_dir, "model.safetensors")
    with open(index) as f:
        return os.path.join(checkpoint_dir, json.load(f)["weight_map"][tensor_name])


def rewrite_shard(path, mutate):
    """Read every tensor of a shard, let ``mutate(dict)`` change the dict, write the shard back."""
    f = SafetensorsFile(path)
    tensors = {name: f.array(name).copy() for name in f.entries}
    del f
    mutate(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


def edit_json(path, mutate):
    with open(path) as f:
        obj = json.load(f)
    mutate(obj)
    with open(path, "w") as f:
        json.dump(obj, f)
