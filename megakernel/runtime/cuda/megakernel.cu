// The megakernel: one cooperatively launched, persistent kernel that interprets a compiled Program
// (docs/ISA.md "Execution model"). Block b of G walks every word in order, step after step; of each word
// it runs tiles [b T / G, (b + 1) T / G): a GEMV tile whose inputs are not met yet first primes its weight
// ring (weights depend on no word: they stream while the block waits, D49, D51); thread 0 waits until the
// tile's input counters reach their targets (acquire loads, bounded by the watchdog); the block runs the
// same tile function the discrete build launches (tiles.cuh) and signals the tile's counter with a release
// reduction. A split-K slice signals only if it landed last and so finished its row group (gemv_tile.cuh
// gemv_finish_last, D50). Completion counters are monotonic over a session: a wait in session step t with
// E arrivals per step and lag L needs E (t + 1 - L); `step_base` is the session's steps already run through
// this kernel.
//
// Watchdog: a wait that does not complete within `timeout_ns` writes one error record (first writer
// wins) and raises the abort flag; every block polls that flag while it waits, so all blocks leave
// (each writing where it stood) and the GPU stays usable. The host turns the record into an error
// naming the instruction and a stall report file.
//
// Tracing (the megakernel_trace entry only): per (step, word, block) the block's start, the
// time its waits were done, its end (%globaltimer ns) and its tile count. The plain entry compiles
// the trace code out.
//
// Built at run time by NVRTC (megakernel/runtime/persistent.py) and checked by nvcc in CI.

#include "tiles.cuh"

namespace mk {

constexpr int ERROR_WORDS = 8;      // flag, block, word, counter, expected, seen, 0, 0; then u64 clock
constexpr int ERROR_PLACES = ERROR_WORDS + 2;  // then per block: step + 1 (0: no record), word, tile, 0
constexpr int TRACE_WORDS = 8;      // u64 start, u64 ready, u64 end, u32 tiles, u32 wait polls

// The megakernel takes all the dynamic shared memory the device allows (persistent.py checks it holds the
// GEMV tiles' fixed part and least ring, the attention tiles' three key chunks and the GDN tile's
// GDN_MIN_SMEM: cuda_build.tile_smem_bytes).

struct Run {
    u8* arena;
    const u8* weights;
    const u8* program;
    u32* counters;
    u32* error;  // ERROR_WORDS u32 + u64 clock + 4 u32 per block; error[0] != 0: a watchdog fired (abort)
    u64* trace;  // [steps][words][G] x TRACE_WORDS / 2 u64, or nullptr
    int step_base, steps;
    u64 timeout_ns;
};

__device__ __forceinline__ u32 load_acquire(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void signal_release(u32* p) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}

__device__ __forceinline__ bool aborted(const u32* error) {
    return *reinterpret_cast<const volatile u32*>(error) != 0;
}

// The first output row/column a tile writes decides its completion counter (compiler/hb.py).
__device__ inline int first_output(const Ctx& ctx, const Word& w, int tile) {
    const int op = w.opcode();
    if (is_gemv(op)) return row_group(ctx, w, tile % row_group_count(ctx, w)).r0;
    if (op == OP_GDN_CORE) return tile * w.p(6);  // value head `tile`: columns from tile * value_dim
    return w.n() ? static_cast<int>(static_cast<long long>(tile) * w.n() / w.tiles()) : 0;
}

// The counter a finished tile increments, or -1 (a split-K slice that did not land last signals nothing:
// its arrival is counted in gemv_finish_last).
__device__ inline int signal_of(const Ctx& ctx, const Word& w, int tile) {
    if (w.signal_expected() == 0) return -1;
    const int count = w.signal_count();
    if (count <= 1) return w.signal_base();
    return w.signal_base() + static_cast<int>(static_cast<long long>(first_output(ctx, w, tile)) * count / w.n());
}

// Thread 0: wait until counter c reaches target. False if the watchdog fired (here or in another block).
__device__ inline bool wait_for(const Run& run, int c, u32 target, int word, u32& polls) {
    const u32* p = run.counters + static_cast<size_t>(c) * COUNTER_STRIDE;
    u32 seen = load_acquire(p);
    if (seen >= target) return true;
    const u64 start = global_ns();
    unsigned sleep = 32;
    while (true) {
        __nanosleep(sleep);
        sleep = min(sleep * 2, 256u);
        ++polls;
        seen = load_acquire(p);
        if (seen >= target) return true;
        if (aborted(run.error)) return false;
        const u64 now = global_ns();
        if (now - start > run.timeout_ns) {
            if (atomicCAS(run.error, 0u, 1u) == 0u) {
                volatile u32* e = run.error;
                e[1] = blockIdx.x, e[2] = word, e[3] = c, e[4] = target, e[5] = seen;
                *reinterpret_cast<volatile u64*>(run.error + ERROR_WORDS) = now;
                __threadfence();
            }
            return false;
        }
    }
}

// Thread 0: whether every wait of tile `tile` of a word in session step t is met already (one acquire load
// a counter, no waiting).
__device__ inline bool inputs_ready(const Run& run, const Ctx& ctx, const Word& w, int tile, int t) {
    for (int slot = 0; slot < WAIT_SLOTS; ++slot) {
        const Wait wt = w.wait(slot);
        if (wt.mode == WAIT_NONE) continue;
        const u32 target = static_cast<u32>(wt.expected) * static_cast<u32>(t + 1 - wt.lag);
        const int c0 = wt.mode == WAIT_SLICE ? wt.base + tile / row_group_count(ctx, w) : wt.base;
        const int c1 = wt.mode == WAIT_SLICE ? c0 + 1 : wt.base + wt.count;
        for (int c = c0; c < c1; ++c)
            if (load_acquire(run.counters + static_cast<size_t>(c) * COUNTER_STRIDE) < target) return false;
    }
    return true;
}

// Thread 0: every wait of tile `tile` of a word in session step t.
__device__ inline bool wait_tile(const Run& run, const Ctx& ctx, const Word& w, int word, int tile, int t, u32& polls) {
    for (int slot = 0; slot < WAIT_SLOTS; ++slot) {
        const Wait wt = w.wait(slot);
        if (wt.mode == WAIT_NONE) continue;
        const u32 target = static_cast<u32>(wt.expected) * static_cast<u32>(t + 1 - wt.lag);
        if (wt.mode == WAIT_SLICE) {
            if (!wait_for(run, wt.base + tile / row_group_count(ctx, w), target, word, polls)) return false;
        } else {
            for (int c = wt.base; c < wt.base + wt.count; ++c)
                if (!wait_for(run, c, target, word, polls)) return false;
        }
    }
    return true;
}

// GDN is called, not inlined: inlined next to the GEMV it pushes the kernel past 128 registers (spills);
// called, it is allocated on its own (docs/DECISIONS.md D16).
__device__ __noinline__ void run_gdn(const Ctx ctx, const Word w, int tile, u8* smem) {
    gdn_tile(ctx, w, tile, *reinterpret_cast<GdnSmem*>(smem), false);
}

// The attention tiles' tensor-core loops are called too.
__device__ __noinline__ void run_attn_scores(const Ctx ctx, const Word w, int tile, u8* smem) {
    attn_scores_tile(ctx, w, tile, smem);
}

__device__ __noinline__ void run_attn_pv(const Ctx ctx, const Word w, int tile, u8* smem) {
    attn_pv_tile(ctx, w, tile, smem);
}

// A GEMV tile's primed weights and its input rows (prologue, f16 operand) are called, not inlined, for the
// same reason; the passes stay inline.
__device__ __noinline__ void run_gemv_weights(const Ctx ctx, const Word w, int tile, u8* smem) {
    gemv_main_weights(ctx, w, tile, smem);
}

__device__ __noinline__ void run_gemv_input(const Ctx ctx, const Word w, int tile, u8* smem, bool primed) {
    gemv_main_input(ctx, w, tile, smem, primed);
}

// All threads: the tile (`primed`: a GEMV tile's ring primed before its wait); true when it signals its
// completion counter (a split-K slice only if it landed last).
__device__ __forceinline__ bool run_tile(const Ctx& ctx, const Word& w, int tile, u8* smem, u32* counters,
                                         bool primed) {
    switch (w.opcode()) {
        case OP_EMBED: embed_tile(ctx, w, tile); break;
        case OP_GDN_CORE: run_gdn(ctx, w, tile, smem); break;
        case OP_ATTN_SCORES: run_attn_scores(ctx, w, tile, smem); break;
        case OP_ATTN_PV: run_attn_pv(ctx, w, tile, smem); break;
        case OP_ATTN_MERGE: attn_merge_tile(ctx, w, tile); break;
        case OP_ARGMAX: argmax_tile(ctx, w, tile); break;
        case OP_HANDOFF: handoff_tile(ctx, w); break;
        default:  // the GEMV family
            run_gemv_input(ctx, w, tile, smem, primed);
            return gemv_main_passes(ctx, w, tile, smem, counters, primed);
    }
    return true;
}

// The block's place in the Program lives in shared memory and is re-read after every tile, so that no
// interpreter state is held in registers across a tile function (the GEMV needs ~110 of the 128).
struct Place {
    int step, word, tile, last, first;
};

template <bool TRACE>
__device__ inline void interpret(const Run& run) {
    extern __shared__ __align__(16) u8 smem[];
    __shared__ volatile Place at;
    __shared__ volatile int go, met, primes;
    __shared__ volatile u64 trace_start, trace_ready;
    __shared__ volatile u32 trace_polls;
    const int G = gridDim.x, b = blockIdx.x;
    if (threadIdx.x == 0) at.step = 0, at.word = -1, at.tile = 0, at.last = 0;
    __syncthreads();
    while (true) {
        if (threadIdx.x == 0) {  // advance to this block's next tile
            const Ctx ctx{run.arena, run.weights, run.program};
            int step = at.step, i = at.word, tile = at.tile + 1, last = at.last, first = at.first;
            while (tile >= last) {
                if (++i == ctx.n_words()) i = 0, ++step;
                if (step == run.steps) break;
                const Word v = ctx.word(i);
                const int T = v.opcode() == OP_NOP ? 0 : v.tiles();
                first = tile = static_cast<int>(static_cast<long long>(b) * T / G);
                last = static_cast<int>(static_cast<long long>(b + 1) * T / G);
            }
            at.step = step, at.word = i, at.tile = tile, at.last = last, at.first = first;
            // a GEMV tile primes its ring only if it will wait: a block that comes late to its word (its
            // inputs met) takes its rows first, as the graph's tiles do (D51)
            const bool gemv = step < run.steps && is_gemv(ctx.word(i).opcode());
            met = gemv && inputs_ready(run, ctx, ctx.word(i), tile, run.step_base + step);
            primes = gemv && !met;
            if (TRACE && step < run.steps && tile == first) trace_start = global_ns(), trace_polls = 0;
        }
        __syncthreads();
        if (at.step == run.steps) return;  // done
        if (primes) {  // a GEMV tile's weights depend on no word: they stream while thread 0 waits
            const Ctx ctx{run.arena, run.weights, run.program};
            run_gemv_weights(ctx, ctx.word(at.word), at.tile, smem);
        }
        if (threadIdx.x == 0) {  // wait for the tile's inputs
            const Ctx ctx{run.arena, run.weights, run.program};
            const int step = at.step, i = at.word, tile = at.tile;
            u32 polls = 0;
            go = met || wait_tile(run, ctx, ctx.word(i), i, tile, run.step_base + step, polls) ? 1 : 0;
            if (!go) {  // stopped by the watchdog: where this block stood, for the host's stall report
                volatile u32* place = run.error + ERROR_PLACES + 4 * b;
                place[0] = step + 1, place[1] = i, place[2] = tile;
            }
            if (TRACE) {
                trace_polls = trace_polls + polls;
                if (tile == at.first) trace_ready = global_ns();
            }
        }
        __syncthreads();
        if (go != 1) {  // the watchdog fired: every block leaves, its primed copies landed first
            copies_wait(0);
            return;
        }
        bool done;
        {
            const Ctx ctx{run.arena, run.weights, run.program};
            done = run_tile(ctx, ctx.word(at.word), at.tile, smem, run.counters, primes);
        }
        __syncthreads();  // the tile's writes are done (and its shared memory free)
        if (threadIdx.x == 0) {
            const Ctx ctx{run.arena, run.weights, run.program};
            const int c = done ? signal_of(ctx, ctx.word(at.word), at.tile) : -1;
            if (c >= 0) signal_release(run.counters + static_cast<size_t>(c) * COUNTER_STRIDE);
            if (TRACE && at.tile == at.last - 1) {
                u64* r = run.trace + (static_cast<size_t>(at.step) * ctx.n_words() + at.word) * G *
                                         (TRACE_WORDS / 2) + static_cast<size_t>(b) * (TRACE_WORDS / 2);
                r[0] = trace_start, r[1] = trace_ready, r[2] = global_ns();
                r[3] = (static_cast<u64>(trace_polls) << 32) | static_cast<u32>(at.last - at.first);
            }
        }
    }
}

}  // namespace mk

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1)
megakernel(unsigned char* arena, const unsigned char* weights, const unsigned char* program, unsigned int* counters,
           unsigned int* error, int step_base, int steps, unsigned long long timeout_ns) {
    mk::interpret<false>(mk::Run{arena, weights, program, counters, error, nullptr, step_base, steps, timeout_ns});
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1)
megakernel_trace(unsigned char* arena, const unsigned char* weights, const unsigned char* program,
                 unsigned int* counters, unsigned int* error, int step_base, int steps, unsigned long long timeout_ns,
                 unsigned long long* trace) {
    mk::interpret<true>(mk::Run{arena, weights, program, counters, error, trace, step_base, steps, timeout_ns});
}
