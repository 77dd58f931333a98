// The sm_120 kernel (impl cuda_sm120; what a 99 KB GPU selects): mma.sync m16n8k16, 86,912 B of shared memory,
// Q held in registers. docs/performance.md ("sm_120") has the design, its predictions and the measurements.
//
// CTA: 32 rows (draft node x head), 8 warps, 32 keys per step, a two-slot ring of 32-key KV tiles (72 KB). Q does
// not fit beside two KV tiles in 99 KB, so it is staged once through ring slot 1 and then lives in registers: warp
// w = (qr, dh, kh) = (w & 1, (w >> 1) & 1, w >> 2) keeps the A fragments of rows 16qr..16qr+15 over its half of
// the 576 dims (dims 64j + 32dh .. 64j + 32dh + 31 for j < 9; 72 registers).
// QK: warp w computes the partial S of its 16 rows x keys 16kh..16kh+15 over its dims (each K fragment serves
// two HMMA); the two dim halves meet in shared memory (fp32).
// Softmax: thread t owns row t / 8 and keys 4 (t % 8) .. + 3 of the step: it adds the two halves, masks, takes
// the row maximum over its 8 lanes, keeps the lazy reference maximum of v3 (RESCALE_SLACK), writes P (bf16) and
// the row's rescale factor to shared memory, and keeps its share of the row sum in a register.
// PV: warp w owns output columns 64w..64w+63 of all 32 rows (64 fp32 accumulators per thread): each V fragment
// (ldmatrix.trans from the same KV tile) serves both 16-row halves.
// Three block barriers per step: the ring, partial S written, P written. Every instruction is one sm_80 has
// (mma.sync, ldmatrix, cp.async), so sm_120a runs it, and a Hopper GPU runs it as sm_120 would.
#pragma once
#include "../common/frame.cuh"

namespace kdt {

template <int STAGES>
struct Cfg120 {
  static constexpr int BM = 32, BN = 32, WARPS = 8, THREADS = WARPS * 32;
  static constexpr int TILE_BYTES = BN * D_QK * 2;       // 36,864: one 32-key tile (or the 32-row Q tile)
  static constexpr int RING_BYTES = STAGES * TILE_BYTES;
  static constexpr int S_PITCH = BN + 8;                 // floats: conflict-free float2 stores and float4 loads
  static constexpr int S_BYTES = 2 * BM * S_PITCH * 4;   // partial S of the two dim halves
  static constexpr int P_PITCH = BN + 8;                 // bf16: 80-byte rows, conflict-free ldmatrix
  static constexpr int P_BYTES = BM * P_PITCH * 2;
  static constexpr int STAT_BYTES = 3 * BM * 4;          // per row: rescale factor, final max, final sum
  static constexpr int SMEM = RING_BYTES + S_BYTES + P_BYTES + STAT_BYTES;
  static_assert(STAGES == 2, "Q is staged in ring slot 1");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
};

// FP8 (issue 17): the pool holds e4m3 rows (576 B). Prefix CTAs then use the same 72 KB as a bf16
// tile (0..36 KB: Q staging, then each converted KV tile) and a two-slot ring of e4m3 tiles (36..72 KB, 18 KB
// each, loaded two tiles ahead); each step converts its e4m3 tile into the bf16 tile (exactly) between two block
// barriers and runs the bf16 step unchanged. k_scale / v_scale enter through scale_pre and v_scale, as for bf16.
template <int BM, int STAGES, bool FP8 = false>
__global__ void __launch_bounds__(Cfg120<STAGES>::THREADS, 1) verify_sm120_kernel(Params p) {
  using C = Cfg120<STAGES>;
  static_assert(BM == C::BM, "32-row tiles");
  constexpr int ROW = D_QK * 2;  // bytes per swizzled tile row
  extern __shared__ __align__(16) unsigned char smem[];
  float* sred = reinterpret_cast<float*>(smem + C::RING_BYTES);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::RING_BYTES + C::S_BYTES);
  float* stat = reinterpret_cast<float*>(smem + C::RING_BYTES + C::S_BYTES + C::P_BYTES);  // alpha | m | l

  Work w;
  if (!setup_work<BM, C::THREADS>(p, C::BN, w)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qr = warp & 1, dh = (warp >> 1) & 1, kh = warp >> 2;
  const int mi = lane >> 3, sw = lane & 7;
  const uint32_t ring = smem_u32(smem), slot1 = ring + C::TILE_BYTES;
  auto swizzled = [](unsigned char* base) {
    return [base](int r, int ch) { return reinterpret_cast<__nv_bfloat16*>(base) + swz(r, ch); };
  };
  const bool fp8_prefix = FP8 && !w.draft;  // Q is staged in the bf16 tile, the e4m3 ring sits in slot 1
  const uint32_t qstage = fp8_prefix ? ring : slot1;
  load_q_tile<BM, C::THREADS>(p, w, swizzled(smem + (fp8_prefix ? 0 : C::TILE_BYTES)));

  // Per-thread shared-memory byte offsets (the per-slice offsets fold into the ldmatrix immediates).
  uint32_t kofs[2], vofs[4];
#pragma unroll
  for (int uu = 0; uu < 2; ++uu)
    kofs[uu] = ((16 * kh + (mi >> 1) * 8 + (lane & 7)) * D_QK + (((2 * (2 * dh + uu) + (mi & 1)) ^ sw) << 3)) * 2;
#pragma unroll
  for (int np = 0; np < 4; ++np)
    vofs[np] = (((mi & 1) * 8 + (lane & 7)) * D_QK + warp * 64 + (((2 * np + (mi >> 1)) ^ sw) << 3)) * 2;
  const uint32_t pa_addr = smem_u32(ps) + ((lane & 15) * C::P_PITCH + (lane >> 4) * 8) * 2;

  uint32_t qf[9][2][4];  // Q A fragments, loaded from slot 1 once
  auto load_q_regs = [&]() {
#pragma unroll
    for (int uu = 0; uu < 2; ++uu) {
      const uint32_t a = qstage + ((16 * qr + (lane & 15)) * D_QK + (((2 * (2 * dh + uu) + (lane >> 4)) ^ sw) << 3)) * 2;
#pragma unroll
      for (int j = 0; j < 9; ++j) ldsm_x4(qf[j][uu], a + j * 128);
    }
  };

  float acc[2][8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
  const int srow = tid >> 3, skey = (tid & 7) * 4;  // softmax: this thread's row and first key of the step
  float m_ref = -INFINITY, l_part = 0.f;

  // One 32-key step over the K tile at kt and the V tile at vt (the same tile for the prefix).
  auto step = [&](uint32_t kt, uint32_t vt, float scale, bool full, auto visible) {
    // Two accumulator sets (dims 64j + 32dh + 16uu, uu = 0 / 1): four independent HMMA chains of 9, not two of 18.
    float s2[2][2][4] = {};
#pragma unroll
    for (int j = 0; j < 9; ++j)
#pragma unroll
      for (int uu = 0; uu < 2; ++uu) {
        uint32_t b[4];
        ldsm_x4(b, kt + kofs[uu] + j * 128);
        mma_bf16(s2[uu][0], qf[j][uu], b[0], b[1]);
        mma_bf16(s2[uu][1], qf[j][uu], b[2], b[3]);
      }
    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = s2[0][nt][e] + s2[1][nt][e];
    {
      float* mine = sred + (dh * BM + 16 * qr + (lane >> 2)) * C::S_PITCH + 16 * kh + (lane & 3) * 2;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        *reinterpret_cast<float2*>(mine + nt * 8) = make_float2(s[nt][0], s[nt][1]);
        *reinterpret_cast<float2*>(mine + 8 * C::S_PITCH + nt * 8) = make_float2(s[nt][2], s[nt][3]);
      }
    }
    __syncthreads();
    {
      const float4 a = *reinterpret_cast<const float4*>(sred + srow * C::S_PITCH + skey);
      const float4 b = *reinterpret_cast<const float4*>(sred + (BM + srow) * C::S_PITCH + skey);
      float x[4] = {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w};
      float mx = -INFINITY;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        x[e] = (full || visible(skey + e, srow)) ? x[e] * scale : -INFINITY;
        mx = fmaxf(mx, x[e]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const bool bump = mx > m_ref + RESCALE_SLACK;  // the same decision in the row's 8 lanes
      const float alpha = bump ? exp2f(m_ref - mx) : 1.f;
      if (bump) m_ref = mx;
      const float base = m_ref == -INFINITY ? 0.f : m_ref;
      float sum = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        x[e] = exp2f(x[e] - base);
        sum += x[e];
      }
      l_part = l_part * alpha + sum;
      *reinterpret_cast<uint2*>(ps + srow * C::P_PITCH + skey) = make_uint2(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]));
      if ((tid & 7) == 0) stat[srow] = alpha;
    }
    __syncthreads();
    float al[2][2];
    bool rescale = false;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        al[mt][h] = stat[16 * mt + 8 * h + (lane >> 2)];
        rescale |= al[mt][h] != 1.f;
      }
    rescale_rows(acc, al, rescale);
#pragma unroll
    for (int k16 = 0; k16 < C::BN / 16; ++k16) {
      uint32_t pa[2][4];
      ldsm_x4(pa[0], pa_addr + k16 * 32);
      ldsm_x4(pa[1], pa_addr + 16 * C::P_PITCH * 2 + k16 * 32);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        ldsm_x4_trans(b, vt + vofs[np] + k16 * 16 * ROW);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16(acc[mt][2 * np], pa[mt], b[0], b[1]);
          mma_bf16(acc[mt][2 * np + 1], pa[mt], b[2], b[3]);
        }
      }
    }
  };

  if (FP8 && !w.draft) {
    // e4m3 tiles: row r at 576 r in slot (t % 2) of the ring at 36 KB; thread (lrow, lch) loads and converts
    // chunks lch + 8k (k < 5, chunk < 36) of row lrow = 4 warp + lane / 8.
    constexpr int ROW8 = D_QK, TILE8 = C::BN * ROW8;
    const uint32_t ring8 = ring + C::TILE_BYTES;
    const int lrow = warp * 4 + (lane >> 3), lch = lane & 7;
    const int ntiles = (w.kend - w.kbeg + C::BN - 1) / C::BN;
    const unsigned char* kb8 = reinterpret_cast<const unsigned char*>(p.kb);
    auto fetch = [&](int t) -> int64_t {
      const int key = w.kbeg + t * C::BN + lrow;
      return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
    };
    auto load8 = [&](int t, int64_t raw) {
      const uint32_t d = ring8 + (t % 2) * TILE8 + lrow * ROW8;
      const bool ok = w.kbeg + t * C::BN + lrow < w.kend;
      const int64_t slot = ok ? checked_slot(p, raw, lch == 0) : 0;
      const unsigned char* src = kb8 + slot * p.kb_s;
#pragma unroll
      for (int k = 0; k < 5; ++k)
        if (k < 4 || lch < 4) cp_async_16s(d + (lch + 8 * k) * 16, src + (lch + 8 * k) * 16, ok ? 16 : 0);
    };
    if (ntiles > 0) load8(0, fetch(0));
    cp_async_commit();  // group 0: Q and tile 0
    if (ntiles > 1) load8(1, fetch(1));
    cp_async_commit();
    int64_t pending = fetch(2);
    for (int t = 0; t < ntiles; ++t) {
      cp_async_wait<1>();  // this thread's part of tile t (and Q) has landed
      __syncthreads();     // every warp is done with step t - 1's bf16 tile
      if (t == 0) {
        load_q_regs();
        __syncthreads();
      }
      const uint32_t s8 = ring8 + (t % 2) * TILE8 + lrow * ROW8;
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        if (k < 4 || lch < 4) {
          const int c = lch + 8 * k;  // e4m3 chunk: dims 16c .. 16c + 15 = bf16 chunks 2c, 2c + 1
          const uint4 x = ld_shared_v4(s8 + c * 16);
          const uint32_t row = ring + lrow * ROW;
          st_shared_v4(row + ((((2 * c) & ~7) | (((2 * c) & 7) ^ (lrow & 7))) << 4),
                       make_uint4(e4m3x2_to_bf16x2(x.x), e4m3x2_to_bf16x2(x.x >> 16), e4m3x2_to_bf16x2(x.y),
                                  e4m3x2_to_bf16x2(x.y >> 16)));
          st_shared_v4(row + ((((2 * c + 1) & ~7) | (((2 * c + 1) & 7) ^ (lrow & 7))) << 4),
                       make_uint4(e4m3x2_to_bf16x2(x.z), e4m3x2_to_bf16x2(x.z >> 16), e4m3x2_to_bf16x2(x.w),
                                  e4m3x2_to_bf16x2(x.w >> 16)));
        }
      }
      __syncthreads();  // the bf16 tile is whole; the e4m3 slot of tile t is free
      if (t + 2 < ntiles) load8(t + 2, pending);
      cp_async_commit();
      pending = fetch(t + 3);
      const int key0 = w.kbeg + t * C::BN;
      step(ring, ring, p.scale_pre, key0 + C::BN <= w.kend, [&](int col, int) { return key0 + col < w.kend; });
    }
  } else if (!w.draft) {
    prefix_pipeline<STAGES, C::BN, C::TILE_BYTES, 128, false>(
        p, w, ring, [](int r, int lch) { return (uint32_t)(r * ROW + ((lch ^ (r & 7)) << 4)); },
        [&](uint32_t kt, int key0) {
          step(kt, kt, p.scale_pre, key0 + C::BN <= w.kend, [&](int col, int) { return key0 + col < w.kend; });
        },
        load_q_regs);
  } else {
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    load_q_regs();  // draft_pipeline's first barrier keeps slot 1 until every warp has its Q
    const DraftMask dm = draft_mask(p, w);
    draft_pipeline<C::BN, C::THREADS, false>(p, w, swizzled(smem), swizzled(smem + C::TILE_BYTES), [&](int key0) {
      step(ring, slot1, p.scale_draft, false,
           [&](int col, int row) { return draft_visible(dm, (w.row0 + row) / p.H, key0 + col); });
    });
  }
  cp_async_wait<0>();

  // Row sums: add the 8 lanes of each row; the row's max and sum meet the PV warps in shared memory.
  l_part += __shfl_xor_sync(0xffffffffu, l_part, 1);
  l_part += __shfl_xor_sync(0xffffffffu, l_part, 2);
  l_part += __shfl_xor_sync(0xffffffffu, l_part, 4);
  if ((tid & 7) == 0) {
    stat[BM + srow] = m_ref;
    stat[2 * BM + srow] = l_part;
  }
  __syncthreads();
  const float vscale = w.draft ? 1.f : p.v_scale;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = 16 * mt + 8 * h + (lane >> 2);
      const int gr = w.row0 + rr;
      if (gr < p.R)
        write_partial_row<8>(p, w.part0 + gr, stat[BM + rr], stat[2 * BM + rr], vscale, warp == 0 && (lane & 3) == 0,
                             warp * 64, acc[mt], h);
    }
}

template <int STAGES>
constexpr ConfigEntry sm120_entry() {
  static_assert(STAGES == 2, "name the new configuration below");
  return ConfigEntry{{Cfg120<STAGES>::BM, STAGES, Cfg120<STAGES>::THREADS, Cfg120<STAGES>::SMEM, Cfg120<STAGES>::BN},
                     "verify_sm120_kernel<32,2>", &verify_sm120_kernel<Cfg120<STAGES>::BM, STAGES>};
}

constexpr ConfigEntry sm120_fp8_entry() {
  return ConfigEntry{{Cfg120<2>::BM, 2, Cfg120<2>::THREADS, Cfg120<2>::SMEM, Cfg120<2>::BN},
                     "verify_sm120_kernel<32,2,true>", &verify_sm120_kernel<Cfg120<2>::BM, 2, true>};
}

}  // namespace kdt
