"""Qwen3.5-27B batch-1 decode: a persistent CUDA megakernel vs a CUDA graph of the same device functions.

CPU-side parts importable everywhere: model configuration, checkpoint I/O (real loader and
synthetic writer), the real Qwen3.5 tokenizer. GPU backends import CuPy lazily.
"""

__version__ = "0.1.0"

from .config import ModelConfig, PRESETS, load_config, preset  # noqa: E402
from .errors import CheckpointError, ConfigError, InputError, MegakernelError  # noqa: E402
from .checkpoint import load_checkpoint  # noqa: E402
from .models import model_config, open_weights  # noqa: E402
from .synthetic import synthetic_weights  # noqa: E402
from .tokenizer import load_tokenizer  # noqa: E402

__all__ = [
    "ModelConfig", "PRESETS", "load_config", "preset", "load_checkpoint", "model_config", "open_weights",
    "synthetic_weights", "load_tokenizer", "MegakernelError", "ConfigError", "CheckpointError", "InputError",
]
