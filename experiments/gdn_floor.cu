// What a GDN_CORE word's state traffic alone costs (issue 19 item 2): every value head's fp32 state, 64 KB
// (128 columns x dk 128), read into shared memory by async copies and written back in place, as the tile
// does it (each warp's columns as whole 512-byte instructions), with no arithmetic. Driven by
// experiments/gdn_floor.py, which times it against an empty launch of the same grid.
//
// A block of 16 warps moves `cols` columns of one head (cols x 512 bytes; cols = 128 is the tile of one
// head, 64 or 32 a head split over 2 or 4 blocks). mode 0: nothing (the launch floor); 1: read only; 2:
// write only (from shared memory never filled); 3: read, then write back. `chain` dependent global loads
// (an index read from memory, then the next index from there) come before the copies are issued, as the
// tile's word fields, control block and buffer table come before its state's address is known.
#include "gemv.cuh"  // copy_async16, copies_commit, stage_wait, smem_addr (megakernel/runtime/cuda)

using mk::u8;

constexpr int COLUMN_BYTES = 128 * 4;

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1)
state_trip(float* state, const int* links, int cols, int mode, int chain, int* sink) {
    extern __shared__ __align__(16) u8 smem[];
    int at = 0;  // links[i] = i + 1: after the chain, at == chain
    for (int i = 0; i < chain; ++i) at = __ldcg(links + at);  // each load waits for the one before (L2, not L1)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = mk::TILE_THREADS / 32;
    u8* block = reinterpret_cast<u8*>(state) + static_cast<size_t>(blockIdx.x) * cols * COLUMN_BYTES + (at - chain);
    if (mode == 1 || mode == 3) {
        for (int c = warp; c < cols; c += warps)
            mk::copy_async16(mk::smem_addr(smem + c * COLUMN_BYTES + 16 * lane), block + c * COLUMN_BYTES + 16 * lane);
        mk::copies_commit();
        mk::stage_wait();
        __syncwarp();
    }
    if (mode == 2 || mode == 3) {
        for (int c = warp; c < cols; c += warps)
            *reinterpret_cast<float4*>(block + c * COLUMN_BYTES + 16 * lane) =
                *reinterpret_cast<const float4*>(smem + c * COLUMN_BYTES + 16 * lane);
    }
    if (mode == 0 && threadIdx.x == 0 && at != chain) *sink = at;  // keeps the chain's loads
}
