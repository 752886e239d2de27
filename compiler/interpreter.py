"""CPU interpreter: executes a Program tile by tile with NumPy, honouring its waits.

Every block runs its tiles in program order (tiling.block_range); a scheduler picks, at each turn,
one block whose next tile's waits are satisfied, at random when fuzzing (`rng`), else in turn. A
split-K GEMV's row group is finished by the slice tile that lands last on its arrival counter (as on
the GPU: gemv_tile.cuh gemv_finish_last), which zeroes that counter. The
arena is one byte array laid out as the Program says, activations poisoned with NaN bytes, so a
read of a value nobody wrote, or of a reused region too early, shows in the results. Each tile may
touch only the rectangles its instruction declares (access.py): the interpreter checks every read
and write against them. The maths are the reference's op functions (engine mode), so results are
bit-identical to megakernel.reference in Mode.ENGINE.
"""

from __future__ import annotations

import numpy as np

from isa import GEMM_OPS, GEMV_OPS, NO_BUFFER, DType, Flag, Kind, Op, Program, operand_layout
from isa.opcodes import (
    CTRL_LANE,
    CTRL_PENDING,
    CTRL_POSITION,
    CTRL_ROWS,
    CTRL_SPECULATIVE,
    CTRL_STEP,
    CTRL_TOKENS_IN,
    CTRL_TOKENS_OUT,
    MAX_ROWS,
    control_base,
)
from megakernel.model import plan
from megakernel.errors import InputError
from megakernel.model.fp8 import BF16, E4M3
from megakernel.reference import gdn, ops
from megakernel.reference.numerics import F32, bf16
from megakernel.model.tensors import scale_name
from megakernel.model.weights import WeightSet

from .access import Access, accesses, gdn_head_columns
from .hb import signals, waits_of
from .tiling import (block_range, gdn_chunk_columns, gemm_tile, main_tile, merge_tile, params, prepare_tile, qkv_tile,
                     query_tile, row_groups, tile_meaning)

NUMPY = {DType.BF16: BF16, DType.F32: np.float32, DType.I32: np.int32}


# How a linear word's outputs leave it (Interpreter._linear_out).
_EPILOGUE = {Op.NORM_GEMV: "bf16", Op.MTP_FC: "bf16", Op.GEMM: "bf16", Op.NORM_GATE_UP: "swiglu",
             Op.GEMM_GATE_UP: "swiglu", Op.GEMV_RESIDUAL: "residual", Op.GEMM_RESIDUAL: "residual"}


class Deadlock(RuntimeError):
    pass


class AccessViolation(RuntimeError):
    pass


class _Tile:
    """The declared accesses of the running tile, and checked reads and writes."""

    def __init__(self, interp: Interpreter, index: int, stage: int, tile: int):
        self.interp, self.declared = interp, accesses(interp.program, index, stage, tile)
        self.where = f"instruction {index} stage {stage} tile {tile}"

    def _check(self, buf: int, r0: int, r1: int, c0: int, c1: int, write: bool) -> None:
        for a in self.declared:
            if a.buffer == buf and (a.write or not write) and a.r0 <= r0 and r1 <= a.r1 and a.c0 <= c0 and c1 <= a.c1:
                return
        raise AccessViolation(f"{self.where}: undeclared {'write' if write else 'read'} of "
                              f"{self.interp.program.buffers[buf].name}[{r0}:{r1}, {c0}:{c1}]")

    def read(self, buf: int, r0: int, r1: int, c0: int, c1: int, units: tuple[int, int] | None = None) -> np.ndarray:
        """units: (first, last + 1) in the buffer's declared column units when they are not columns."""
        self._check(buf, r0, r1, *(units or (c0, c1)), False)
        return self.interp.view(buf)[r0:r1, c0:c1].astype(np.float32 if self.interp.is_float(buf) else np.int64)

    def write(self, buf: int, r0: int, c0: int, values: np.ndarray, units: tuple[int, int] | None = None) -> None:
        values = np.atleast_2d(values)
        r1, c1 = r0 + values.shape[0], c0 + values.shape[1]
        self._check(buf, r0, r1, *(units or (c0, c1)), True)
        view = self.interp.view(buf)
        view[r0:r1, c0:c1] = values.astype(view.dtype)

    def ring_rows(self, buf: int, rows: list[int], c0: int, c1: int, write_values: np.ndarray | None = None):
        """Conv-ring rows (positions modulo the ring), declared as all rows."""
        self._check(buf, 0, self.interp.program.buffers[buf].rows, c0, c1, write_values is not None)
        view = self.interp.view(buf)
        if write_values is None:
            return view[rows, c0:c1].astype(np.float32)
        view[rows, c0:c1] = write_values.astype(view.dtype)
        return None


class Interpreter:
    """`session_of`: run this Program on another interpreter's session (the KV caches, GDN states,
    rings, control block and hidden rows sit at the same arena offsets in every Program of a config);
    that session's arena must be at least this Program's size."""

    def __init__(self, program: Program, weights: WeightSet, session_of: Interpreter | None = None,
                 arena_bytes: int = 0):
        self.program, self.weights = program, weights
        if session_of is None:  # arena_bytes: room for larger Programs that will share this session
            self.arena = np.zeros(max(program.arena_bytes, arena_bytes), np.uint8)
        else:
            if program.session_layout() != session_of.program.session_layout():
                raise ValueError("the two Programs lay out their sessions differently")
            if len(session_of.arena) < program.arena_bytes:  # growing it would leave the owner's views dangling
                raise ValueError(f"this Program needs a {program.arena_bytes}-byte arena, the session has "
                                 f"{len(session_of.arena)}: create the session with the largest Program")
            self.arena = session_of.arena
        self._views = {}
        for i, b in enumerate(program.buffers):
            flat = np.frombuffer(self.arena, NUMPY[b.dtype], count=b.rows * b.cols, offset=b.offset)
            self._views[i] = flat.reshape(b.rows, b.cols)
        self._gemv_weights: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self._tasks = self._block_tasks()
        # each tile's waits, once: the scheduler asks for them every time it looks for a ready block
        self._waits = {task: waits_of(program, program.words[task[0]], task[1], task[2])
                       for tasks in self._tasks for task in tasks}
        self.counters = np.zeros(len(self.program.counters), np.int64)
        self.iteration = [0] * self.program.sms
        if session_of is None:
            self.reset()

    # --- state ----------------------------------------------------------------------------------
    def view(self, buf: int) -> np.ndarray:
        return self._views[buf]

    def is_float(self, buf: int) -> bool:
        return self.program.buffers[buf].dtype != DType.I32

    def reset(self) -> None:
        """A new session: state and control zeroed, activations poisoned, counters at zero."""
        for b in self.program.buffers:
            self.arena[b.offset:b.offset + b.nbytes] = 0xFF if b.kind == Kind.ACTIVATION else 0
        self.counters = np.zeros(len(self.program.counters), np.int64)
        self.iteration = [0] * self.program.sms

    @property
    def position(self) -> int:
        return int(self.view(0)[0, CTRL_POSITION])

    @property
    def mtp_position(self) -> int:
        return int(self.view(0)[0, CTRL_LANE + CTRL_POSITION])

    def _lane(self) -> int:
        return control_base(self.program.words[0].layer)

    def set_tokens(self, tokens: list[int], vocab: int | None = None) -> None:
        """The next pass's input tokens, in this Program's control lane (checked: ids in [0, vocab), by
        default the embedding table's rows, as the GPU session checks them)."""
        if len(tokens) != self.program.rows:
            raise ValueError(f"this program takes {self.program.rows} tokens per pass, got {len(tokens)}")
        vocab = self.weights.config.vocab_size if vocab is None else vocab
        bad = [t for t in tokens if not 0 <= t < vocab]
        if bad:
            raise InputError(f"token ids {bad} outside the vocabulary [0, {vocab})")
        first = self._lane() + CTRL_TOKENS_IN
        self.view(0)[0, first:first + len(tokens)] = tokens

    def set_prompt_chunk(self, tokens: list[int]) -> None:
        """A prompt program's next chunk: its tokens into prompt_tokens and its rows into the control block
        (checked: 1..chunk_rows ids in the vocabulary, room in the session, no speculative rows pending: the
        prompt words fold none)."""
        rows = self.program.words[0].chunk_rows
        if not 1 <= len(tokens) <= rows:
            raise InputError(f"a prompt chunk of {len(tokens)} tokens: this program takes 1..{rows}")
        vocab = self.weights.config.vocab_size
        bad = [t for t in tokens if not 0 <= t < vocab]
        if bad:
            raise InputError(f"token ids {bad[:8]} outside the vocabulary [0, {vocab})")
        capacity, position = self.program.meta["capacity"], int(self.view(0)[0, self._lane() + CTRL_POSITION])
        if position + len(tokens) > capacity:
            raise InputError(f"context_full: a {len(tokens)}-token chunk at position {position} passes the "
                             f"session capacity {capacity}")
        lane = self._lane()
        if self.view(0)[0, lane + CTRL_PENDING] or self.view(0)[0, lane + CTRL_SPECULATIVE]:
            raise InputError("a prompt chunk after a speculative pass: its pending rows must be folded first")
        self.buffer_view("prompt_tokens")[0, :len(tokens)] = tokens
        self.view(0)[0, lane + CTRL_ROWS] = len(tokens)

    def buffer_view(self, name: str) -> np.ndarray:
        return self.view(next(i for i, b in enumerate(self.program.buffers) if b.name == name))

    def tokens_out(self) -> list[int]:
        first = self._lane() + CTRL_TOKENS_OUT
        return self.view(0)[0, first:first + self.program.rows].tolist()

    def buffer(self, name: str) -> np.ndarray:
        index = next(i for i, b in enumerate(self.program.buffers) if b.name == name)
        return self.view(index).astype(np.float32 if self.is_float(index) else np.int64)

    # --- scheduling -----------------------------------------------------------------------------
    def _block_tasks(self) -> list[list[tuple[int, int, int]]]:
        tasks: list[list[tuple[int, int, int]]] = [[] for _ in range(self.program.sms)]
        for i, w in enumerate(self.program.words):
            for b in range(self.program.sms):
                tasks[b] += [(i, 0, t) for t in block_range(w.tiles, self.program.sms, b)]
        return tasks

    def _ready(self, block: int, task: tuple[int, int, int]) -> bool:
        t = self.iteration[block]
        return all(self.counters[c] >= expected * (t + 1 - lag) for c, expected, lag in self._waits[task])

    def run(self, steps: int = 1, rng: np.random.Generator | None = None) -> None:
        """Every block runs the program `steps` times; rng picks among ready blocks (fuzzing)."""
        position = [0] * self.program.sms
        left = [steps] * self.program.sms
        for b, tasks in enumerate(self._tasks):
            if not tasks:  # no tile of any word falls to this block (a small model on many SMs): its steps are done
                left[b] = 0
                self.iteration[b] += steps
        turn = 0
        while True:
            active = [b for b in range(self.program.sms) if left[b]]
            if not active:
                return
            ready = [b for b in active if self._ready(b, self._tasks[b][position[b]])]
            if not ready:
                stuck = {b: self._tasks[b][position[b]] for b in active}
                raise Deadlock(f"no block can proceed; next tasks (instruction, stage, tile): {stuck}")
            if rng is not None:
                block = ready[int(rng.integers(len(ready)))]
            else:
                block = ready[turn % len(ready)]
                turn += 1
            i, stage, tile = self._tasks[block][position[block]]
            self._execute(i, stage, tile)
            w = self.program.words[i]
            c = signals(self.program, w, stage, tile)
            if c is not None:
                self.counters[c] += 1
            if w.arrival_count and self.counters[c] == w.k_slices:  # the group's last slice finishes it
                self.counters[c] = 0
                group = c - w.arrival_base
                self._execute(i, 1, group)
                done = signals(self.program, w, 1, group)
                if done is not None:
                    self.counters[done] += 1
            position[block] += 1
            if position[block] == len(self._tasks[block]):
                position[block] = 0
                left[block] -= 1
                self.iteration[block] += 1

    # --- ops --------------------------------------------------------------------------------------
    def _execute(self, index: int, stage: int, tile: int) -> None:
        w = self.program.words[index]
        ctx = _Tile(self, index, stage, tile)
        if w.opcode in GEMV_OPS:
            self._gemv(ctx, index, w, stage, tile)
        elif w.opcode in GEMM_OPS:
            self._gemm(ctx, w, tile)
        else:
            getattr(self, "_" + w.opcode.name.lower())(ctx, w, tile)

    def _weight(self, entry: int) -> np.ndarray:
        return self.weights[self.program.weights[entry].name]

    def _blocked(self, entry: int) -> tuple[np.ndarray, np.ndarray | None]:
        """A GEMV weight as float32 [rows, k-blocks, 128] and its scales per row [rows, k-blocks]."""
        if entry not in self._gemv_weights:
            e = self.program.weights[entry]
            w = self.weights[e.name]
            blocks = w.astype(np.float32).reshape(e.rows, -1, plan.K_BLOCK)
            scale = None
            if w.dtype == E4M3:
                s = self.weights[scale_name(e.name)].astype(np.float32)
                scale = np.repeat(s, plan.ROW_BLOCK, axis=0)[:e.rows]
            self._gemv_weights[entry] = (blocks, scale)
        return self._gemv_weights[entry]

    def _ctrl(self, ctx: _Tile, w, column: int) -> int:
        column += control_base(w.layer)
        return int(ctx.read(0, 0, 1, column, column + 1)[0, 0])

    def _gemv_input(self, ctx: _Tile, w, k0: int, k1: int) -> np.ndarray:
        """The GEMV's input rows over k-range [k0, k1): the prologue's output."""
        m, p = w.rows, params(w)
        if w.opcode in (Op.NORM_GEMV, Op.NORM_GEMV_QKV, Op.NORM_GATE_UP, Op.NORM_HEAD):
            return self._normed(ctx, w)[:, k0:k1]
        if w.opcode == Op.MTP_FC:
            first = control_base(w.layer) + CTRL_TOKENS_IN
            tokens = ctx.read(0, 0, 1, first, first + m)[0]
            e = self._rms_norm(self._weight(p["embed_weight"])[tokens].astype(np.float32),
                               self._weight(p["norm_embedding"]), p["eps"])
            hidden = ctx.read(w.buf_in, MAX_ROWS - m, MAX_ROWS, 0, w.k // 2)  # right-aligned rows
            h = self._rms_norm(hidden, self._weight(p["norm_hidden"]), p["eps"])
            return np.concatenate([e, h], axis=1)[:, k0:k1]  # the embedding half first
        return ctx.read(w.buf_in, 0, m, k0, k1)

    def _normed(self, ctx: _Tile, w) -> np.ndarray:
        """The RMSNorm prologue: the whole residual, normalised."""
        p = params(w)
        return self._rms_norm(ctx.read(w.buf_in, 0, w.rows, 0, w.k), self._weight(p["norm_weight"]), p["eps"])

    def _rms_norm(self, x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        """Every GEMV prologue's RMSNorm of whole residual rows, in one place: the GPU sums the squares in
        another order, and tests/gpu/per_word.py substitutes that order here to compare a word's GEMV
        with the GPU's from the same normalised input."""
        return ops.rms_norm_1p(x, weight, eps)

    def _slice_sums(self, ctx: _Tile, w, rg, segment: int, x: np.ndarray, b0: int, b1: int) -> np.ndarray:
        """fp32 [M, rows] of k-slice blocks [b0, b1) for the row group's rows of one weight segment."""
        lr0, lr1 = rg.local()
        if w.flags & Flag.WORKING_VOCAB:  # bf16 head rows gathered into the session, no scales
            k0, k1 = b0 * plan.K_BLOCK, b1 * plan.K_BLOCK
            wb, sc = ctx.read(w.buf_aux2, lr0, lr1, k0, k1).reshape(lr1 - lr0, -1, plan.K_BLOCK), None
        else:
            blocks, scale = self._blocked(w.weight_first + segment)
            wb = blocks[lr0:lr1, b0:b1]
            sc = None if scale is None else scale[lr0:lr1, b0:b1]
        return np.stack([ops.engine_slice_sum(wb, np.ascontiguousarray(row), sc) for row in x])

    def _gemv(self, ctx: _Tile, index: int, w, stage: int, tile: int) -> None:
        m, S = w.rows, w.k_slices
        gate_up = w.opcode == Op.NORM_GATE_UP
        if stage == 0:
            s, rg = main_tile(self.program, w, tile)
            if w.opcode == Op.NORM_HEAD and tile == 0 and w.buf_aux1 != NO_BUFFER:
                # the hidden the MTP head reads, right-aligned: the pass's last row is always row 7
                ctx.write(w.buf_aux1, MAX_ROWS - w.rows, 0, self._normed(ctx, w))
            b0, b1 = plan.slice_blocks(w.k, S, s)
            x = self._gemv_input(ctx, w, b0 * plan.K_BLOCK, b1 * plan.K_BLOCK)
            parts = [self._slice_sums(ctx, w, rg, seg, x, b0, b1) for seg in ((0, 1) if gate_up else (rg.segment,))]
            if S > 1:
                for k, part in enumerate(parts):
                    ctx.write(w.buf_scratch, s * m, k * w.n + rg.r0, part)
                return
            y = [ops.combine_slices([p]) for p in parts]
        else:
            rg = row_groups(self.program, w)[tile]
            halves = (0, 1) if gate_up else (0,)
            y = [ops.combine_slices([ctx.read(w.buf_scratch, s * m, (s + 1) * m, k * w.n + rg.r0, k * w.n + rg.r1)
                                     for s in range(S)]) for k in halves]
        self._epilogue(ctx, w, rg, y)

    def _epilogue(self, ctx: _Tile, w, rg, y: list[np.ndarray]) -> None:
        if w.opcode == Op.NORM_HEAD:
            self._head_epilogue(ctx, w, rg, y[0])
        elif w.opcode == Op.NORM_GEMV_QKV:
            self._qkv_epilogue(ctx, w, rg, bf16(y[0]))
        else:
            self._linear_out(ctx, w, rg, y, 0, w.rows)

    def _linear_out(self, ctx: _Tile, w, rg, y: list[np.ndarray], r0: int, r1: int) -> None:
        """A linear's rows [r0, r1) of its row group, by its epilogue (the GEMV family's and the prompt GEMMs'):
        bf16(y); bf16(bf16(silu(gate)) * up); bf16(x_in + bf16(y))."""
        kind = _EPILOGUE[w.opcode]
        if kind == "swiglu":
            out = ops.swiglu(bf16(y[0]), bf16(y[1]))
        elif kind == "residual":
            out = bf16(ctx.read(w.buf_aux0, r0, r1, rg.r0, rg.r1) + bf16(y[0]))
        else:
            out = bf16(y[0])
        ctx.write(w.buf_out, r0, rg.r0, out)

    def _head_epilogue(self, ctx: _Tile, w, rg, logits: np.ndarray) -> None:
        defined = params(w)["defined_vocab"]
        if w.flags & Flag.DEBUG_LOGITS:
            ctx.write(w.buf_aux0, 0, rg.r0, logits)
        cand = np.empty((w.rows, 2), np.int64)
        valid = min(rg.r1, defined) - rg.r0
        for m in range(w.rows):
            row = logits[m, :max(valid, 0)]
            if valid <= 0 or np.isnan(row).all():  # NaN never wins: no candidate
                cand[m] = (int(np.array(-np.inf, F32).view(np.int32)), -1)
            else:
                k = int(np.nanargmax(row))  # first maximum: the lowest id on ties
                cand[m] = (int(row[k].astype(F32).view(np.int32)), rg.r0 + k)
        ctx.write(w.buf_out, 0, 2 * rg.index, cand)

    def _qkv_epilogue(self, ctx: _Tile, w, rg, y: np.ndarray) -> None:
        p = params(w)
        hd = p["head_dim"]
        lr0, _ = rg.local()
        if rg.segment == 0 and (lr0 // hd) % 2 == 1:  # a head's output-gate half
            ctx.write(w.buf_aux0, 0, (lr0 // (2 * hd)) * hd, y)
            return
        if rg.segment == 2:  # v rows: straight into the cache
            pos = self._ctrl(ctx, w, CTRL_POSITION)
            ctx.write(w.buf_aux2, pos, (lr0 // hd) * hd, y)
            return
        pos = self._ctrl(ctx, w, CTRL_POSITION)
        x = self._norm_rope(y, p["q_norm_weight"] if rg.segment == 0 else p["k_norm_weight"], pos, p)
        if rg.segment == 0:
            ctx.write(w.buf_out, 0, (lr0 // (2 * hd)) * hd, x)
        else:
            ctx.write(w.buf_aux1, pos, (lr0 // hd) * hd, x)

    def _norm_rope(self, x: np.ndarray, norm: int, pos: int, p) -> np.ndarray:
        """One head's rows [m, head_dim] at positions pos.. : q_norm or k_norm (weight `norm`), then RoPE."""
        m, hd = x.shape
        x = ops.rms_norm_1p(x.reshape(m, 1, hd), self._weight(norm), p["eps"])
        cos, sin = ops.rope_tables(np.arange(pos, pos + m), p["rotary_dim"], p["rope_theta"])
        return ops.apply_rope(x, cos, sin).reshape(m, hd)

    def _embed(self, ctx: _Tile, w, tile: int) -> None:
        first = control_base(w.layer) + CTRL_TOKENS_IN
        self._embed_rows(ctx, w, tile, ctx.read(w.buf_in, 0, 1, first, first + w.rows)[0])

    def _embed_rows(self, ctx: _Tile, w, tile: int, tokens: np.ndarray) -> None:
        """The tile's columns of the tokens' embedding rows (EMBED and PROMPT_EMBED)."""
        c0, c1 = tile_meaning(self.program, w, 0, tile)["cols"]
        ctx.write(w.buf_out, 0, c0, self._weight(params(w)["embed_weight"])[tokens, c0:c1].astype(np.float32))

    def _gdn_core(self, ctx: _Tile, w, tile: int) -> None:
        """Fold the pending rows of the last speculative pass (raw inputs from the rings), then this
        pass's rows (outputs, through the gated norm); store the state after this pass's rows, or, in a
        speculative pass, after the pending rows only (docs/ISA.md "Speculative passes")."""
        p, j = params(w), tile
        m, dk, dv, hv = w.rows, p["key_dim"], p["value_dim"], p["value_heads"]
        per_key = hv // p["key_heads"]
        cols = gdn_head_columns(p, j)
        channels = [cols["q"], cols["k"], cols["v"]]
        pos = self._ctrl(ctx, w, CTRL_POSITION)
        pending, speculative = self._ctrl(ctx, w, CTRL_PENDING), self._ctrl(ctx, w, CTRL_SPECULATIVE)
        ring, gate_ring, R, K = w.buf_aux1, w.buf_aux2, p["ring"], p["conv_kernel"]
        taps = self._weight(p["conv_weight"])
        first = pos - pending  # rows [first, pos) are pending, [pos, pos + m) this pass's
        history = [ctx.ring_rows(ring, [(first - K + 1 + i) % R for i in range(K - 1 + pending)], c0, c1)
                   for c0, c1 in channels]
        mixed = [ctx.read(w.buf_in, 0, m, c0, c1) for c0, c1 in channels]
        convolved = []
        for (c0, c1), new, old in zip(channels, mixed, history, strict=True):
            window_rows = np.concatenate([old, new])  # positions first-K+1 .. pos+m-1
            out = np.empty((pending + m, c1 - c0), np.float32)
            for r in range(pending + m):
                out[r], _ = gdn.conv_step(window_rows[r + K - 1], window_rows[r:r + K - 1], taps[c0:c1])
            convolved.append(out)
        b_col = cols["b"][0]
        old_rows = [(first + r) % R for r in range(pending)]
        b = np.concatenate([ctx.ring_rows(gate_ring, old_rows, j, j + 1)[:, 0],
                            ctx.read(w.buf_in, 0, m, b_col, b_col + 1)[:, 0]])
        a = np.concatenate([ctx.ring_rows(gate_ring, old_rows, hv + j, hv + j + 1)[:, 0],
                            ctx.read(w.buf_in, 0, m, b_col + hv, b_col + hv + 1)[:, 0]])
        beta, g = gdn.gates(b, a, self._weight(p["a_log"])[j:j + 1], self._weight(p["dt_bias"])[j:j + 1])
        q, k = gdn.prepare_qk(convolved[0][:, None, :], convolved[1][:, None, :], 1)
        state = ctx.read(w.buf_aux0, j, j + 1, 0, dv * dk).reshape(dv, dk).T[None]  # [1, dk, dv]
        outs = np.empty((m, dv), np.float32)
        for r in range(pending + m):
            o, state = gdn.recurrent_step(state, q[r], k[r], convolved[2][r:r + 1], g[r:r + 1], beta[r:r + 1])
            if r == pending - 1 or (r == -1 + pending + m and not speculative):
                kept = state
            if r >= pending:
                outs[r - pending] = o[0]
        if pending or not speculative:
            ctx.write(w.buf_aux0, j, 0, kept[0].T.reshape(1, -1))
        z = ctx.read(w.buf_in, 0, m, *cols["z"])
        ctx.write(w.buf_out, 0, j * dv, ops.gated_rms_norm(bf16(outs), z, self._weight(p["norm_weight"]), p["eps"]))
        rows = [(pos + r) % R for r in range(m)]
        ctx.ring_rows(ring, rows, *channels[2], mixed[2])
        if j % per_key == 0:
            for (c0, c1), new in zip(channels[:2], mixed[:2], strict=True):
                ctx.ring_rows(ring, rows, c0, c1, new)
        if speculative:  # the gates a later re-fold of these rows needs
            ctx.ring_rows(gate_ring, rows, j, j + 1, ctx.read(w.buf_in, 0, m, b_col, b_col + 1))
            ctx.ring_rows(gate_ring, rows, hv + j, hv + j + 1, ctx.read(w.buf_in, 0, m, b_col + hv, b_col + hv + 1))

    def _attn_group(self, w, tile: int):
        p, t = params(w), tile_meaning(self.program, w, 0, tile)
        group = p["heads"] // p["kv_heads"]
        return p, t["kv_head"], t["partition"], group

    def _attn_scores(self, ctx: _Tile, w, tile: int) -> None:
        p, kv, part, group = self._attn_group(w, tile)
        m, hd, P = w.rows, p["head_dim"], p["partitions"]
        pos = self._ctrl(ctx, w, CTRL_POSITION)
        q = ctx.read(w.buf_in, 0, m, kv * group * hd, (kv + 1) * group * hd).reshape(m, group, hd)
        for r in range(m):
            lo, hi = plan.partition_bounds(pos + r + 1, part, P)
            keys = ctx.read(w.buf_aux0, lo, hi, kv * hd, (kv + 1) * hd)
            scores = ops.attention_scores(q[r], keys, p["scale"])
            mx, total = ops.partition_stats(scores)
            rows = [(kv * group + h) * m + r for h in range(group)]
            for h, row in enumerate(rows):
                if hi > lo:
                    ctx.write(w.buf_out, row, lo, scores[h:h + 1], units=(part, part + 1))
                ctx.write(w.buf_aux1, row, 2 * part, np.array([[mx[h], total[h]]], np.float32))

    def _attn_pv(self, ctx: _Tile, w, tile: int) -> None:
        p, kv, part, group = self._attn_group(w, tile)
        m, hd, P = w.rows, p["head_dim"], p["partitions"]
        pos = self._ctrl(ctx, w, CTRL_POSITION)
        for r in range(m):
            lo, hi = plan.partition_bounds(pos + r + 1, part, P)
            rows = [(kv * group + h) * m + r for h in range(group)]
            stats = np.stack([ctx.read(w.buf_aux1, row, row + 1, 0, 2 * P)[0].reshape(P, 2) for row in rows], axis=1)
            mx, total = ops.combine_stats(stats[:, :, 0], stats[:, :, 1])
            scores = np.stack([ctx.read(w.buf_in, row, row + 1, lo, hi, units=(part, part + 1))[0] for row in rows])
            values = ctx.read(w.buf_aux0, lo, hi, kv * hd, (kv + 1) * hd)
            out = ops.partition_output(scores, mx, total, values)
            for h, row in enumerate(rows):
                ctx.write(w.buf_out, row, part * hd, out[h:h + 1])

    def _attn_merge(self, ctx: _Tile, w, tile: int) -> None:
        p = params(w)
        m, hd, P, (h, c0, c1) = w.rows, p["head_dim"], p["partitions"], merge_tile(w, tile)
        parts = ctx.read(w.buf_in, h * m, (h + 1) * m, 0, P * hd).reshape(m, P, 1, hd)[..., c0:c1]
        gate = ctx.read(w.buf_aux0, 0, m, h * hd + c0, h * hd + c1)
        for r in range(m):
            o = ops.merge_partitions(parts[r])[0]
            ctx.write(w.buf_out, r, h * hd + c0, ops.output_gate(o, gate[r])[None])

    def _argmax(self, ctx: _Tile, w, tile: int) -> None:
        cand = ctx.read(w.buf_in, tile, tile + 1, 0, self.program.buffers[w.buf_in].cols)[0].reshape(-1, 2)
        values = cand[:, 0].astype(np.int32).view(F32)
        ids = cand[:, 1]
        valid = ids >= 0
        # The lowest id among the best; -1 when every candidate is empty (an engine error the host reports).
        token = int(ids[valid & (values == values[valid].max())].min()) if valid.any() else -1
        if w.flags & Flag.WORKING_VOCAB and token >= 0:  # a row of the working-vocabulary head: its id
            table = self.program.buffers[w.buf_aux0]
            token = int(ctx.read(w.buf_aux0, 0, 1, 0, table.cols)[0, token])
        ctx.write(0, 0, control_base(w.layer) + CTRL_TOKENS_OUT + tile, np.array([[token]]))

    def _handoff(self, ctx: _Tile, w, tile: int) -> None:
        base = control_base(w.layer)
        out = ctx.read(0, 0, 1, base + CTRL_TOKENS_OUT, base + CTRL_TOKENS_OUT + w.rows)[0]
        step, position = ctx.read(0, 0, 1, base + CTRL_STEP, base + CTRL_POSITION + 1)[0]
        ctx.write(0, 0, base + CTRL_STEP, np.array([[step + 1, position + w.rows]]))
        ctx.write(0, 0, base + CTRL_TOKENS_IN, np.array([[out[-1]]]))

    # --- the prompt program: rows [0, r) of the chunk, r from the control block -------------------------
    def _chunk(self, ctx: _Tile, w) -> tuple[int, int]:
        """(position of the chunk's first row, its rows r), from the word's control lane."""
        base = control_base(w.layer)
        pos, rows = ctx.read(0, 0, 1, base + CTRL_POSITION, base + CTRL_ROWS + 1)[0]
        return int(pos), int(rows)

    def _prompt_embed(self, ctx: _Tile, w, tile: int) -> None:
        self._embed_rows(ctx, w, tile, ctx.read(w.buf_in, 0, 1, 0, self._chunk(ctx, w)[1])[0])

    def _prepare_operand(self, ctx: _Tile, w, tile: int) -> None:
        """A prepare tile: its rows below r (normalised whole, for NORM_PREPARE and MTP_PREPARE) as the f16
        operand of its k-blocks (ops.f16_operand, a row at a time) in its 8-token group of the slabs
        (isa/operand_layout.py), rows past r zero; and the bf16 rows in slabs of their own when the GEMM has bf16
        weight segments. A tile of a token tile past the chunk writes nothing (the GEMM reads none of it)."""
        t, (r0, r1), (b0, b1) = prepare_tile(w, tile)
        r = self._chunk(ctx, w)[1]
        if t * plan.PROMPT_TOKEN_TILE >= r:
            return
        p, k0, k1, t1 = params(w), b0 * plan.K_BLOCK, b1 * plan.K_BLOCK, max(r0, min(r1, r))
        if t1 == r0:  # every row past r: zeros
            x = np.zeros((0, k1 - k0), np.float32)
        elif w.opcode == Op.NORM_PREPARE:
            x = self._rms_norm(ctx.read(w.buf_in, r0, t1, 0, w.n), self._weight(p["norm_weight"]), p["eps"])[:, k0:k1]
        elif w.opcode == Op.MTP_PREPARE:  # the embedding half first, as MTP_FC
            tokens = ctx.read(w.buf_aux0, 0, 1, r0, t1)[0]
            e = self._rms_norm(self._weight(p["embed_weight"])[tokens].astype(np.float32),
                               self._weight(p["norm_embedding"]), p["eps"])
            h = self._rms_norm(ctx.read(w.buf_in, r0, t1, 0, w.n // 2), self._weight(p["norm_hidden"]), p["eps"])
            x = np.concatenate([e, h], axis=1)[:, k0:k1]
        elif w.opcode == Op.GATED_PREPARE:  # the gated norm of each whole value head of the tile's columns
            dv = p["value_dim"]
            o = ctx.read(w.buf_in, r0, t1, k0, k1).reshape(t1 - r0, -1, dv)
            z = ctx.read(w.buf_aux0, r0, t1, p["z_column"] + k0, p["z_column"] + k1).reshape(t1 - r0, -1, dv)
            x = ops.gated_rms_norm(o, z, self._weight(p["norm_weight"]), p["eps"]).reshape(t1 - r0, k1 - k0)
        else:
            x = ctx.read(w.buf_in, r0, t1, k0, k1)
        x16, unscale = np.zeros((r1 - r0, k1 - k0), np.float32), np.zeros((r1 - r0, b1 - b0), np.float32)
        for i, row in enumerate(x):  # rows past r stay zero
            x16[i], unscale[i] = ops.f16_operand(row)
        at = (t * (w.n // plan.K_BLOCK) + b0, r0 - t * plan.PROMPT_TOKEN_TILE)  # first slab, row in its token tile
        self._write_groups(ctx, w.buf_out, at, x16, unscale, np.float16)
        if w.buf_aux1 != NO_BUFFER:
            raw, ones = np.zeros_like(x16), np.zeros_like(unscale)  # unscales 1 for the rows below r, 0 past
            raw[:len(x)], ones[:len(x)] = x, 1.0
            self._write_groups(ctx, w.buf_aux1, at, raw, ones, BF16)

    _norm_prepare = _prepare = _mtp_prepare = _gated_prepare = _prepare_operand

    @staticmethod
    def _write_groups(ctx: _Tile, buf: int, at: tuple[int, int], x: np.ndarray, unscale: np.ndarray, dtype) -> None:
        """Whole 8-token groups of rows (x, unscale) at (first slab, row in its token tile) -> their words of the
        slabs (isa/operand_layout.py group_columns)."""
        values, unscales = operand_layout.group_slab_words(x, unscale, dtype)
        (v0, _), (u0, _) = operand_layout.group_columns(at[1], at[1] + len(x))
        ctx.write(buf, at[0], v0, values)
        ctx.write(buf, at[0], u0, unscales)

    def _slabs(self, ctx: _Tile, buf: int, first: int, blocks: int, dtype) -> tuple[np.ndarray, np.ndarray]:
        words = ctx.read(buf, first, first + blocks, 0, self.program.buffers[buf].cols).astype(np.int32)
        x, unscale = operand_layout.from_slabs(words.view(np.uint8).reshape(1, blocks, -1), dtype)
        return x.astype(np.float32), unscale

    def _gemm(self, ctx: _Tile, w, tile: int) -> None:
        """A prompt GEMM tile: its row group over its token rows below r, from the operand slabs, each row the
        reference's Linear in one k-slice (plan.PROMPT_SLICES) with the fused promotion, then the decode GEMV's
        epilogue."""
        rg, (t0, t1) = gemm_tile(self.program, w, tile)
        t1 = min(t1, self._chunk(ctx, w)[1])
        if t1 <= t0:
            return
        blocks = w.k // plan.K_BLOCK
        first = t0 // plan.PROMPT_TOKEN_TILE * blocks
        x16, unscale = self._slabs(ctx, w.buf_in, first, blocks, np.float16)
        xb = self._slabs(ctx, w.buf_aux1, first, blocks, BF16)[0] if w.buf_aux1 != NO_BUFFER else None
        lr0, lr1 = rg.local()
        y = []
        for seg in (0, 1) if w.opcode == Op.GEMM_GATE_UP else (rg.segment,):
            weight, scale = self._blocked(w.weight_first + seg)
            wb = weight[lr0:lr1]
            if scale is None:  # bf16 weights multiply the bf16 rows, as decode's GEMV
                sums = [ops.slice_sum(ops.block_partials(wb, xb[m]), None) for m in range(t1 - t0)]
            else:
                sc = scale[lr0:lr1]
                sums = [ops.slice_sum(ops.block_partials(wb, x16[m]), sc, unscale[m], fused=True)
                        for m in range(t1 - t0)]
            y.append(ops.combine_slices([np.stack(sums)]))
        self._linear_out(ctx, w, rg, y, t0, t1)

    def _prompt_qkv(self, ctx: _Tile, w, tile: int) -> None:
        p, (head, (r0, r1)) = params(w), qkv_tile(w, tile)
        pos, r = self._chunk(ctx, w)
        r1 = min(r1, r)
        if r1 <= r0:
            return
        hd, heads = p["head_dim"], p["heads"]
        if head < heads:  # per head [query | gate]
            raw = ctx.read(w.buf_in, r0, r1, 2 * head * hd, 2 * (head + 1) * hd)
            ctx.write(w.buf_out, r0, head * hd, self._norm_rope(raw[:, :hd], p["q_norm_weight"], pos + r0, p))
            ctx.write(w.buf_aux0, r0, head * hd, raw[:, hd:])
            return
        kv, q_rows, kv_dim = head - heads, 2 * heads * hd, p["kv_heads"] * hd
        k = ctx.read(w.buf_in, r0, r1, q_rows + kv * hd, q_rows + (kv + 1) * hd)
        v = ctx.read(w.buf_in, r0, r1, q_rows + kv_dim + kv * hd, q_rows + kv_dim + (kv + 1) * hd)
        ctx.write(w.buf_aux1, pos + r0, kv * hd, self._norm_rope(k, p["k_norm_weight"], pos + r0, p))
        ctx.write(w.buf_aux2, pos + r0, kv * hd, v)

    def _attn_causal(self, ctx: _Tile, w, tile: int) -> None:
        p = params(w)
        h, (r0, r1) = query_tile(w, tile)
        pos, r = self._chunk(ctx, w)
        hd, group = p["head_dim"], p["heads"] // p["kv_heads"]
        kv, cols = h // group, (h * hd, (h + 1) * hd)
        for i in range(r0, min(r1, r)):
            # the KV head's whole group of queries: the reference's batch shape, whose matmuls give its bits
            q = ctx.read(w.buf_in, i, i + 1, kv * group * hd, (kv + 1) * group * hd).reshape(group, hd)
            keys = ctx.read(w.buf_aux0, 0, pos + i + 1, kv * hd, (kv + 1) * hd)[:, None, :]
            values = ctx.read(w.buf_aux1, 0, pos + i + 1, kv * hd, (kv + 1) * hd)[:, None, :]
            o = ops.attend_tiled(q, keys, values, p["scale"], p["key_tile"])[h - kv * group].reshape(1, -1)
            ctx.write(w.buf_out, i, cols[0], ops.output_gate(o, ctx.read(w.buf_aux2, i, i + 1, *cols)))

    def _prompt_conv(self, ctx: _Tile, w, tile: int) -> None:
        """The conv over the chunk's rows for a tile of channels; the ring keeps the last K - 1 raw rows."""
        p = params(w)
        c0, c1 = tile_meaning(self.program, w, 0, tile)["cols"]
        pos, r = self._chunk(ctx, w)
        R, K = p["ring"], p["conv_kernel"]
        history = ctx.ring_rows(w.buf_aux1, [(pos - K + 1 + i) % R for i in range(K - 1)], c0, c1)
        mixed = ctx.read(w.buf_in, 0, r, c0, c1)
        window = np.concatenate([history, mixed])  # positions pos - K + 1 .. pos + r - 1
        taps = self._weight(p["conv_weight"])[c0:c1]
        out = np.empty((r, c1 - c0), np.float32)
        for i in range(r):
            out[i], _ = gdn.conv_step(window[i + K - 1], window[i:i + K - 1], taps)
        ctx.write(w.buf_out, 0, c0, out)
        kept = range(max(0, r - (K - 1)), r)
        ctx.ring_rows(w.buf_aux1, [(pos + i) % R for i in kept], c0, c1, mixed[kept.start:])

    def _gdn_chunk(self, ctx: _Tile, w, tile: int) -> None:
        """Value head j = tile / split over the chunk: the reference's gates, q/k preparation and WY form on the
        whole head (its bits), of which the tile keeps its value columns [v0, v1): their state and bf16 o."""
        p, j, (v0, v1) = params(w), tile // plan.PROMPT_GDN_SPLIT, gdn_chunk_columns(w, tile)
        if v1 <= v0:
            return
        pos, r = self._chunk(ctx, w)
        cols, dk, dv = gdn_head_columns(p, j), p["key_dim"], p["value_dim"]
        v_cols = (cols["v"][0] + v0, cols["v"][0] + v1)
        q, k = (ctx.read(w.buf_in, 0, r, *cols[n])[:, None, :] for n in "qk")
        v = np.zeros((r, 1, dv), np.float32)
        v[:, 0, v0:v1] = ctx.read(w.buf_in, 0, r, *v_cols)  # the other columns never reach this tile's
        b, a = (ctx.read(w.buf_aux1, 0, r, *cols[n]) for n in "ba")
        beta, g = gdn.gates(b[:, 0], a[:, 0], self._weight(p["a_log"])[j:j + 1], self._weight(p["dt_bias"])[j:j + 1])
        q, k = gdn.prepare_qk(q, k, 1)
        state = np.zeros((1, dk, dv), np.float32)
        state[0, :, v0:v1] = ctx.read(w.buf_aux0, j, j + 1, v0 * dk, v1 * dk).reshape(v1 - v0, dk).T
        o, state = gdn.chunked(state, q, k, v, g[:, None], beta[:, None], pos)
        ctx.write(w.buf_aux0, j, v0 * dk, state[0, :, v0:v1].T.reshape(1, -1))
        ctx.write(w.buf_out, 0, j * dv + v0, o[:, 0, v0:v1])

    def _prompt_norm(self, ctx: _Tile, w, tile: int) -> None:
        r0, r1 = tile_meaning(self.program, w, 0, tile)["rows"]
        r1 = min(r1, self._chunk(ctx, w)[1])
        if r1 > r0:
            p = params(w)
            ctx.write(w.buf_out, r0, 0, self._rms_norm(ctx.read(w.buf_in, r0, r1, 0, w.n),
                                                       self._weight(p["norm_weight"]), p["eps"]))

    def _prompt_advance(self, ctx: _Tile, w, tile: int) -> None:
        pos, r = self._chunk(ctx, w)
        ctx.write(0, 0, control_base(w.layer) + CTRL_POSITION, np.array([[pos + r]]))

    # --- session state, in the reference's layout (for comparisons) --------------------------------
    def conv_state(self, layer: int, kernel: int) -> np.ndarray:
        ring = self.buffer(f"L{layer}.conv_ring")
        pos = self.position
        return ring[[(pos - kernel + 1 + i) % len(ring) for i in range(kernel - 1)]]

    def ssm_state(self, layer: int, key_dim: int) -> np.ndarray:
        s = self.buffer(f"L{layer}.ssm")
        return s.reshape(s.shape[0], -1, key_dim).transpose(0, 2, 1)  # [Hv, dv, dk] -> [Hv, dk, dv]


__all__ = ["Access", "AccessViolation", "Deadlock", "Interpreter"]
