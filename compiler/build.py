"""The compiler driver: config -> Program, pass by pass."""

from __future__ import annotations

import time

from isa import Program
from megakernel.config import ModelConfig

from .allocate import allocate
from .assemble import assemble
from .dependencies import add_dependencies
from .lowering import lower as lower_forward
from .partition import partition

DEFAULT_CAPACITY = 4096


def lower(config: ModelConfig, rows: int = 1, sms: int = 132, capacity: int = DEFAULT_CAPACITY,
          debug_logits: bool = False) -> Program:
    """The target forward over `rows` tokens as a Program for `sms` blocks (one per SM)."""
    t0 = time.perf_counter()
    low = lower_forward(config, rows, capacity, debug_logits)
    partition(low, config)
    offsets = allocate(low)
    meta = {"config": config.name, "rows": rows, "sms": sms, "capacity": capacity, "debug_logits": debug_logits}
    program = assemble(low, config, offsets, sms, meta)
    add_dependencies(program, sms)
    program.meta["compile_seconds"] = round(time.perf_counter() - t0, 3)
    return program
