"""The executable specification: Qwen3.5 in NumPy, with the oracle's or the engine's rounding points."""

from .model import KVCache, ReferenceModel, Session, StepOutput
from .numerics import Mode

__all__ = ["KVCache", "Mode", "ReferenceModel", "Session", "StepOutput"]
