"""The GPU runtime's memory: a Program's weight arena and a session arena, in device memory.

* `DeviceWeights`: one allocation holding every weight-table entry of a Program at its offset, bytes
  exactly as stored (fp8 e4m3, bf16, fp32) and the fp8 block scales in the table's dtype; fp8 weights
  in the 16-row unit order the GEMV streams (weight_layout.py), everything else row-major. Filled from a
  WeightSet (a checkpoint, memory-mapped: one tensor at a time crosses to the GPU) or generated on the
  GPU for `synthetic:<preset>[:seed]` with bytes identical to the CPU generator (gpu_synthetic.py).
* `DeviceSession`: the arena of docs/ISA.md: control block, state (KV caches, GDN states, conv rings,
  hidden rows), activations. State and control start at zero; activations are poisoned with 0xFF bytes
  (NaN in bf16 and fp32) so that a read of a value nobody wrote shows.

CuPy is imported inside the functions: the package imports on machines without a GPU.
"""

from __future__ import annotations

import numpy as np

from isa import DType, Kind, Program
from isa.opcodes import (
    CTRL_LANE,
    CTRL_PENDING,
    CTRL_POSITION,
    CTRL_ROWS,
    CTRL_SPECULATIVE,
    CTRL_TOKENS_IN,
    CTRL_TOKENS_OUT,
    CTRL_WORDS,
    control_base,
)

from ..model import fp8
from ..model.config import ModelConfig, check_device_support
from ..errors import InputError
from ..progress import bytes_bar
from ..model.tensors import scale_name, tensor_specs
from .weight_layout import from_units, to_units
from ..model.weights import WeightSet

_STORED = {DType.FP8_E4M3: np.dtype(fp8.E4M3), DType.BF16: np.dtype(fp8.BF16), DType.F32: np.dtype(np.float32)}
_NUMPY_OF = {DType.BF16: np.uint16, DType.F32: np.float32, DType.I32: np.int32, DType.FP8_E4M3: np.uint8}


class DeviceWeights:
    """The weight arena of `program` (its weight table's offsets) in device memory."""

    def __init__(self, program: Program):
        import cupy

        self.table = tuple((w.name, w.offset, w.scale_offset, w.dtype, w.scale_dtype) for w in program.weights)
        self.data = cupy.zeros(max(program.weight_bytes, 1), dtype=cupy.uint8)

    def serves(self, program: Program) -> bool:
        """Whether `program` has the same weight table (e.g. the target forward for other M)."""
        return self.table == tuple((w.name, w.offset, w.scale_offset, w.dtype, w.scale_dtype)
                                   for w in program.weights)

    def tensor(self, program: Program, name: str):
        """Weight `name` of `program`'s table as a CuPy array [rows, cols] of its raw dtype (bf16 as uint16):
        a view, or for fp8 weights (stored in units) a row-major copy."""
        e = next(e for e in program.weights if e.name == name)
        nbytes = e.rows * e.cols * e.dtype.size
        raw = self.data[e.offset:e.offset + nbytes]
        if e.dtype == DType.FP8_E4M3:
            return from_units(raw, e.rows, e.cols)
        return raw.view(_NUMPY_OF[e.dtype]).reshape(e.rows, e.cols)

    def _put(self, offset: int, raw) -> None:
        import cupy

        flat = cupy.asarray(raw).view(cupy.uint8).ravel()
        self.data[offset:offset + flat.size] = flat

    def _put_weight(self, e, raw) -> None:
        """A weight's bytes at its offset; fp8 weights reordered into units on the GPU."""
        import cupy

        if e.dtype == DType.FP8_E4M3:
            raw = to_units(cupy.asarray(raw).view(cupy.uint8).reshape(e.rows, e.cols))
        self._put(e.offset, raw)

    @classmethod
    def from_weightset(cls, program: Program, weights: WeightSet, progress: bool = True) -> DeviceWeights:
        """Copy each tensor of the table from host memory (a memory-mapped checkpoint: one at a time)."""
        check_device_support(weights.config)
        dev = cls(program)
        with bytes_bar(program.weight_bytes, "weights to the GPU", progress) as bar:
            for e in program.weights:
                raw = host_weight_bytes(e, weights)
                dev._put_weight(e, raw)
                bar.update(raw.nbytes)
                if e.scale_dtype != DType.NONE:
                    dev._put(e.scale_offset, host_scale_bytes(e, weights))
        return dev

    @classmethod
    def synthetic(cls, program: Program, config: ModelConfig, seed: int = 0, pow2_scales: bool = False,
                  progress: bool = True) -> DeviceWeights:
        """Generate the table's tensors on the GPU (bytes of synthetic.synthesize) straight into the arena."""
        check_device_support(config)
        from .gpu_synthetic import synthesize_gpu

        dev = cls(program)
        specs = {s.name: s for s in tensor_specs(config)}
        with bytes_bar(program.weight_bytes, "weights on the GPU", progress) as bar:
            for e in program.weights:
                arrays = synthesize_gpu(specs[e.name], seed, pow2_scales)
                dev._put_weight(e, arrays[e.name])
                if e.scale_dtype != DType.NONE:
                    scales = arrays[scale_name(e.name)]
                    if e.scale_dtype != DType.BF16:
                        raise ValueError(f"{e.name}: synthetic scales are bf16, the program wants {e.scale_dtype.name}")
                    dev._put(e.scale_offset, scales)
                bar.update(arrays[e.name].nbytes)
                del arrays
        return dev


def host_weight_bytes(e, weights: WeightSet) -> np.ndarray:
    """Weight table entry `e`'s tensor of `weights` as its raw bytes, row-major ([rows, cols x size] uint8),
    refused when its dtype or size is not the table's."""
    a = weights[e.name]
    if a.dtype != _STORED[e.dtype] or a.size != e.rows * e.cols:
        raise ValueError(f"{e.name}: the program expects {e.dtype.name} [{e.rows}, {e.cols}], "
                         f"the weights hold {a.dtype} {a.shape}")
    return np.ascontiguousarray(a).view(np.uint8).reshape(e.rows, -1)


def host_scale_bytes(e, weights: WeightSet) -> np.ndarray:
    """Entry `e`'s block scales in the table's scale dtype, as bytes."""
    return _scales_as(weights[scale_name(e.name)], e.scale_dtype, e.name)


def _scales_as(scales: np.ndarray, dtype: DType, name: str) -> np.ndarray:
    """Block scales in the table's dtype; refused when the conversion would change a value."""
    want = _STORED[dtype]
    converted = scales.astype(want)
    if not np.array_equal(converted.astype(np.float32), scales.astype(np.float32)):
        raise ValueError(f"{scale_name(name)}: scales stored as {scales.dtype} are not exact in {want} "
                         f"(the program's scale dtype)")
    return np.ascontiguousarray(converted).view(np.uint8)


def _memset(arena, value: int, offset: int, nbytes: int) -> None:
    """Bytes [offset, offset + nbytes) of the device array `arena` set to `value`, on the current stream."""
    import cupy

    if nbytes:
        cupy.cuda.runtime.memsetAsync(arena.data.ptr + offset, value, nbytes, cupy.cuda.get_current_stream().ptr)


def _ranges(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted [start, end) spans with the touching or overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class SessionInputError(InputError, ValueError):
    """A request a session refuses (token ids outside the vocabulary, a pass past its capacity): one CLI
    error line like every InputError, and still the ValueError earlier callers caught."""


class DeviceSession:
    """One session's arena for `program` (and for other Programs of the same config and capacity, which
    lay out the session buffers identically: docs/ISA.md "Sessions"; create it with the Program whose
    arena is the largest, e.g. the widest pass, or give the largest arena size). Methods that depend on a
    Program's own buffers, rows or control lane take `program` (default: the one the session was created
    with)."""

    def __init__(self, program: Program, arena_bytes: int = 0, arena=None):
        """arena: device bytes to use instead of a new allocation (a slot of megakernel/runtime/session_pool.py)."""
        import cupy

        self.program = program  # arena_bytes: room for larger Programs that will share the session
        size = max(program.arena_bytes, arena_bytes)
        if arena is None:
            arena = cupy.zeros(size, dtype=cupy.uint8)
        elif arena.dtype != cupy.uint8 or arena.ndim != 1 or arena.size < size:
            raise ValueError(f"a session arena must be at least {size} uint8 device bytes")
        self.arena = arena
        self.capacity = int(program.meta.get("capacity", 0))
        self._layout = program.session_layout()
        self._written: dict[int, int] = {}  # control words as set_control last wrote them
        self.reset()

    def serves(self, program: Program) -> bool:
        """Whether `program` can run on this session: the same session buffers, an arena no larger."""
        return program.session_layout() == self._layout and program.arena_bytes <= self.arena.size

    def reset(self) -> None:
        """A new session: control and state zeroed, activations poisoned (0xFF bytes), by cudaMemsetAsync on
        the current stream, adjacent activation buffers as one range (CuPy's fill(0xFF) writes a byte a thread:
        the 27B's reset took 6 ms on an H100, D74)."""
        _memset(self.arena, 0, 0, self.arena.size)
        self._written = {}
        for start, end in _ranges(sorted((b.offset, b.offset + b.nbytes) for b in self.program.buffers
                                         if b.kind == Kind.ACTIVATION)):
            _memset(self.arena, 0xFF, start, end - start)

    def copy_from(self, other: DeviceSession) -> int:
        """Become a copy of `other` (a fork): control, GDN states, rings and hidden rows whole, each KV
        cache's rows below its lane's position (the rows above are never read before they are
        rewritten); device to device, nothing allocated, activations left as they are. Returns the bytes
        copied."""
        if other._layout != self._layout:
            raise ValueError("the two sessions lay out their buffers differently")
        control = other.control()
        positions = {0: int(control[CTRL_POSITION]), CTRL_LANE: int(control[CTRL_LANE + CTRL_POSITION])}
        copied = 0
        for b in self.program.buffers:
            if b.kind == Kind.ACTIVATION:
                continue
            nbytes = b.nbytes
            if b.name.endswith(("k_cache", "v_cache")):  # compiler/lowering.py session_buffers
                lane = CTRL_LANE if b.name.startswith("mtp.") else 0
                nbytes = min(b.rows, max(positions[lane], 0)) * b.cols * b.dtype.size
            self.arena[b.offset:b.offset + nbytes] = other.arena[b.offset:b.offset + nbytes]
            copied += nbytes
        self._written = {}
        return copied

    def load(self, arena_bytes: np.ndarray) -> None:
        """Replace the whole arena (tests: start from the CPU interpreter's state)."""
        self.arena.set(np.asarray(arena_bytes, dtype=np.uint8))
        self._written = {}

    def view(self, name: str, program: Program | None = None):
        """A buffer of `program` as a CuPy array of its raw dtype (bf16 as uint16 bits)."""
        b = next(b for b in (program or self.program).buffers if b.name == name)
        return self.arena[b.offset:b.offset + b.nbytes].view(_NUMPY_OF[b.dtype]).reshape(b.rows, b.cols)

    def control(self) -> np.ndarray:
        """The control block (int32[64]) copied to the host."""
        return self.arena[:4 * CTRL_WORDS].view(np.int32).get()

    def _lane(self, program: Program | None = None) -> int:
        """The first control word of `program`'s lane: the target's, or the MTP draft Programs' own."""
        return control_base((program or self.program).words[0].layer)

    def _set_word(self, word: int, value: int) -> None:
        self.arena[4 * word:4 * word + 4].set(np.asarray([value], np.int32).view(np.uint8))

    def set_control(self, word: int, value: int) -> None:
        """One word of the target lane (e.g. CTRL_PENDING), written before the next pass; a value it last
        wrote is not copied again (plain decoding rewrites the speculation words every pass)."""
        if self._written.get(word) != value:
            self._set_word(word, value)
            self._written[word] = value

    def set_tokens(self, tokens: list[int], vocab: int, program: Program | None = None) -> None:
        """The next pass's input tokens (checked: ids in [0, vocab), one per row of the Program)."""
        rows = (program or self.program).rows
        if len(tokens) != rows:
            raise ValueError(f"this program takes {rows} tokens per pass, got {len(tokens)}")
        bad = [t for t in tokens if not 0 <= t < vocab]
        if bad:
            raise SessionInputError(f"token ids {bad} outside the vocabulary [0, {vocab})")
        first = 4 * (self._lane(program) + CTRL_TOKENS_IN)
        self.arena[first:first + 4 * len(tokens)].set(np.asarray(tokens, np.int32).view(np.uint8))

    def set_prompt_chunk(self, tokens: list[int], vocab: int, program: Program) -> None:
        """A prompt program's next chunk (docs/ISA.md "Prompt programs"): its tokens into prompt_tokens and its
        rows r into the program's control lane (CTRL_ROWS). Checked as the CPU interpreter checks it: 1..the
        program's chunk rows ids in [0, vocab), room in the session for r more rows, no speculative rows
        pending (the prompt words fold none)."""
        rows = program.words[0].chunk_rows
        if not 1 <= len(tokens) <= rows:
            raise SessionInputError(f"a prompt chunk of {len(tokens)} tokens: this program takes 1..{rows}")
        bad = [t for t in tokens if not 0 <= t < vocab]
        if bad:
            raise SessionInputError(f"token ids {bad[:8]} outside the vocabulary [0, {vocab})")
        lane, control = self._lane(program), self.control()
        position = int(control[lane + CTRL_POSITION])
        if position + len(tokens) > self.capacity:
            raise SessionInputError(f"context_full: a {len(tokens)}-token chunk at position {position} passes "
                                    f"the session capacity {self.capacity}")
        if control[lane + CTRL_PENDING] or control[lane + CTRL_SPECULATIVE]:
            raise SessionInputError("a prompt chunk after a speculative pass: its pending rows must be folded first")
        self.view("prompt_tokens", program)[0, :len(tokens)].set(np.asarray(tokens, np.int32))
        self._set_word(lane + CTRL_ROWS, len(tokens))

    def set_position(self, position: int, program: Program | None = None) -> None:
        """Set the lane's position (benchmarks: time a pass at a given context without filling it; the MTP
        lane before a draft pass over rows of the target's)."""
        self._set_word(self._lane(program) + CTRL_POSITION, position)

    def lane_position(self, program: Program | None = None) -> int:
        return int(self.control()[self._lane(program) + CTRL_POSITION])

    @property
    def position(self) -> int:
        return self.lane_position()

    def tokens_out(self, rows: int | None = None, program: Program | None = None) -> list[int]:
        first = self._lane(program) + CTRL_TOKENS_OUT
        return self.control()[first:first + (rows or (program or self.program).rows)].tolist()

    def check_room(self, passes: int = 1, program: Program | None = None) -> None:
        """Refuse `passes` passes of `program` that would write KV rows past the session's capacity."""
        need = passes * (program or self.program).rows
        position = self.lane_position(program)
        if position + need > self.capacity:
            raise SessionInputError(f"context_full: position {position} + {need} rows exceeds the session "
                                    f"capacity {self.capacity}")

