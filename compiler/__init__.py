"""The instruction compiler: model config + rows M -> Program (lowering, partitioning, buffer allocation,
dependency counters), the validator that proves a Program race- and deadlock-free, and a CPU
interpreter that executes a Program with NumPy."""

from .build import DEFAULT_CAPACITY, lower, lower_mtp, lower_mtp_prompt, lower_prompt
from .validate import validate

__all__ = ["DEFAULT_CAPACITY", "lower", "lower_mtp", "lower_mtp_prompt", "lower_prompt", "validate"]
