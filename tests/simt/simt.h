// A CUDA thread block on the CPU, for checking the engine's tile functions without a GPU (tests/simt_runner.py):
// each thread of the block is a fiber on one OS thread (x86-64: a stack and a six-register switch, no system
// call), run in turn until it reaches a barrier (__syncthreads, __syncwarp, a shuffle, a warp-wide instruction, a
// named barrier, an mbarrier wait), so the block's threads interleave only where the CUDA programming model lets
// them. A barrier some thread never reaches, or a warp-wide instruction in a warp that is not whole, ends the run
// with a message instead of hanging.
//
// What it models beyond that (below): shuffles over their mask's lanes, mma.sync m16n8k16, ldmatrix x4 and wgmma
// m64n128k16 / m64n64k16 (each warp-wide, from the PTX ISA's fragment layouts), named barriers, mbarriers with
// transaction bytes, async copies that land only at their thread's wait and bulk copies only at a wait on their
// mbarrier (so a read that skips its wait reads stale shared memory). What it does not: the rest of the memory model
// (fences, global memory between blocks), timing; wgmma's asynchrony (a product reads its operands when issued, so a
// missing wgmma.fence, commit, wait_group or fence.proxy.async passes here), that all four warps of a warpgroup issue
// it (only the warp meets), and the asm's own flags (the layout and type come from the function's name: the GPU
// per-word test checks the asm). Arithmetic is the host's IEEE fp32 (common.cuh MK_HOST_SIMT); expf and log1pf are
// glibc's, which may differ from CUDA's in the last bit.
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
#include <cuda_fp8.h>
#include <vector_types.h>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static  // one block runs at a time
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __noinline__ __attribute__((noinline))

struct SimtDim {
    unsigned x = 0, y = 0, z = 0;
};
inline SimtDim threadIdx, blockIdx, blockDim, gridDim;  // threadIdx is set to the running fiber's

namespace simt {

// A failure inside the block (a stalled barrier, a split warp, an address out of reach): the run stops and
// reports it.
inline std::string failure;

// Dynamic shared memory: a window of host memory the runner gives; a shared-memory address (u32) is an offset
// into it, so the engine's async copies (gemv.cuh) become copies into the window.
inline unsigned char* smem_window = nullptr;
inline size_t smem_window_bytes = 0;

// A static __shared__ array (a host static here) has an address too: STATIC_BASE + its distance from an anchor in
// the same library, so the engine's address arithmetic on it works as on the GPU.
constexpr unsigned STATIC_BASE = 0x80000000u;
inline char static_anchor;

inline unsigned char* window_at(unsigned offset, size_t bytes) {
    if (offset >= STATIC_BASE)
        return reinterpret_cast<unsigned char*>(&static_anchor) + (static_cast<long long>(offset - STATIC_BASE) - (1LL << 30));
    if (offset + bytes <= smem_window_bytes) return smem_window + offset;
    // outside the window: reported, and the access lands in scratch memory until the block stops
    static unsigned char scratch[1 << 20];
    if (failure.empty()) failure = "an access to shared memory outside the dynamic window";
    return scratch;
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

struct Mbarrier {  // mbarrier.* state: arrivals pending in the phase, transaction bytes pending, phase parity
    int count = 0, pending = 0;
    long long tx = 0;
    unsigned phase = 0;
};

// An asynchronous copy in flight: its bytes (read from global memory when issued; nothing writes them while it
// is in flight) and where they land.
struct Copy {
    unsigned char* dst;
    std::vector<unsigned char> bytes;
    unsigned bar;  // a bulk copy's mbarrier (0: a cp.async)
};
inline std::vector<unsigned char> copied(const void* src, size_t bytes) {  // zeros where src is null
    std::vector<unsigned char> v(bytes);
    if (src) std::memcpy(v.data(), src, bytes);
    return v;
}

struct Fiber {
    void* sp = nullptr;
    std::vector<Copy> open;                 // cp.async since the last commit
    std::vector<std::vector<Copy>> groups;  // committed groups, oldest first
    bool done = false;
    int waits_on = 0;          // 0: runnable; 1: the block barrier; 2: its warp's; 3: named barrier `id`; 4: `mbar`;
                               // 5: its warp's lanes of mask slot `id` (a shuffle over part of the warp)
    unsigned generation = 0;   // the barrier's generation (an mbarrier's: the parity) it waits to pass
    int id = 0;
    const Mbarrier* mbar = nullptr;
    unsigned bar = 0;  // the mbarrier's address: copies in flight to it wake its waiters, who land them
};
constexpr int NAMED_BARRIERS = 16;

struct Block {
    int threads = 0, alive = 0, current = -1;
    std::vector<Fiber> fibers;
    void* scheduler = nullptr;
    std::function<void()> body;
    int block_arrived = 0;
    unsigned block_generation = 0;
    std::vector<int> warp_arrived, warp_alive;
    std::vector<unsigned> warp_generation;
    std::vector<uint32_t> fragments;  // a warp-wide instruction's operands (a shuffle's too), FRAGMENT_WORDS a thread
    struct MaskBarrier {  // the lanes of one mask of one warp (a shuffle whose mask is not the whole warp)
        int warp = 0;
        unsigned mask = 0;
        int arrived = 0;
        unsigned generation = 0;
    };
    std::vector<MaskBarrier> masks;
    int named_arrived[NAMED_BARRIERS] = {};
    unsigned named_generation[NAMED_BARRIERS] = {};
    std::vector<std::unique_ptr<Mbarrier>> mbarriers;  // the block's; each barrier's 8 bytes point at its own
    std::vector<Copy> bulk;  // bulk copies in flight
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

inline void land(const Copy& c) { std::memcpy(c.dst, c.bytes.data(), c.bytes.size()); }

[[noreturn]] inline void entry() {
    block->body();
    Fiber& f = block->fibers[block->current];
    for (const auto& group : f.groups)  // copies still in flight land after their thread has gone
        for (const Copy& c : group) land(c);
    for (const Copy& c : f.open) land(c);
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
    if (f.waits_on == 3) return block->named_generation[f.id] != f.generation;
    if (f.waits_on == 5) return block->masks[f.id].generation != f.generation;
    if (f.waits_on == 4) {
        if (f.mbar->phase != f.generation) return true;
        for (const Copy& c : block->bulk)
            if (c.bar == f.bar) return true;
        return false;
    }
    return true;
}

// bar.sync id, threads: the first `threads` arrivals at barrier `id` pass together.
inline void sync_named(int id, int threads) {
    Fiber& f = block->fibers[block->current];
    f.waits_on = 3;
    f.id = id;
    f.generation = block->named_generation[id];
    if (++block->named_arrived[id] >= threads) {
        block->named_arrived[id] = 0;
        ++block->named_generation[id];
    }
    yield();
}

// The lanes of `mask` in this thread's warp meet (the caller must be one of them; a lane of the mask that never
// comes stalls the block, as it would leave a GPU's shuffle undefined).
inline void sync_mask(unsigned mask) {
    const int me = block->current, w = me / 32;
    if (!(mask >> (me & 31) & 1u) && failure.empty()) failure = "a shuffle by a lane outside its mask";
    size_t slot = 0;
    while (slot < block->masks.size() && (block->masks[slot].warp != w || block->masks[slot].mask != mask)) ++slot;
    if (slot == block->masks.size()) block->masks.push_back({w, mask, 0, 0});
    Block::MaskBarrier& m = block->masks[slot];
    Fiber& f = block->fibers[me];
    f.waits_on = 5;
    f.id = static_cast<int>(slot);
    f.generation = m.generation;
    if (++m.arrived >= __builtin_popcount(mask)) {
        m.arrived = 0;
        ++m.generation;
    }
    yield();
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

// A warp-wide instruction: every lane puts `n` words, then reads any lane's; `done` when all have read.
inline const uint32_t* warp_fragments(const uint32_t* mine, int n) {
    const int me = block->current, w = me / 32;
    if (block->warp_alive[w] != 32 && failure.empty()) failure = "a warp-wide instruction in a warp with exited lanes";
    std::memcpy(&block->fragments[static_cast<size_t>(me) * FRAGMENT_WORDS], mine, 4 * n);
    sync_warp();
    return &block->fragments[static_cast<size_t>(w) * 32 * FRAGMENT_WORDS];
}
inline void warp_fragments_done() { sync_warp(); }

// A shuffle among the lanes of `mask`: lane `source_lane`'s value of this warp's `v` (at most 8 bytes).
template <class T>
T exchange(T v, int source_lane, unsigned mask = 0xffffffffu) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    uint32_t mine[2] = {0, 0};
    std::memcpy(mine, &v, sizeof(T));
    T r;
    if (mask == 0xffffffffu) {
        const uint32_t* all = warp_fragments(mine, 2);
        std::memcpy(&r, &all[(source_lane & 31) * FRAGMENT_WORDS], sizeof(T));
        warp_fragments_done();
        return r;
    }
    const int me = block->current, w = me / 32;
    if (!(mask >> (source_lane & 31) & 1u) && failure.empty()) failure = "a shuffle reading a lane outside its mask";
    std::memcpy(&block->fragments[static_cast<size_t>(me) * FRAGMENT_WORDS], mine, 8);
    sync_mask(mask);
    std::memcpy(&r, &block->fragments[(static_cast<size_t>(w) * 32 + (source_lane & 31)) * FRAGMENT_WORDS], sizeof(T));
    sync_mask(mask);
    return r;
}

// Element (row, k) of a 16 x 16 A operand held by a warp in mma.m16n8k16's fragment layout (4 words a lane from
// word 0 of each lane's slots): a0 (row g, k 2t, 2t + 1), a1 (row g + 8), a2 (k + 8), a3 (row g + 8, k + 8).
inline float a_element(const uint32_t* all, int row, int k, bool f16) {
    const uint32_t v = all[(4 * (row % 8) + (k % 8) / 2) * FRAGMENT_WORDS + (row >= 8) + 2 * (k >= 8)];
    return half_bits_to_float(static_cast<uint16_t>(k % 2 ? v >> 16 : v & 0xFFFFu), f16);
}


// d (N / 2 words a thread: row g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 t + i % 2 of the warp's 16 x N; mma.sync's
// layout at N = 8) from A(row, k) of the warp's 16 rows and B(k, n)
template <int N, class A, class B>
void warpgroup_product(float* d, int accumulate, A a_at, B b_at) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    // the thread's two rows of A and N / 4 columns of B, each element decoded once (not once a product)
    double a[2][16], b[N / 4][16];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 16; ++k) a[r][k] = a_at(g + 8 * r, k);
    for (int c = 0; c < N / 4; ++c)
        for (int k = 0; k < 16; ++k) b[c][k] = b_at(k, 8 * (c >> 1) + 2 * t + (c & 1));
    float out[N / 2];
    for (int i = 0; i < N / 2; ++i) {  // row g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 t + i % 2
        const double* ar = a[(i >> 1) & 1];
        const double* bc = b[2 * (i >> 2) + (i & 1)];
        double acc = accumulate ? d[i] : 0.0;
        for (int k = 0; k < 16; ++k) acc += ar[k] * bc[k];
        out[i] = static_cast<float>(acc);
    }
    warp_fragments_done();
    for (int i = 0; i < N / 2; ++i) d[i] = out[i];
}
}  // namespace simt

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: the PTX ISA's fragment layouts (lane = 4 g + t): A as
// simt::a_element; b0 (k 2t, 2t + 1, column g), b1 (k + 8); d0,
// d1 (row g, columns 2t, 2t + 1), d2, d3 (row g + 8). Each output's 16 products (exact in fp32) and its
// accumulator are added in double and rounded once: the tensor core's own order and rounding are not modelled,
// so results may differ from the GPU's in the last bits (the comparisons' tolerances hold either).
template <bool F16>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    const uint32_t* all = simt::warp_fragments(mine, 6);
    const auto A = [&](int row, int k) { return simt::a_element(all, row, k, F16); };
    const auto B = [&](int k, int col) {  // b0, b1 in words 4, 5
        const uint32_t v = all[(4 * col + (k % 8) / 2) * simt::FRAGMENT_WORDS + 4 + (k >= 8)];
        return simt::half_bits_to_float(static_cast<uint16_t>(k % 2 ? v >> 16 : v & 0xFFFFu), F16);
    };
    simt::warpgroup_product<8>(d, 1, A, B);
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
inline T __shfl_xor_sync(unsigned lanes, T v, int mask) { return simt::exchange(v, (threadIdx.x & 31) ^ mask, lanes); }
template <class T>
inline T __shfl_sync(unsigned lanes, T v, int lane) { return simt::exchange(v, lane, lanes); }
template <class T>
inline T __shfl_down_sync(unsigned lanes, T v, int delta) {
    const int lane = threadIdx.x & 31;
    const T other = simt::exchange(v, std::min(31, lane + delta), lanes);
    return lane + delta < 32 ? other : v;
}
inline int __syncthreads_or(int predicate) {
    auto& slots = simt::block->fragments;
    slots[static_cast<size_t>(simt::block->current) * simt::FRAGMENT_WORDS] = predicate != 0;
    simt::sync_block();
    int any = 0;
    for (int i = 0; i < simt::block->threads; ++i) any |= slots[static_cast<size_t>(i) * simt::FRAGMENT_WORDS] != 0;
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
// gemv.cuh's shared-memory addresses and copies (there inline PTX), on the window
inline unsigned dynamic_smem_bytes() { return static_cast<unsigned>(simt::smem_window_bytes); }
inline unsigned smem_addr(const void* p) {
    const unsigned char* q = static_cast<const unsigned char*>(p);
    if (q >= simt::smem_window && q < simt::smem_window + simt::smem_window_bytes)
        return static_cast<unsigned>(q - simt::smem_window);
    const long long d = q - reinterpret_cast<const unsigned char*>(&simt::static_anchor) + (1LL << 30);
    if ((d < 0 || d >= (1LL << 31)) && simt::failure.empty()) simt::failure = "a shared-memory address out of reach";
    return simt::STATIC_BASE + static_cast<unsigned>(d);
}
// cp.async: a copy lands only when its thread waits for its group (cp.async.wait_group), so a read of shared
// memory before that wait sees what was there before (the runner fills the window with a pattern first).
namespace simt {
inline void issue(unsigned dst, const void* src, int bytes) {
    block->fibers[block->current].open.push_back(Copy{window_at(dst, bytes), copied(src, bytes), 0});
}
}  // namespace simt
inline void copy_async_piece(unsigned dst, const void* src, int piece) { simt::issue(dst, src, piece); }
inline void copy_async16(unsigned dst, const void* src) { simt::issue(dst, src, 16); }
inline void copy_async16_once(unsigned dst, const void* src) { simt::issue(dst, src, 16); }
inline void copy_async16_or_zero(unsigned dst, const void* src, bool valid) { simt::issue(dst, valid ? src : nullptr, 16); }
inline unsigned long long evict_first_policy() { return 0; }
inline void copies_commit() {
    simt::Fiber& f = simt::block->fibers[simt::block->current];
    f.groups.push_back(std::move(f.open));
    f.open.clear();
}
inline void copies_wait(int pending) {  // all but the `pending` newest committed groups land
    simt::Fiber& f = simt::block->fibers[simt::block->current];
    while (static_cast<int>(f.groups.size()) > pending) {
        for (const simt::Copy& c : f.groups.front()) simt::land(c);
        f.groups.erase(f.groups.begin());
    }
}
inline void named_sync(int id, int threads) { simt::sync_named(id, threads); }
inline void pair_sync(int id) { simt::sync_named(id, 64); }
inline void mbarrier_init_fence() {}
inline uint4 load_shared16(unsigned at) {
    uint4 r;
    std::memcpy(&r, simt::window_at(at, 16), 16);
    return r;
}
inline void store_shared16(unsigned at, const float (&v)[4]) { std::memcpy(simt::window_at(at, 16), v, 16); }
inline void store_shared8(unsigned at, float2 v) { std::memcpy(simt::window_at(at, 8), &v, 8); }
inline float2 load_shared8(unsigned at) {
    float2 v;
    std::memcpy(&v, simt::window_at(at, 8), 8);
    return v;
}
inline void e4m3x4_to_f16x2(uint32_t four_bytes, uint32_t& lo, uint32_t& hi) {  // bytes 0, 1 -> lo; 2, 3 -> hi
    const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(four_bytes & 0xFFFFu), __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(four_bytes >> 16), __NV_E4M3);
    lo = l.x | static_cast<uint32_t>(l.y) << 16;
    hi = h.x | static_cast<uint32_t>(h.y) << 16;
}

// mbarriers (the prompt GEMM's ring): the state lives beside the block, keyed by the barrier's address.
namespace simt {
inline Mbarrier& mbarrier_at(unsigned bar) {
    Mbarrier* m;
    std::memcpy(&m, window_at(bar, 8), sizeof m);  // the barrier's 8 bytes hold the model's pointer
    return *m;
}
inline void mbarrier_step(Mbarrier& m) {  // the phase completes: all arrivals in and all bytes landed
    if (m.pending == 0 && m.tx == 0) {
        m.phase ^= 1u;
        m.pending = m.count;
    }
}
}  // namespace simt
inline void bar_init(unsigned bar, int count) {
    simt::block->mbarriers.emplace_back(new simt::Mbarrier{count, count, 0, 0});
    simt::Mbarrier* m = simt::block->mbarriers.back().get();
    std::memcpy(simt::window_at(bar, 8), &m, sizeof m);
}
inline void bar_arrive(unsigned bar) {
    simt::Mbarrier& m = simt::mbarrier_at(bar);
    --m.pending;
    simt::mbarrier_step(m);
}
inline void bar_expect(unsigned bar, unsigned bytes) {  // mbarrier.arrive.expect_tx
    simt::Mbarrier& m = simt::mbarrier_at(bar);
    m.tx += bytes;
    --m.pending;
    simt::mbarrier_step(m);
}
// A bulk copy lands, and completes its bytes on its mbarrier, only when some thread waits on that mbarrier: a
// read of the slot that does not wait first sees what was there before.
inline void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    simt::block->bulk.push_back(simt::Copy{simt::window_at(dst, bytes), simt::copied(src, bytes), bar});
}
namespace simt {
inline void land_bulk(unsigned bar) {  // the copies in flight to `bar` land and complete their bytes
    for (auto c = block->bulk.begin(); c != block->bulk.end();) {
        if (c->bar != bar) {
            ++c;
            continue;
        }
        land(*c);
        Mbarrier& m = mbarrier_at(bar);
        m.tx -= static_cast<long long>(c->bytes.size());
        if (m.tx < 0 && failure.empty()) failure = "an mbarrier received more bytes than it expected";
        mbarrier_step(m);
        c = block->bulk.erase(c);
    }
}
}  // namespace simt
inline void bar_wait(unsigned bar, unsigned parity) {  // mbarrier.try_wait.parity until phase `parity` completed
    const simt::Mbarrier& m = simt::mbarrier_at(bar);
    for (simt::land_bulk(bar); m.phase == (parity & 1u); simt::land_bulk(bar)) {
        simt::Fiber& f = simt::block->fibers[simt::block->current];
        f.waits_on = 4;
        f.mbar = &m;
        f.bar = bar;
        f.generation = parity & 1u;
        simt::yield();
    }
}

inline void fence_operand(float&) {}
inline void fence_operand(uint32_t&) {}

// wgmma.mma_async m64n128k16 / m64n64k16 (wgmma.cuh): an operand's element by its no-swizzle descriptor, K-major
// ((mn, k) at start + (mn / 8) SBO + (k / 8) LBO + (mn % 8) 16 + (k % 8) 2) or MN-major (+ (k % 8) 16 + (mn % 8) 2);
// warp w of the warpgroup computes rows 16 w .. 16 w + 15 (from its own A fragments in mma.m16n8k16's layout, or A's
// rows by descriptor); d[4 j + e] is row g + 8 (e / 2), column 8 j + 2 t + e % 2. Sums as the mma model's: 16 exact
// products and the accumulator (or zero) in double.
namespace simt {
inline float desc_element(unsigned long long desc, int mn, int k, bool mn_major, bool f16) {
    const unsigned start = static_cast<unsigned>(desc & 0x3FFFu) << 4;
    const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3FFFu) << 4, sbo = static_cast<unsigned>((desc >> 32) & 0x3FFFu) << 4;
    const unsigned inner = mn_major ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2;
    uint16_t h;
    std::memcpy(&h, window_at(start + (mn / 8) * sbo + (k / 8) * lbo + inner, 2), 2);
    return half_bits_to_float(h, f16);
}
}  // namespace simt
// A from registers, f16, B K-major (the prompt GEMM)
inline void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], unsigned long long desc, int accumulate) {
    const uint32_t* all = simt::warp_fragments(a, 4);
    simt::warpgroup_product<128>(d, accumulate, [&](int row, int k) { return simt::a_element(all, row, k, true); },
                                 [&](int k, int n) { return simt::desc_element(desc, n, k, false, true); });
}
// A from registers, bf16, B MN-major (ATTN_CAUSAL's P.V)
inline void wgmma_rs_m64n128k16_bf16_mn(float (&d)[64], const uint32_t (&a)[4], unsigned long long desc, int accumulate) {
    const uint32_t* all = simt::warp_fragments(a, 4);
    simt::warpgroup_product<128>(d, accumulate, [&](int row, int k) { return simt::a_element(all, row, k, false); },
                                 [&](int k, int n) { return simt::desc_element(desc, n, k, true, false); });
}
// A and B K-major by descriptors, bf16 (ATTN_CAUSAL's q.k)
inline void wgmma_ss_m64n64k16_bf16(float (&d)[32], unsigned long long a_desc, unsigned long long b_desc, int accumulate) {
    simt::warp_fragments_done();  // warp-wide
    const int w = (threadIdx.x >> 5) & 3;
    simt::warpgroup_product<64>(d, accumulate,
                                [&](int row, int k) { return simt::desc_element(a_desc, 16 * w + row, k, false, false); },
                                [&](int k, int n) { return simt::desc_element(b_desc, n, k, false, false); });
}
using std::max;
using std::min;
