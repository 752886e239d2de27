"""WeightSet: a validated model's tensors by canonical (FP8-release) name, plus its configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import ModelConfig
from .tensors import scale_name


@dataclass
class WeightSet:
    config: ModelConfig
    tensors: dict[str, np.ndarray]  # fp8 as float8_e4m3fn, bf16 as ml_dtypes.bfloat16; read-only views when loaded
    source: str  # checkpoint directory or "synthetic:<preset>:<seed>"
    files: list[object] = field(default_factory=list, repr=False)  # keeps memory maps alive

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def fp8(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(e4m3 weight [N, K], block scales [N/128, K/128] as stored: bf16 or fp32)."""
        return self.tensors[name], self.tensors[scale_name(name)]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())
