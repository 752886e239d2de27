"""Resolve a model argument: a checkpoint directory or ``synthetic:<preset>[:seed]``."""

from __future__ import annotations

import os

from .checkpoint import load_checkpoint
from .config import ModelConfig, load_config
from ..errors import ConfigError
from .synthetic import parse_synthetic
from .synthetic_cache import cached_synthetic_weights
from .weights import WeightSet

DEFAULT_MODEL = "synthetic:tiny"


def model_config(model: str) -> ModelConfig:
    """The configuration alone: no weights are read or generated."""
    synthetic = parse_synthetic(model)
    if synthetic:
        return synthetic[0]
    _require_dir(model)
    return load_config(model)


def open_weights(model: str) -> WeightSet:
    synthetic = parse_synthetic(model)
    if synthetic:
        config, seed = synthetic
        return cached_synthetic_weights(config, seed)
    _require_dir(model)
    return load_checkpoint(model)


def _require_dir(model: str) -> None:
    if not os.path.isdir(model):
        raise ConfigError(f"model {model!r} is neither a checkpoint directory nor synthetic:<preset>[:seed]")
