// A CUDA thread block on the CPU, for checking the engine's CUDA-core tile functions without a GPU
// (tests/simt_runner.py): each thread of the block is a fiber (ucontext) on one OS thread, run in turn until
// it reaches a barrier (__syncthreads, __syncwarp, a shuffle), so the block's threads interleave only where
// the CUDA programming model lets them. A barrier some thread never reaches, or a shuffle whose warp is not
// whole, ends the run with a message instead of hanging.
//
// What it does not model: tensor-core and async-copy instructions (the tile functions that use them are not
// run here), the memory model beyond barriers, timing. Arithmetic is the host's IEEE fp32 (common.cuh
// MK_HOST_SIMT); expf and log1pf are glibc's, which may differ from CUDA's in the last bit.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

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

struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    bool done = false;
    int waits_on = 0;          // 0: runnable; 1: the block barrier; 2: its warp's barrier
    unsigned generation = 0;   // the barrier's generation it waits to pass
};

struct Block {
    int threads = 0, alive = 0, current = -1;
    std::vector<Fiber> fibers;
    ucontext_t scheduler;
    std::function<void()> body;
    int block_arrived = 0;
    unsigned block_generation = 0;
    std::vector<int> warp_arrived, warp_alive;
    std::vector<unsigned> warp_generation;
    std::vector<uint64_t> exchange;  // a shuffle's values, a slot a thread
};

inline Block* block = nullptr;

inline void yield() {
    Fiber& f = block->fibers[block->current];
    swapcontext(&f.context, &block->scheduler);
}

inline void entry() {
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
    swapcontext(&f.context, &block->scheduler);
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
    constexpr size_t STACK = 256 * 1024;
    Block b;
    b.threads = b.alive = threads;
    b.fibers.resize(threads);
    b.body = body;
    b.warp_arrived.assign((threads + 31) / 32, 0);
    b.warp_generation.assign((threads + 31) / 32, 0);
    b.warp_alive.assign((threads + 31) / 32, 0);
    for (int i = 0; i < threads; ++i) ++b.warp_alive[i / 32];
    b.exchange.assign(threads, 0);
    block = &b;
    blockIdx = {static_cast<unsigned>(block_index), 0, 0};
    blockDim = {static_cast<unsigned>(threads), 1, 1};
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    for (int i = 0; i < threads; ++i) {
        Fiber& f = b.fibers[i];
        f.stack.resize(STACK);
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.data();
        f.context.uc_stack.ss_size = STACK;
        f.context.uc_link = nullptr;
        makecontext(&f.context, entry, 0);
    }
    bool ok = true;
    while (b.alive > 0) {
        bool progressed = false;
        for (int i = 0; i < threads; ++i) {
            if (!runnable(i)) continue;
            b.fibers[i].waits_on = 0;
            b.current = i;
            threadIdx = {static_cast<unsigned>(i), 0, 0};
            swapcontext(&b.scheduler, &b.fibers[i].context);
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

}  // namespace simt

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
using std::max;
using std::min;
