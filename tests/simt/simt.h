// A CUDA thread block on the CPU, for checking the engine's CUDA-core tile functions without a GPU
// (tests/simt_runner.py): each thread of the block is a fiber on one OS thread (x86-64: a stack and a six-register
// switch, no system call), run in turn until
// it reaches a barrier (__syncthreads, __syncwarp, a shuffle), so the block's threads interleave only where
// the CUDA programming model lets them. A barrier some thread never reaches, or a shuffle whose warp is not
// whole, ends the run with a message instead of hanging.
//
// What it models beyond that: mma.sync m16n8k16 and ldmatrix x4 (warp-wide, below); async copies land at once.
// What it does not: wgmma, bulk tensor copies and mbarriers (the GEMMs are not run here), named barriers, the
// memory model beyond barriers, timing. Arithmetic is the host's IEEE fp32 (common.cuh
// MK_HOST_SIMT); expf and log1pf are glibc's, which may differ from CUDA's in the last bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static  // one block runs at a time
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define __noinline__ __attribute__((noinline))

struct SimtDim {
    unsigned x = 0, y = 0, z = 0;
};
inline SimtDim threadIdx, blockIdx, blockDim, gridDim;  // threadIdx is set to the running fiber's

namespace simt {

// A failure inside the block (a stalled barrier, a split warp): the run stops and reports it.
inline std::string failure;

// Dynamic shared memory: a window of host memory the runner gives; a shared-memory address (u32) is an offset
// into it, so the engine's async copies (gemv.cuh) become copies into the window.
inline unsigned char* smem_window = nullptr;
inline size_t smem_window_bytes = 0;

inline unsigned char* window_at(unsigned offset, size_t bytes) {
    if (offset + bytes > smem_window_bytes && failure.empty())
        failure = "an async copy to shared memory outside the dynamic window";
    return smem_window + offset;
}

// Saves the callee-saved registers on the running stack, stores its pointer in *from, continues on stack `to`.
extern "C" void simt_switch(void** from, void* to);
asm(R"(
    .text
    .p2align 4
    .hidden simt_switch
    .globl simt_switch
    .type simt_switch, @function
simt_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size simt_switch, .-simt_switch
)");

struct Fiber {
    void* sp = nullptr;
    bool done = false;
    int waits_on = 0;          // 0: runnable; 1: the block barrier; 2: its warp's barrier
    unsigned generation = 0;   // the barrier's generation it waits to pass
};

struct Block {
    int threads = 0, alive = 0, current = -1;
    std::vector<Fiber> fibers;
    void* scheduler = nullptr;
    std::function<void()> body;
    int block_arrived = 0;
    unsigned block_generation = 0;
    std::vector<int> warp_arrived, warp_alive;
    std::vector<unsigned> warp_generation;
    std::vector<uint64_t> exchange;  // a shuffle's values, a slot a thread
    std::vector<uint32_t> fragments;  // a warp-wide instruction's operands, FRAGMENT_WORDS a thread
};
constexpr int FRAGMENT_WORDS = 8;

inline Block* block = nullptr;

// The fibers' stacks, kept from block to block (a fresh 128 MB a block cost more in page faults than the run).
constexpr size_t STACK_BYTES = 256 * 1024;
inline std::vector<std::unique_ptr<char[]>> stacks;

inline void yield() {
    Fiber& f = block->fibers[block->current];
    simt_switch(&f.sp, block->scheduler);
}

[[noreturn]] inline void entry() {
    block->body();
    Fiber& f = block->fibers[block->current];
    f.done = true;
    --block->alive;
    --block->warp_alive[block->current / 32];
    // exited threads no longer hold up a barrier (as on the GPU since Volta)
    if (block->alive > 0 && block->block_arrived >= block->alive) {
        block->block_arrived = 0;
        ++block->block_generation;
    }
    const int w = block->current / 32;
    if (block->warp_alive[w] > 0 && block->warp_arrived[w] >= block->warp_alive[w]) {
        block->warp_arrived[w] = 0;
        ++block->warp_generation[w];
    }
    simt_switch(&f.sp, block->scheduler);
    __builtin_unreachable();  // a finished fiber is never resumed
}

inline void sync_block() {
    Fiber& f = block->fibers[block->current];
    f.waits_on = 1;
    f.generation = block->block_generation;
    if (++block->block_arrived >= block->alive) {
        block->block_arrived = 0;
        ++block->block_generation;
    }
    yield();
}

inline void sync_warp() {
    const int w = block->current / 32;
    Fiber& f = block->fibers[block->current];
    f.waits_on = 2;
    f.generation = block->warp_generation[w];
    if (++block->warp_arrived[w] >= block->warp_alive[w]) {
        block->warp_arrived[w] = 0;
        ++block->warp_generation[w];
    }
    yield();
}

inline bool runnable(int i) {
    const Fiber& f = block->fibers[i];
    if (f.done) return false;
    if (f.waits_on == 1) return block->block_generation != f.generation;
    if (f.waits_on == 2) return block->warp_generation[i / 32] != f.generation;
    return true;
}

// Runs `body` as a block of `threads` threads; false (and `failure` says why) if the block stalled.
inline bool run_block(int threads, const std::function<void()>& body, int block_index = 0, int grid = 1) {
    Block b;
    b.threads = b.alive = threads;
    b.fibers.resize(threads);
    b.body = body;
    b.warp_arrived.assign((threads + 31) / 32, 0);
    b.warp_generation.assign((threads + 31) / 32, 0);
    b.warp_alive.assign((threads + 31) / 32, 0);
    for (int i = 0; i < threads; ++i) ++b.warp_alive[i / 32];
    b.exchange.assign(threads, 0);
    b.fragments.assign(static_cast<size_t>(threads) * FRAGMENT_WORDS, 0);
    block = &b;
    blockIdx = {static_cast<unsigned>(block_index), 0, 0};
    blockDim = {static_cast<unsigned>(threads), 1, 1};
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    for (int i = 0; i < threads; ++i) {  // a new stack: six zero registers, then entry as the return address
        Fiber& f = b.fibers[i];
        if (static_cast<int>(stacks.size()) <= i) stacks.emplace_back(new char[STACK_BYTES]);
        uintptr_t top = (reinterpret_cast<uintptr_t>(stacks[i].get()) + STACK_BYTES) & ~uintptr_t(15);
        void** sp = reinterpret_cast<void**>(top);
        *--sp = nullptr;                                    // entry's own return address: never used
        *--sp = reinterpret_cast<void*>(&entry);
        for (int r = 0; r < 6; ++r) *--sp = nullptr;
        f.sp = sp;
    }
    bool ok = true;
    while (b.alive > 0) {
        bool progressed = false;
        for (int i = 0; i < threads; ++i) {
            if (!runnable(i)) continue;
            b.fibers[i].waits_on = 0;
            b.current = i;
            threadIdx = {static_cast<unsigned>(i), 0, 0};
            simt_switch(&b.scheduler, b.fibers[i].sp);
            progressed = true;
            if (!failure.empty()) break;
        }
        if (!failure.empty()) {
            ok = false;
            break;
        }
        if (!progressed) {
            failure = "block " + std::to_string(block_index) + ": a barrier that " + std::to_string(b.alive) +
                      " live threads never all reach";
            ok = false;
            break;
        }
    }
    block = nullptr;
    return ok;
}

template <class T>
T exchange(T v, int source_lane) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    const int me = block->current, w = me / 32;
    if (block->warp_alive[w] != 32 && failure.empty()) failure = "a shuffle in a warp with exited lanes";
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    block->exchange[me] = bits;
    sync_warp();
    T r;
    const uint64_t got = block->exchange[w * 32 + (source_lane & 31)];
    std::memcpy(&r, &got, sizeof(T));
    sync_warp();
    return r;
}

// A warp-wide instruction: every lane puts `n` words, then reads any lane's; `done` when all have read.
inline const uint32_t* warp_fragments(const uint32_t* mine, int n) {
    const int me = block->current, w = me / 32;
    if (block->warp_alive[w] != 32 && failure.empty()) failure = "a warp-wide instruction in a warp with exited lanes";
    std::memcpy(&block->fragments[static_cast<size_t>(me) * FRAGMENT_WORDS], mine, 4 * n);
    sync_warp();
    return &block->fragments[static_cast<size_t>(w) * 32 * FRAGMENT_WORDS];
}
inline void warp_fragments_done() { sync_warp(); }

inline float half_bits_to_float(uint16_t h, bool f16) {
    if (!f16) {
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}

}  // namespace simt

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: the PTX ISA's fragment layouts (lane = 4 g + t): a0 (row g,
// k 2t, 2t + 1), a1 (row g + 8), a2 (k + 8), a3 (row g + 8, k + 8); b0 (k 2t, 2t + 1, column g), b1 (k + 8); d0,
// d1 (row g, columns 2t, 2t + 1), d2, d3 (row g + 8). Each output's 16 products (exact in fp32) and its
// accumulator are added in double and rounded once: the tensor core's own order and rounding are not modelled,
// so results may differ from the GPU's in the last bits (the comparisons' tolerances hold either).
template <bool F16>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    const uint32_t* all = simt::warp_fragments(mine, 6);
    const auto element = [&](int lane, int word, int half) {
        const uint32_t v = all[lane * simt::FRAGMENT_WORDS + word];
        return simt::half_bits_to_float(static_cast<uint16_t>(half ? v >> 16 : v & 0xFFFFu), F16);
    };
    const auto A = [&](int row, int k) {  // (row, k) of the 16 x 16 operand
        return element(4 * (row % 8) + (k % 8) / 2, (row >= 8) + 2 * (k >= 8), k % 2);
    };
    const auto B = [&](int k, int col) { return element(4 * col + (k % 8) / 2, 4 + (k >= 8), k % 2); };
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float out[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        double acc = d[e];
        for (int k = 0; k < 16; ++k) acc += static_cast<double>(A(row, k)) * static_cast<double>(B(k, col));
        out[e] = static_cast<float>(acc);
    }
    simt::warp_fragments_done();
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8 m + r gives the address of row r of matrix m; lane l
// gets matrix m's (row l / 4, columns 2 (l % 4), + 1) in r[m], or with .trans (rows 2 (l % 4), + 1, column l / 4).
inline void ldmatrix_model(uint32_t (&r)[4], unsigned at, bool trans) {
    const uint32_t* all = simt::warp_fragments(&at, 1);
    const int lane = threadIdx.x & 31;
    for (int m = 0; m < 4; ++m) {
        const auto row = [&](int i) { return all[(8 * m + i) * simt::FRAGMENT_WORDS]; };
        if (!trans) {
            std::memcpy(&r[m], simt::window_at(row(lane / 4) + 4 * (lane % 4), 4), 4);
        } else {
            uint16_t lo, hi;
            std::memcpy(&lo, simt::window_at(row(2 * (lane % 4)) + 2 * (lane / 4), 2), 2);
            std::memcpy(&hi, simt::window_at(row(2 * (lane % 4) + 1) + 2 * (lane / 4), 2), 2);
            r[m] = lo | static_cast<uint32_t>(hi) << 16;
        }
    }
    simt::warp_fragments_done();
}
inline void ldmatrix_x4(uint32_t (&r)[4], unsigned at) { ldmatrix_model(r, at, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], unsigned at) { ldmatrix_model(r, at, true); }

inline void __syncthreads() { simt::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { simt::sync_warp(); }
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) { return simt::exchange(v, (threadIdx.x & 31) ^ mask); }
template <class T>
inline T __shfl_sync(unsigned, T v, int lane) { return simt::exchange(v, lane); }
template <class T>
inline T __shfl_down_sync(unsigned, T v, int delta) {
    const int lane = threadIdx.x & 31;
    const T other = simt::exchange(v, std::min(31, lane + delta));
    return lane + delta < 32 ? other : v;
}
inline int __syncthreads_or(int predicate) {
    simt::block->exchange[simt::block->current] = predicate != 0;
    simt::sync_block();
    int any = 0;
    for (int i = 0; i < simt::block->threads; ++i) any |= simt::block->exchange[i] != 0;
    simt::sync_block();
    return any;
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline long long clock64() { return 0; }

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __vmaxu2(unsigned a, unsigned b) {
    return std::max(a & 0xFFFFu, b & 0xFFFFu) | (std::max(a >> 16, b >> 16) << 16);
}
template <class T>
inline T __ldcg(const T* p) { return *p; }
inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }
// gemv.cuh's shared-memory copies (there inline PTX), on the window: a copy lands at once
inline unsigned dynamic_smem_bytes() { return static_cast<unsigned>(simt::smem_window_bytes); }
inline unsigned smem_addr(const void* p) {
    const unsigned char* q = static_cast<const unsigned char*>(p);
    if ((q < simt::smem_window || q >= simt::smem_window + simt::smem_window_bytes) && simt::failure.empty())
        simt::failure = "a shared-memory address outside the dynamic window (a static __shared__ array?)";
    return static_cast<unsigned>(q - simt::smem_window);
}
inline void copy_async_piece(unsigned dst, const void* src, int piece) { std::memcpy(simt::window_at(dst, piece), src, piece); }
inline void copy_async16(unsigned dst, const void* src) { copy_async_piece(dst, src, 16); }
inline void copy_async16_once(unsigned dst, const void* src) { copy_async_piece(dst, src, 16); }
inline unsigned long long evict_first_policy() { return 0; }
inline void copies_commit() {}
inline void copies_wait(int) {}
inline void pair_sync(int) {  // bar.sync id, 64 (the decode attention's): not modelled
    if (simt::failure.empty()) simt::failure = "a named barrier (not modelled)";
}
inline void copy_async16_or_zero(unsigned dst, const void* src, bool valid) {
    if (valid) std::memcpy(simt::window_at(dst, 16), src, 16);
    else std::memset(simt::window_at(dst, 16), 0, 16);
}
using std::max;
using std::min;
