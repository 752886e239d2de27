"""Qwen3.5-27B batch-1 decode: a persistent CUDA megakernel vs a CUDA graph of the same device functions.

The package by layer (docs/ARCHITECTURE.md): `model/` (configuration, checkpoints, synthetic weights, the
tokenizer, the engine's plan), `reference/` (the NumPy model), `runtime/` (the CUDA device functions and
the GPU builds' host side), `generation/`, `measurement/`, and `cli`. Exported here: model configuration,
checkpoint loading, weights by name, the real Qwen3.5 tokenizer. GPU backends import CuPy lazily.
"""

__version__ = "0.1.0"

from .model.config import ModelConfig, PRESETS, load_config, preset  # noqa: E402
from .errors import CheckpointError, ConfigError, InputError, MegakernelError  # noqa: E402
from .model.checkpoint import load_checkpoint  # noqa: E402
from .model.models import model_config, open_weights  # noqa: E402
from .model.synthetic import synthetic_weights  # noqa: E402
from .model.tokenizer import load_tokenizer  # noqa: E402

__all__ = [
    "ModelConfig", "PRESETS", "load_config", "preset", "load_checkpoint", "model_config", "open_weights",
    "synthetic_weights", "load_tokenizer", "MegakernelError", "ConfigError", "CheckpointError", "InputError",
]
