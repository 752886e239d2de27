"""One instruction word on the GPU against the CPU interpreter, from the same arena (tests/gpu).

The GPU session is loaded with the interpreter's arena, the word's write-only activation outputs
poisoned first (so an output the GPU fails to write cannot match); the word runs on both sides; then
the whole arena is compared: every buffer the word declares it writes within the op tolerance, every
other byte (other buffers, padding between them) exactly, so a stray write anywhere shows.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from compiler.access import accesses
from isa import DType, Kind, Op, Program
from isa.opcodes import CTRL_POSITION
from isa.operand_layout import SLAB_BYTES, from_slabs
from megakernel.model.plan import K_BLOCK
from megakernel.model.tensors import scale_name, tensor_specs

import device_order


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """bf16 bit patterns -> distance in units in the last place (monotone integer mapping)."""
    def key(x):
        x = x.astype(np.int32)
        return np.where(x & 0x8000, 0x8000 - x, x + 0x8000)
    return np.abs(key(a) - key(b))


# How far from the interpreter's a rare bf16 element may be, as a fraction of the buffer's largest value: one
# ulp of the largest, for an output one rounding away from fp32 sums run in another order; 2^-6 for
# ATTN_CAUSAL's gated output, where one score's bf16 rounding going the other way (its 256-dim dot product in
# another order: BLAS's shapes against the tensor core's steps) moves every output of its row by that key's
# share. Measured on the CPU at position 2,950 (D70): one score of 2,968 flipped one ulp moved an output 1.2 %,
# 0.43 % of the buffer's largest value; the kernel run on the CPU there agrees with a float64 evaluation at the
# same rounding points.
FAR = {Op.ATTN_CAUSAL: 2.0 ** -6}

# Words whose operand slabs hold values through a transcendental (GATED_PREPARE: silu's expf, which may differ
# from NumPy's exp in the last bit and so round a bf16 value one ulp the other way: one pair of the slabs on the
# H200 at position 2,950, s44): their slabs are compared as the values they encode (x16 x unscale: the bf16 row
# value exactly) under the bf16 rule, not bit for bit; every other prepare word's slabs stay exact.
SLAB_VALUES = {Op.GATED_PREPARE}


def compare_bf16(name: str, g: np.ndarray, c: np.ndarray, far_fraction: float) -> str | None:
    """bf16 bit patterns (uint16) from the GPU and the interpreter: None if within the op tolerance."""
    nan_g, nan_c = np.isnan(g.view(ml_dtypes.bfloat16)), np.isnan(c.view(ml_dtypes.bfloat16))
    if (nan_g != nan_c).any():
        return f"{name}: NaN pattern differs ({nan_g.sum()} vs {nan_c.sum()})"
    # within 2 ulps, except where a result is small next to the buffer's scale: a sum whose fp32 order
    # differs can round an intermediate bf16 (a GEMV's y before the residual add) one ulp the other way,
    # and cancellation then shows it as several ulps of the result. Such elements must be rare (one of a
    # small buffer: a tiny-model row has 256) and within one bf16 ulp of the buffer's largest value (FAR).
    d = ulps(g, c)[~nan_c]
    if d.size == 0:
        return None
    gf, cf = (x.view(ml_dtypes.bfloat16).astype(np.float32)[~nan_c] for x in (g, c))
    far = (d > 2) & (np.abs(gf - cf) > np.abs(cf).max() * far_fraction)
    rare = (d > 2).sum() <= max(1, 1e-3 * d.size)
    return None if not far.any() and rare else \
        f"{name}: {int(d.max())} ulps, {int((d > 2).sum())} beyond 2 ulps, {int(far.sum())} beyond " \
        f"{far_fraction:.3g} of max"


def slab_values(data: np.ndarray, name: str) -> np.ndarray:
    """An operand buffer's slabs (rows of SLAB_BYTES) -> the bf16 values they encode, as uint16 bits."""
    x16, unscale = from_slabs(np.ascontiguousarray(data).view(np.uint8).reshape(-1, 1, SLAB_BYTES),
                              ml_dtypes.bfloat16 if name.endswith(".operand_bf16") else np.float16)
    values = x16.astype(np.float32) * np.repeat(unscale, K_BLOCK, axis=1)
    return values.astype(ml_dtypes.bfloat16).view(np.uint16)


def compare(program: Program, name: str, gpu: np.ndarray, cpu: np.ndarray, far_fraction: float = 2.0 ** -8,
            as_slab_values: bool = False) -> str | None:
    """None if the GPU buffer matches the interpreter's within the op tolerance, else a description;
    `as_slab_values`: an operand buffer compared by the values it encodes (SLAB_VALUES)."""
    b = next(b for b in program.buffers if b.name == name)
    if as_slab_values and name.endswith((".operand", ".operand_bf16")):
        return compare_bf16(name, slab_values(gpu, name), slab_values(cpu, name), far_fraction)
    if b.dtype == DType.BF16:
        return compare_bf16(name, gpu.view(np.uint16), cpu.view(np.uint16), far_fraction)
    if b.dtype == DType.F32:
        g, c = gpu.view(np.float32), cpu.view(np.float32)
        if (np.isnan(g) != np.isnan(c)).any():
            return f"{name}: NaN pattern differs"
        ok = ~np.isnan(c)
        scale = max(float(np.abs(c[ok & np.isfinite(c)]).max(initial=0)), 1e-30)
        with np.errstate(invalid="ignore"):
            errs = np.abs(np.where(np.isfinite(c), g - c, 0))[ok] / scale
        err = errs.max(initial=0)
        inf_ok = np.array_equal(g[~np.isfinite(c) & ok], c[~np.isfinite(c) & ok])
        if name.endswith("softmax_stats") or name.endswith("attn_partial"):
            # sums of exp over bf16 scores: a score rounded one bf16 ulp the other way (its fp32 dot product
            # in another order) moves its exp term by up to ~2^-8 x |score|; P.V over bf16 probabilities: a
            # probability exp(s - max) / sum rounded one bf16 ulp the other way (the device's expf and NumPy's
            # exp may differ in the last bit) moves its term by 2^-8 of it. Rare, and within 1e-2
            rare = (errs > 1e-4).sum() <= max(1, 1e-3 * errs.size)
            return None if err < 1e-2 and rare and inf_ok else f"{name}: relative error {err:.3g}"
        return None if err < 1e-4 and inf_ok else f"{name}: relative error {err:.3g}"
    g, c = gpu.view(np.int32), cpu.view(np.int32)
    if name.endswith("head_candidates"):  # (fp32 value bits, id) pairs: ids may differ on near-ties only
        gv, cv = g[:, 0::2].view(np.float32), c[:, 0::2].view(np.float32)
        close = np.isclose(gv, cv, rtol=1e-4, atol=1e-4) | (gv == cv)
        same_id = g[:, 1::2] == c[:, 1::2]
        return None if close.all() and same_id.mean() > 0.99 else f"{name}: candidates differ"
    return None if np.array_equal(g, c) else f"{name}: int32 values differ at {np.argwhere(g != c)[:5].tolist()}"


def word_accesses(program: Program, i: int):
    w = program.words[i]
    return [a for stage in ((0, 1) if w.arrival_count else (0,)) for t in range(w.arrival_count if stage else w.tiles)
            for a in accesses(program, i, stage, t)]


def poison_write_only(arena: np.ndarray, program: Program, i: int) -> None:
    """NaN bytes (int32 -1) over every activation region the word declares it writes, in buffers it does not
    also read (state buffers are updated in place at run-time positions). Applied to the interpreter's arena
    before the GPU copies it, so elements neither side writes stay equal and an element the GPU fails to
    write cannot match."""
    word = word_accesses(program, i)
    read = {a.buffer for a in word if not a.write}
    for a in word:
        b = program.buffers[a.buffer]
        if a.write and a.buffer not in read and b.kind == Kind.ACTIVATION:
            size = b.dtype.size
            rows = arena[b.offset:b.offset + b.nbytes].reshape(b.rows, b.cols * size)
            rows[a.r0:a.r1, a.c0 * size:a.c1 * size] = 0xFF


def interpret_word(interp, program: Program, i: int) -> None:
    """Every tile of word i on the CPU interpreter, in order, then its split-K finishes (no waits: one word
    alone)."""
    w = program.words[i]
    for stage in (0, 1) if w.arrival_count else (0,):
        for tile in range(w.arrival_count if stage else w.tiles):
            interp._execute(i, stage, tile)


def diff_arena(program: Program, i: int, gpu: np.ndarray, cpu: np.ndarray) -> list[str]:
    """Word i's problems: its written buffers beyond the op tolerance, and any other byte that differs."""
    if gpu.shape != cpu.shape:
        return [f"arenas of {gpu.size} and {cpu.size} bytes"]
    written = sorted({a.buffer for a in word_accesses(program, i) if a.write})
    problems = []
    untouched = np.ones(gpu.size, bool)
    for buf in written:
        b = program.buffers[buf]
        lo, hi = b.offset, b.offset + b.nbytes
        untouched[lo:hi] = False
        problem = compare(program, b.name, gpu[lo:hi].reshape(b.rows, -1), cpu[lo:hi].reshape(b.rows, -1),
                          FAR.get(program.words[i].opcode, 2.0 ** -8), program.words[i].opcode in SLAB_VALUES)
        if problem:
            problems.append(problem)
    stray = np.flatnonzero((gpu != cpu) & untouched)
    if stray.size:
        problems.append(f"{stray.size} bytes the word does not declare were written, first in "
                        f"{sorted({owner(program, int(x)) for x in stray[:1000]})}")
    return problems


def owner(program: Program, byte: int) -> str:
    for b in program.buffers:
        if b.offset <= byte < b.offset + b.nbytes:
            return b.name
    return f"padding at byte {byte}"


def check_word(interp, runner, program: Program, i: int) -> list[str]:
    """Word i on the GPU and on the interpreter from the interpreter's arena (its outputs poisoned); the
    interpreter's arena moves on with its own result. The interpreter's GEMV prologues normalise in the
    device's summation order (tests/device_order.py), so both sides multiply the same bf16 rows."""
    poison_write_only(interp.arena, program, i)
    runner.session.load(interp.arena)
    runner.run_word(i)
    interp._rms_norm = device_order.rms_norm_1p
    try:
        interpret_word(interp, program, i)
    finally:
        del interp._rms_norm
    w = program.words[i]
    return [f"word {i} {w.opcode.name} (layer {w.layer}): {p}"
            for p in diff_arena(program, i, runner.session.arena.get(), interp.arena)]


def randomise_session(interp, program, rng, position: int):
    """Random data in every float state buffer (GDN states, conv rings, KV caches, hidden rows) and the
    position: each device function then sees inputs no model run would produce."""
    for i, b in enumerate(program.buffers):
        if b.kind == Kind.STATE:
            view = interp.view(i)
            scale = 0.05 if b.dtype == DType.F32 else 1.0  # GDN state magnitudes stay in their normal range
            view[...] = (rng.standard_normal(view.shape) * scale).astype(view.dtype)
    interp.view(0)[0, CTRL_POSITION] = position


def interpreter_at(program, weights, position: int, tokens: list[int], seed: int = 0):
    """The interpreter of prompt program `program` on a random session (randomise_session) at `position` (the
    program's own control lane), the chunk's `tokens` set: where a prompt word's check starts."""
    from compiler.interpreter import Interpreter
    from isa.opcodes import control_base

    interp = Interpreter(program, weights)
    randomise_session(interp, program, np.random.default_rng(seed), position)
    interp.view(0)[0, control_base(program.words[0].layer) + CTRL_POSITION] = position
    interp.set_prompt_chunk(tokens)
    return interp


def mtp_history(weights, target, tokens: list[int], prepare=lambda base: None):
    """The target Program's interpreter after an 8-row target pass over tokens[:8] and an 8-row MTP pass over
    tokens[1:9] (hidden rows, MTP cache rows, the MTP lane's position): the session an MTP draft Program's words
    are checked from (interpreters of the draft Program share it: session_of). `prepare(base)` runs first (a
    working vocabulary's table)."""
    from compiler import lower_mtp
    from compiler.interpreter import Interpreter

    base = Interpreter(target, weights)
    prepare(base)
    base.set_tokens(tokens[:8])
    base.run(1)
    prefill = Interpreter(lower_mtp(weights.config, rows=8, sms=target.sms, capacity=target.meta["capacity"],
                                    debug_logits=True), weights, session_of=base)
    prefill.set_tokens(tokens[1:9])
    prefill.run(1)
    return base


HISTORY_TOKENS = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 248000, 17, 1, 60, 61, 62, 63]


def start_pass(runner, config) -> None:
    """Two passes of the runner's Program on the GPU (a non-zero position, GDN states, KV rows), then the
    next pass's tokens set: the pass the checks walk word by word."""
    rows = runner.program.rows
    for step in range(2):
        runner.session.set_tokens(HISTORY_TOKENS[step * rows:(step + 1) * rows], config.vocab_size)
        runner.step()
    runner.session.set_tokens(HISTORY_TOKENS[-rows:], config.vocab_size)


class HostWeightsFromGpu(dict):
    """name -> host array of synthetic:<preset>:<seed>, each tensor made on the GPU (the bytes of
    synthetic.synthesize) when the interpreter first asks for it: the 27B's 30 GB never sit on the host,
    only the tensors of the words a test samples."""

    def __init__(self, config, seed: int = 0):
        super().__init__()
        self.specs = {s.name: s for s in tensor_specs(config) if not s.is_scale}
        self.weight_of_scale = {scale_name(n): n for n, s in self.specs.items() if s.is_fp8}
        self.seed = seed

    def __missing__(self, name: str) -> np.ndarray:
        from megakernel.runtime.gpu_synthetic import synthesize_on_host

        spec = self.specs[self.weight_of_scale.get(name, name)]
        self.update(synthesize_on_host(spec, self.seed))  # (its few float64-made tensors: the CPU generator's)
        return self[name]
