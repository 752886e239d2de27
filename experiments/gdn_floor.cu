// What a GDN_CORE word's state traffic alone costs (issue 19 item 2): every value head's fp32 state, 64 KB
// (128 columns x dk 128), read into shared memory by async copies and written back in place, as the tile
// does it (each warp's columns as whole 512-byte instructions), with no arithmetic. Driven by
// experiments/gdn_floor.py, which times it against an empty launch of the same grid.
//
// A block of 16 warps moves `cols` columns of one head (cols x 512 bytes; cols = 128 is the tile of one
// head, 64 or 32 a head split over 2 or 4 blocks). mode 0: nothing (the launch floor); 1: read only; 2:
// write only (from shared memory never filled); 3: read, then write back; 4, 5, 6: the same three by the
// tensor memory accelerator's bulk copies (one thread issues a 4 KB copy per 8 columns; the read completes
// on an mbarrier, the write is waited for before the block exits), which the tile does not use yet. `chain` dependent global loads
// (an index read from memory, then the next index from there) come before the copies are issued, as the
// tile's word fields, control block and buffer table come before its state's address is known.
#include "gemv.cuh"  // copy_async16, copies_commit, stage_wait, smem_addr (megakernel/runtime/cuda)

using mk::u8;

constexpr int COLUMN_BYTES = 128 * 4;

__device__ __forceinline__ void bulk_read(u8* smem, const u8* from, int bytes, unsigned bar) {
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
        for (int at = 0; at < bytes; at += 4096)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];"
                         ::"r"(mk::smem_addr(smem + at)), "l"(from + at), "r"(bar) : "memory");
    }
    __syncthreads();  // the barrier initialised before anyone waits on it
    asm volatile("{\n .reg .pred done;\n WAIT%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
                 " @!done bra WAIT%=;\n}" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void bulk_write(u8* to, const u8* smem, int bytes) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the threads' shared-memory writes first
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int at = 0; at < bytes; at += 4096)
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 4096;"
                         ::"l"(to + at), "r"(mk::smem_addr(smem + at)) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// Dynamic shared memory: cols x 512 bytes and 16 for the mbarrier.
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
    const int bytes = cols * COLUMN_BYTES;
    if (mode == 4 || mode == 6) bulk_read(smem, block, bytes, mk::smem_addr(smem + bytes));
    if (mode == 5 || mode == 6) bulk_write(block, smem, bytes);
    if (mode == 0 && threadIdx.x == 0 && at != chain) *sink = at;  // keeps the chain's loads
}
