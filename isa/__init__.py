"""The instruction set: opcodes, the fixed-size instruction word, encode/decode, the Program container.

docs/ISA.md is the reference for CUDA authors; isa/word.py holds the one definition of the word layout.
"""

from .opcodes import CONTROL_BUFFER, GEMM_OPS, GEMV_OPS, NO_BUFFER, NO_LAYER, PREPARE_OPS, PROMPT_OPS, Flag, Op, WaitMode
from .program import COUNTER_STRIDE, BufferEntry, CounterEntry, DType, Kind, Program, WeightEntry
from .word import WORD_BYTES, WORD_U32, Wait, Word, bits_f32, decode, encode, f32_bits

__all__ = ["CONTROL_BUFFER", "COUNTER_STRIDE", "GEMM_OPS", "GEMV_OPS", "NO_BUFFER", "NO_LAYER", "PREPARE_OPS",
           "PROMPT_OPS", "WORD_BYTES", "WORD_U32", "BufferEntry", "CounterEntry", "DType", "Flag", "Kind", "Op",
           "Program", "Wait", "WaitMode", "WeightEntry", "Word", "bits_f32", "decode", "encode", "f32_bits"]
