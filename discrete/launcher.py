"""The discrete build: a compiled Program run as one kernel launch per instruction, eagerly or replayed
from a CUDA graph captured once.

Launch i of a step runs every main tile of one word (grid = the word's tiles, block b = tile b), so
stream order gives every dependency the Program's counters encode; the counters themselves are the
megakernel's business. A split-K GEMV has no reduce launch: the slice that lands last finishes its row
group in the same launch (gemv_tile.cuh gemv_finish_last), counting arrivals in `self.arrivals`, which
every finished word leaves zero. Nothing a launch reads changes between steps except device memory (the
control block holds step, position and tokens), so the captured graph replays unchanged.
"""

from __future__ import annotations

from isa import COUNTER_STRIDE, GEMM_OPS, GEMV_OPS, Op, Program
from megakernel.runtime import cuda_build
from megakernel.model import plan
from megakernel.runtime.device import DeviceSession, DeviceWeights

from .dependent_launch import DependentLaunch
from .kernels import module
from .launch_program import launch_program

KERNEL_OF = {Op.EMBED: "tile_embed", Op.GDN_CORE: "tile_gdn", Op.ATTN_SCORES: "tile_attn_scores",
             Op.ATTN_PV: "tile_attn_pv", Op.ATTN_MERGE: "tile_attn_merge", Op.ARGMAX: "tile_argmax",
             Op.HANDOFF: "tile_handoff",
             # the prompt programs' words (prompt_ops.cuh, prompt_gdn.cuh, prompt_gemm.cuh; issue 21, D68)
             Op.PROMPT_EMBED: "tile_prompt_embed", Op.PROMPT_ADVANCE: "tile_prompt_advance",
             Op.PROMPT_NORM: "tile_prompt_norm", Op.NORM_PREPARE: "tile_prepare", Op.PREPARE: "tile_prepare",
             Op.MTP_PREPARE: "tile_prepare", Op.GEMM: "tile_gemm", Op.GEMM_GATE_UP: "tile_gemm",
             Op.GEMM_RESIDUAL: "tile_gemm", Op.PROMPT_QKV: "tile_prompt_qkv", Op.PROMPT_CONV: "tile_prompt_conv",
             Op.ATTN_CAUSAL: "tile_attn_causal", Op.GDN_CHUNK: "tile_gdn_chunk", Op.GATED_PREPARE: "tile_prepare"}
GEMV_KERNEL = "tile_gemv"
# kernels whose tiles take the dynamic shared memory the launcher gives them (beside their launch program)
WHOLE_SMEM_OPS = frozenset({Op.ATTN_SCORES, Op.ATTN_PV, Op.GDN_CORE, Op.PROMPT_NORM, Op.NORM_PREPARE, Op.PREPARE,
                            Op.MTP_PREPARE, Op.GDN_CHUNK, Op.GATED_PREPARE})


def launch_args(program: Program, index: int, arena, weights, arrivals, trace_slot: int = 0) -> tuple:
    """The kernel arguments of word `index`'s launch: the arena, the weights, its launch program (with
    `trace_slot`: experiments/graph_trace.py) and, for a GEMV word, the split-K arrival counters."""
    args = (arena, weights, launch_program(program, index, trace_slot))
    return args + (arrivals,) if program.words[index].opcode in GEMV_OPS else args


class DiscreteProgram:
    """`program` bound to device weights and a session: `step()` runs one pass eagerly, `replay()` runs it
    from the CUDA graph (captured on first use)."""

    def __init__(self, program: Program, weights: DeviceWeights, session: DeviceSession, overlap: bool = True):
        """`overlap`: a launch whose blocks hold an SM alone may start while the one before it runs, up to
        its kernel's wait for it (programmatic dependent launch, D40); False launches every kernel one after
        the other (for A/B)."""
        import cupy

        if not weights.serves(program):
            raise ValueError("the device weights were laid out for another Program's weight table")
        if not session.serves(program):
            raise ValueError("the session was laid out for another Program (session buffers or a smaller arena)")
        for w in program.words:
            if w.opcode not in KERNEL_OF and w.opcode not in GEMV_OPS and w.opcode != Op.NOP:
                raise ValueError(f"no discrete kernel for {w.opcode.name}")
            if w.opcode in GEMV_OPS and w.k % plan.K_BLOCK:
                raise ValueError(f"GEMV k = {w.k} is not a multiple of {plan.K_BLOCK}")
        self.program, self.weights, self.session = program, weights, session
        mod = module()
        # a launch's own program (launch_program.py) sits in the first bytes of a GEMV tile's dynamic shared
        # memory and in a static array of the other kernels': either way it is shared memory the tiles lack
        self.program_smem = cuda_build.launch_program_bytes()
        need, self.smem = cuda_build.tile_smem_bytes(program) + self.program_smem, cuda_build.max_dynamic_smem()
        if need > self.smem:
            raise ValueError(f"the tiles need {need} bytes of shared memory, the device offers {self.smem}")
        # Every kernel may take what the device offers less its static arrays as built (the launch program, and
        # the module's alignment of the dynamic region: an extern array aligned to 1 KB rounds every kernel's
        # static part up to 1 KB), for the kernels that take dynamic shared memory; a launch then asks for what
        # its word needs (below).
        for name in {GEMV_KERNEL} | {KERNEL_OF[op] for op in (*WHOLE_SMEM_OPS, Op.GEMM, Op.ATTN_CAUSAL)}:
            kernel = mod.get_function(name)
            kernel.max_dynamic_shared_size_bytes = self._room(kernel)
        # split-K arrivals, laid out as the megakernel's counters (one per row group at its arrival counter)
        self.arrivals = cupy.zeros(max(1, len(program.counters)) * COUNTER_STRIDE, dtype=cupy.uint32)
        self.threads = cuda_build.tile_threads()
        self.launches = []  # (word index, DependentLaunch)
        for i, w in enumerate(program.words):
            if w.opcode == Op.NOP:
                continue
            args = launch_args(program, i, self.session.arena, self.weights.data, self.arrivals)
            if w.opcode in GEMV_OPS:
                # one tile an SM with all the shared memory it may take: the deepest ring, primed before the
                # tile waits for the launch before it (kernels.cu tile_gemv; D57)
                kernel = mod.get_function(GEMV_KERNEL)
                smem = self._room(kernel)
            else:
                # the attention tiles stream keys or values through all they are given; GDN_CORE needs more than
                # a static array may hold (tile_smem_bytes covers it: kernels.cu); the GEMMs and ATTN_CAUSAL take
                # their rings' size (prompt_gemm.cuh, prompt_attention.cuh)
                kernel, need = mod.get_function(KERNEL_OF[w.opcode]), cuda_build.prompt_word_smem(w)
                if need > self._room(kernel):  # a prompt word's own need (0: a decode word)
                    raise ValueError(f"word {i} ({w.opcode.name}) needs {need} bytes of dynamic shared memory, "
                                     f"its kernel has {self._room(kernel)}")
                smem = self._room(kernel) if w.opcode in WHOLE_SMEM_OPS else 0
                if w.opcode in GEMM_OPS or w.opcode == Op.ATTN_CAUSAL:
                    smem = need
            block_smem = smem + kernel.shared_size_bytes
            threads = cuda_build.word_threads(w)
            overlaps = overlap and self._alone_on_sm(block_smem)
            launch = DependentLaunch(kernel, w.tiles, threads, smem, args, overlaps)
            self.launches.append((i, launch))
        self.graph = None

    def _room(self, kernel) -> int:
        """The dynamic shared memory `kernel` may take: the device's per-block opt-in less its static arrays."""
        return self.smem - kernel.shared_size_bytes

    @staticmethod
    def _alone_on_sm(block_smem: int) -> bool:
        """Whether a block of this much shared memory (dynamic and static) holds its SM alone, so that the
        launch may overlap the one before it. An overlapping launch's blocks are placed while the previous
        launch still holds the SMs; where two can share an SM that cost the 1k step 5.9 % (every launch
        overlapped), where they cannot it cost nothing (D40)."""
        return not cuda_build.two_share_an_sm(block_smem)

    @property
    def graph_nodes(self) -> int:
        return len(self.launches)

    def _launch(self, launch, stream: int | None = None) -> None:
        """One (word, DependentLaunch) of self.launches on `stream` (a CUstream; default the current one)."""
        import cupy

        launch[1].launch(cupy.cuda.get_current_stream().ptr if stream is None else stream)

    def launch_eager(self) -> None:
        """One pass, launch by launch, on the current stream; no host-side checks (benchmarks time this)."""
        import cupy

        stream = cupy.cuda.get_current_stream().ptr
        for launch in self.launches:
            self._launch(launch, stream)

    def run_word(self, index: int) -> None:
        """Word `index` alone (tests compare single instructions with the interpreter)."""
        for launch in self.launches:
            if launch[0] == index:
                self._launch(launch)

    def step(self) -> None:
        """One pass, eagerly (launch by launch) on the current stream."""
        self.session.check_room(1, self.program)
        self.launch_eager()

    def capture(self) -> None:
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                self.launch_eager()
            finally:
                self.graph = stream.end_capture()

    def launch_graph(self) -> None:
        """One pass from the CUDA graph (captured on first use), after the current stream's earlier work;
        no host-side checks (benchmarks time exactly this)."""
        import cupy

        if self.graph is None:
            self.capture()
        self.graph.launch(cupy.cuda.get_current_stream())

    def replay(self) -> None:
        """One pass from the CUDA graph, refused past the session's capacity."""
        self.session.check_room(1, self.program)
        self.launch_graph()


__all__ = ["DiscreteProgram", "KERNEL_OF", "launch_args"]
