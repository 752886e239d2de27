// A Program's words on the CPU (the prompt programs' prompt_ops.cuh, prompt_gdn.cuh, prompt_attention.cuh,
// prompt_gemm.cuh; the decode words' gemv_tile.cuh, gdn.cuh, attention.cuh, small_ops.cuh), one launch at a time:
// the tile functions the discrete kernels call (discrete/kernels.cu), each block of the grid run by simt.h.
// Built and called by tests/simt_runner.py.
#include "simt.h"

#include "prompt_attention.cuh"
#include "prompt_gdn.cuh"
#include "prompt_gemm.cuh"
#include "tiles.cuh"

namespace {

// Word 0 of `launch` (a launch program: discrete/launch_program.py) as its kernel would run it, block by block;
// `megakernel_blocks` > 0: a decode word's tiles as the megakernel's G = megakernel_blocks blocks run them instead
// (block b tiles [b T / G, (b + 1) T / G) in order in one shared memory, which holds 0xA5 before each block's
// first; its GEMV tiles primed or not, in turn). `arrivals`: the split-K arrival counters. 0 when it ran, 1 when a
// block stalled (`message` says why), 2 for an opcode this file does not run.
int run_launch(const unsigned char* launch, unsigned char* arena, const unsigned char* weights, int threads,
               unsigned char* smem, int smem_bytes, unsigned* arrivals, int megakernel_blocks, char* message,
               int message_bytes) {
    simt::smem_window = smem;
    simt::smem_window_bytes = smem_bytes;
    const mk::Ctx ctx{arena, weights, launch};
    const mk::Word w = ctx.word(0);
    const int op = w.opcode(), tiles = w.tiles();
    const bool megakernel = megakernel_blocks > 0;
    std::function<void(int)> tile;
    switch (op) {
        case mk::OP_PROMPT_EMBED: tile = [&](int t) { mk::prompt_embed_tile(ctx, w, t); }; break;
        case mk::OP_PROMPT_ADVANCE: tile = [&](int) { mk::prompt_advance_tile(ctx, w); }; break;
        case mk::OP_PROMPT_QKV: tile = [&](int t) { mk::prompt_qkv_tile(ctx, w, t); }; break;
        case mk::OP_PROMPT_CONV: tile = [&](int t) { mk::prompt_conv_tile(ctx, w, t); }; break;
        case mk::OP_PROMPT_NORM: tile = [&](int t) { mk::prompt_norm_tile(ctx, w, t, smem); }; break;
        case mk::OP_NORM_PREPARE:
        case mk::OP_PREPARE:
        case mk::OP_MTP_PREPARE:
        case mk::OP_GATED_PREPARE: tile = [&](int t) { mk::prepare_tile(ctx, w, t, smem); }; break;
        case mk::OP_GDN_CHUNK: tile = [&](int t) { mk::gdn_chunk_tile(ctx, w, t, smem); }; break;
        case mk::OP_ATTN_CAUSAL: tile = [&](int t) { mk::attn_causal_tile(ctx, w, t, smem); }; break;
        case mk::OP_GEMM:
        case mk::OP_GEMM_GATE_UP:
        case mk::OP_GEMM_RESIDUAL: tile = [&](int t) { mk::gemm_tile(ctx, w, t, smem); }; break;
        // the decode words, as discrete/kernels.cu calls them, or (megakernel) as megakernel.cu's run_tile does
        case mk::OP_EMBED: tile = [&](int t) { mk::embed_tile(ctx, w, t); }; break;
        case mk::OP_GDN_CORE:
            tile = [&](int t) {
                auto& sm = *reinterpret_cast<mk::GdnSmem*>(smem);
                if (!megakernel) mk::gdn_reads_ahead(ctx, w, t, sm);
                mk::gdn_tile(ctx, w, t, sm, !megakernel);
            };
            break;
        case mk::OP_ATTN_SCORES: tile = [&](int t) { mk::attn_scores_tile(ctx, w, t, smem); }; break;
        case mk::OP_ATTN_PV: tile = [&](int t) { mk::attn_pv_tile(ctx, w, t, smem); }; break;
        case mk::OP_ATTN_MERGE: tile = [&](int t) { mk::attn_merge_tile(ctx, w, t); }; break;
        case mk::OP_ARGMAX: tile = [&](int t) { mk::argmax_tile(ctx, w, t); }; break;
        case mk::OP_HANDOFF: tile = [&](int) { mk::handoff_tile(ctx, w); }; break;
        case mk::OP_NORM_GEMV:
        case mk::OP_NORM_GEMV_QKV:
        case mk::OP_NORM_GATE_UP:
        case mk::OP_GEMV_RESIDUAL:
        case mk::OP_NORM_HEAD:
        case mk::OP_MTP_FC:
            tile = [&](int t) {
                if (!megakernel) {
                    mk::gemv_main_weights(ctx, w, t, smem);
                    mk::gemv_main_tile(ctx, w, t, smem, arrivals);
                    return;
                }
                const bool primes = t % 2 == 1;  // the megakernel primes a tile whose inputs are not met yet (D51)
                if (primes) mk::gemv_main_weights(ctx, w, t, smem);
                mk::gemv_main_input(ctx, w, t, smem, primes);
                mk::gemv_main_passes(ctx, w, t, smem, arrivals, primes);
            };
            break;
        default: std::snprintf(message, message_bytes, "opcode %d is not run on the CPU", op); return 2;
    }
    const bool decode = op < mk::OP_PROMPT_EMBED;  // the decode opcodes precede the prompt programs' (common.cuh)
    const int blocks = megakernel && decode ? megakernel_blocks : tiles;
    for (int b = 0; b < blocks; ++b) {
        const int first = static_cast<int>(static_cast<long long>(b) * tiles / blocks);
        const int last = static_cast<int>(static_cast<long long>(b + 1) * tiles / blocks);
        if (megakernel && decode && first < last) std::memset(smem, 0xA5, smem_bytes);
        for (int t = first; t < last; ++t) {
            simt::failure.clear();
            if (!simt::run_block(threads, [&] { tile(t); }, megakernel && decode ? b : t, blocks)) {
                std::snprintf(message, message_bytes, "%s", simt::failure.c_str());
                return 1;
            }
        }
    }
    return 0;
}

}  // namespace

extern "C" int simt_run_launch(const unsigned char* launch, unsigned char* arena, const unsigned char* weights,
                               int threads, unsigned char* smem, int smem_bytes, unsigned* arrivals,
                               int megakernel_blocks, char* message, int message_bytes) {
    return run_launch(launch, arena, weights, threads, smem, smem_bytes, arrivals, megakernel_blocks, message,
                      message_bytes);
}

// The runner's own check (tests/test_prompt_words_on_cpu.py): a block of 64 threads whose thread 0 waits at the
// block barrier while the rest of its warp waits at the warp's, which no GPU block leaves. 1 and the message.
extern "C" int simt_stall_probe(char* message, int message_bytes) {
    simt::failure.clear();
    const bool ran = simt::run_block(64, [] {
        if (threadIdx.x == 0) __syncthreads();
        else if (threadIdx.x < 32) __syncwarp();
    });
    std::snprintf(message, message_bytes, "%s", simt::failure.c_str());
    return ran ? 0 : 1;
}

// The runner's copies as the GPU's (tests/test_prompt_words_on_cpu.py): thread 0 of a one-warp block copies 16 bytes
// by cp.async and 16 by a bulk copy on an mbarrier into shared memory; bit 0: the first not there before its
// wait_group, bit 1: there after; bit 2: the second not there before a wait on its mbarrier, bit 3: there after.
extern "C" int simt_copy_probe() {
    static unsigned char window[256];
    static const unsigned char source[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    simt::smem_window = window;
    simt::smem_window_bytes = sizeof window;
    std::memset(window, 0xA5, sizeof window);
    int seen = 0;
    simt::failure.clear();
    simt::run_block(32, [&] {
        if (threadIdx.x != 0) return;
        copy_async16(0, source);
        copies_commit();
        seen |= std::memcmp(window, source, 16) != 0;
        copies_wait(0);
        seen |= (std::memcmp(window, source, 16) == 0) << 1;
        bar_init(64, 1);
        bar_expect(64, 16);
        bulk_copy(128, source, 16, 64);
        seen |= (std::memcmp(window + 128, source, 16) != 0) << 2;
        bar_wait(64, 0);
        seen |= (std::memcmp(window + 128, source, 16) == 0) << 3;
    });
    return simt::failure.empty() ? seen : -1;
}

// The decode GEMV's f16 operand (gemv.cuh f16_operand) alone, in place as the GEMV tiles run it, on one block
// (tests/test_f16_operand_on_cpu.py): x [m][stride] bf16 rows in, their f16 operand out; p [m][MAX_SLICE_BLOCKS].
// 0 when it ran, 1 when a block stalled (`message` says why).
extern "C" int simt_f16_operand(unsigned short* x, int m, int blocks, int stride, signed char* p, char* message,
                                int message_bytes) {
    simt::failure.clear();
    auto* rows = reinterpret_cast<__nv_bfloat16*>(x);
    const bool ran = simt::run_block(mk::TILE_THREADS, [&] { mk::f16_operand(rows, stride, rows, stride, m, blocks, p); });
    std::snprintf(message, message_bytes, "%s", simt::failure.c_str());
    return ran ? 0 : 1;
}
