// How the order in which a GEMV's tiles read their weights sets the DRAM bandwidth they get (D43): a pure
// read of 2 KB units through the same per-warp cp.async ring as the GEMV (gemv.cuh stage_unit, one copy
// group a unit, the wait one instruction), with no arithmetic, in three orders. Driven by experiments/access_pattern.py.
//
// A grid of `tiles` blocks of 16 warps; tile t owns `strips` x `blocks` units (strip-major, as the device
// weight layout stores a row group: megakernel/runtime/weight_layout.py). Orders (`pattern`):
//   0 tiles:      as the GEMV's tiles read them: warp w streams strip w % strips, every (16 / strips)-th
//                 unit from unit w / strips (its phase), so a strip's phases read alternate units;
//   1 contiguous: warp w streams the w-th contiguous share of its tile's units;
//   2 global:     at step j every warp of the grid reads one unit and the grid's units at step j are
//                 consecutive in memory (the whole read one sequential sweep).
// Every order reads each unit exactly once.
#include "gemv.cuh"  // the GEMV's own copies, ring and unit size (megakernel/runtime/cuda)

using mk::u8;

namespace {

constexpr int WARPS = mk::TILE_WARPS;
constexpr int UNIT = mk::UNIT_BYTES;

// The unit (index into the whole buffer) that warp `warp` of tile `tile` reads at its step j.
__device__ __forceinline__ long long unit_of(int pattern, int tile, int warp, int j, int tiles, int strips, int blocks) {
    const long long tile_units = static_cast<long long>(strips) * blocks;
    if (pattern == 0) {
        const int phases = WARPS / strips, strip = warp % strips, phase = warp / strips;
        return tile * tile_units + static_cast<long long>(strip) * blocks + phase + static_cast<long long>(phases) * j;
    }
    if (pattern == 1) return tile * tile_units + static_cast<long long>(warp) * (tile_units / WARPS) + j;
    return static_cast<long long>(j) * tiles * WARPS + static_cast<long long>(tile) * WARPS + warp;
}

}  // namespace

// steps: units per warp (strips x blocks / 16; the driver keeps strips x blocks a multiple of 16 and
// blocks a multiple of 16 / strips). Dynamic shared memory: 16 warps x DEPTH slots x 2 KB.
template <int DEPTH>
__device__ void ring_read(const u8* weights, int pattern, int tiles, int strips, int blocks, int steps,
                          unsigned* sink) {
    extern __shared__ __align__(16) u8 ring[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, tile = blockIdx.x;
    const unsigned slots = mk::smem_addr(ring) + warp * DEPTH * UNIT + mk::PIECE * lane;
    const auto stage = [&](int slot, int j) {
        mk::stage_unit(slots + slot * UNIT, weights + unit_of(pattern, tile, warp, j, tiles, strips, blocks) * UNIT +
                                                 mk::PIECE * lane);  // one copy group
    };
#pragma unroll
    for (int i = 0; i < DEPTH; ++i) {
        if (i < steps) stage(i, i);
        else mk::copies_commit();
    }
    unsigned x = 0;
    int slot = 0;
    for (int j = 0; j < steps; ++j) {
        asm volatile("cp.async.wait_group %0;" ::"n"(DEPTH - 1) : "memory");
        unsigned v;  // read the landed bytes back, as the GEMV does before it refills the slot
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(slots + slot * UNIT) : "memory");
        x ^= v;
        if (j + DEPTH < steps) stage(slot, j + DEPTH);
        else mk::copies_commit();
        if (++slot == DEPTH) slot = 0;
    }
    if (x == 0x9E3779B9u) sink[0] = x;  // keeps the reads alive; practically never taken
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) ring_read_6(const u8* w, int pattern, int tiles, int strips,
                                                               int blocks, int steps, unsigned* sink) {
    ring_read<6>(w, pattern, tiles, strips, blocks, steps, sink);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) ring_read_2(const u8* w, int pattern, int tiles, int strips,
                                                               int blocks, int steps, unsigned* sink) {
    ring_read<2>(w, pattern, tiles, strips, blocks, steps, sink);
}
