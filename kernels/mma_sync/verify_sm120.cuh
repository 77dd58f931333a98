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
// the row maximum over its 8 lanes, keeps the lazy reference maximum (RESCALE_SLACK), writes P (bf16) and
// the row's rescale factor to shared memory, and keeps its share of the row sum in a register.
// PV: warp w owns output columns 64w..64w+63 of all 32 rows (64 fp32 accumulators per thread): each V fragment
// (ldmatrix.trans from the same KV tile) serves both 16-row halves.
// Three block barriers per step: the ring, partial S written, P written. Every instruction is one sm_80 has
// (mma.sync, ldmatrix, cp.async), plus, over an fp8 pool, the e4m3 -> f16x2 cvt of sm_89 and later; sm_120a has
// them all, so it runs the kernel, and a Hopper GPU runs it as sm_120 would.
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

// FP8 (issue 17), the register path: the pool holds e4m3 rows (576 B). Prefix CTAs keep e4m3 tiles in shared
// memory (a four-slot ring of 18 KB, 16-byte chunks XOR-swizzled by (row >> 1) & 3, loaded three tiles ahead) and
// convert in registers, from what ldmatrix reads out of them; no bf16 tile, no conversion pass, no extra barrier.
// K: an 8x8 .b16 matrix over e4m3 bytes is 8 keys x 16 dims; lane 4g + t gets key g, dims 4t..4t+3, the B
// registers of one m16n8k16 fragment when the MMA's k {2t, 2t+1, 2t+8, 2t+9} stands for dims 4t..4t+3, so Q's A
// fragments are loaded with the same permutation (d is summed over). V: ldmatrix.trans over byte pairs gives lane
// 4g + t keys 2t, 2t+1 of dv 2g, 2g + 1; prmt splits them into two n8 tiles (even dv, odd dv), so each 16-column
// group of the output is permuted and the epilogue writes it back in order. The prefix MMAs run in fp16 (same
// rate): e4m3 -> f16x2 is one exact cvt, P (<= 2^RESCALE_SLACK) is written as f16, and Q is converted once with a
// power-of-two scale 2^-qexp that puts the tile's max |Q| in [2^14, 2^15) (exact for every bf16 value above
// 2^-17 of that max); 2^qexp goes into the logit scale. k_scale / v_scale as for bf16 pools.
// One CTA's work (w, set up by setup_work) in the kernel's 86,912 B of dynamic shared memory at smem: what
// verify_sm120_kernel runs, and the draft-block CTA of the 32-row e4m3 configuration (verify_sm120_e4m3_32.cuh).
// F4: the bf16 path's partial rows in 16-byte stores (write_partial_row_f4; the bf16-pool kernel); the fp8 pool's
// kernel and the 32-row e4m3 form's draft block keep write_partial_row (8-byte stores), whose kernels' schedules the
// other form moved (data/results/h100/2026-12-06-qrcp-landing-and-partial-f4/).
template <int BM, int STAGES, bool FP8 = false, bool F4 = false>
__device__ __forceinline__ void sm120_cta(const Params& p, const Work& w, unsigned char* smem) {
  using C = Cfg120<STAGES>;
  static_assert(BM == C::BM, "32-row tiles");
  static_assert(!(F4 && FP8), "F4 is the bf16 path's store form; an fp8 pool's prefix rows are stored permuted");
  constexpr int ROW = D_QK * 2;  // bytes per swizzled tile row
  float* sred = reinterpret_cast<float*>(smem + C::RING_BYTES);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::RING_BYTES + C::S_BYTES);
  float* stat = reinterpret_cast<float*>(smem + C::RING_BYTES + C::S_BYTES + C::P_BYTES);  // alpha | m | l

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qr = warp & 1, dh = (warp >> 1) & 1, kh = warp >> 2;
  const int mi = lane >> 3, sw = lane & 7;
  const uint32_t ring = smem_u32(smem), slot1 = ring + C::TILE_BYTES;
  auto swizzled = [](unsigned char* base) {
    return [base](int r, int ch) { return reinterpret_cast<__nv_bfloat16*>(base) + swz(r, ch); };
  };
  const bool fp8_prefix = FP8 && !w.draft;
  load_q_tile<BM, C::THREADS>(p, w, swizzled(smem + C::TILE_BYTES));

  // Per-thread shared-memory byte offsets (the per-slice offsets fold into the ldmatrix immediates).
  uint32_t kofs[2], vofs[4];
#pragma unroll
  for (int uu = 0; uu < 2; ++uu)
    kofs[uu] = ((16 * kh + (mi >> 1) * 8 + (lane & 7)) * D_QK + (((2 * (2 * dh + uu) + (mi & 1)) ^ sw) << 3)) * 2;
#pragma unroll
  for (int np = 0; np < 4; ++np)
    vofs[np] = (((mi & 1) * 8 + (lane & 7)) * D_QK + warp * 64 + (((2 * np + (mi >> 1)) ^ sw) << 3)) * 2;
  const uint32_t pa_addr = smem_u32(ps) + ((lane & 15) * C::P_PITCH + (lane >> 4) * 8) * 2;
  // e4m3 tiles (FP8): row r at 576 r, its 16-byte chunk c at position c ^ ((r >> 1) & 3) (conflict-free ldmatrix:
  // 576-byte rows put even and odd rows in the two halves of a 128-byte line). Lane l reads matrix l >> 3.
  constexpr int ROW8 = D_QK;
  uint32_t kofs8 = 0, vofs8[2] = {0, 0};
  if constexpr (FP8) {
    const int kr = 16 * kh + ((lane >> 3) & 1) * 8 + (lane & 7);  // K: keys 16kh + 0..15, dims of uu = lane >> 4
    kofs8 = kr * ROW8 + (((2 * dh + (lane >> 4)) ^ ((kr >> 1) & 3)) << 4);
    const int vr = ((lane >> 3) & 1) * 8 + (lane & 7);  // V: keys 0..15 of a k16 step, dv chunk 4 warp + 2 np + lane >> 4
#pragma unroll
    for (int np = 0; np < 2; ++np) vofs8[np] = vr * ROW8 + ((4 * warp + ((2 * np + (lane >> 4)) ^ ((vr >> 1) & 3))) << 4);
  }

  uint32_t qf[9][2][4];  // Q A fragments, loaded from slot 1 once
  auto load_q_regs = [&]() {
#pragma unroll
    for (int uu = 0; uu < 2; ++uu) {
      const uint32_t a = slot1 + ((16 * qr + (lane & 15)) * D_QK + (((2 * (2 * dh + uu) + (lane >> 4)) ^ sw) << 3)) * 2;
#pragma unroll
      for (int j = 0; j < 9; ++j) ldsm_x4(qf[j][uu], a + j * 128);
    }
  };

  // FP8 prefix CTAs: the same fragments with k permuted (dims 4t..4t+3 of each 16-dim chunk in registers 0 / 2 of
  // rows g and g + 8), read with 8-byte loads from the staged tile.
  int qexp = 0;  // FP8 prefix: Q is held as f16 times 2^-qexp
  auto load_q_regs_perm = [&]() {
    float mx = 0.f;  // max |Q| over the staged tile (zero-filled rows included)
    for (int idx = tid; idx < BM * (D_QK / 8); idx += C::THREADS) {
      const int r = idx / (D_QK / 8), ch = idx % (D_QK / 8);
      const uint4 v = ld_shared_v4(slot1 + r * ROW + (ch << 4));
      const uint32_t wds[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        mx = fmaxf(mx, fmaxf(fabsf(__uint_as_float(wds[k] << 16)), fabsf(__uint_as_float(wds[k] & 0xffff0000u))));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) stat[warp] = mx;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < C::WARPS; ++k) mx = fmaxf(mx, stat[k]);
    qexp = mx > 0.f && isfinite(mx) ? ilogbf(mx) - 14 : 0;
    const float qs = ldexpf(1.f, -qexp);
    auto to_f16 = [qs](uint32_t two_bf16) {
      return pack_f16(__uint_as_float(two_bf16 << 16) * qs, __uint_as_float(two_bf16 & 0xffff0000u) * qs);
    };
#pragma unroll
    for (int j = 0; j < 9; ++j)
#pragma unroll
      for (int uu = 0; uu < 2; ++uu) {
        const int ch = (64 * j + 32 * dh + 16 * uu) / 8 + ((lane & 3) >> 1);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * qr + 8 * half + (lane >> 2);
          const uint2 v = ld_shared_v2(slot1 + (r * D_QK + ((ch ^ (r & 7)) << 3)) * 2 + (lane & 1) * 8);
          qf[j][uu][half] = to_f16(v.x);
          qf[j][uu][2 + half] = to_f16(v.y);
        }
      }
  };

  float acc[2][8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
  const int srow = tid >> 3, skey = (tid & 7) * 4;  // softmax: this thread's row and first key of the step
  float m_ref = -INFINITY, l_part = 0.f;

  // One 32-key step over the K tile at kt and the V tile at vt (the same tile for the prefix); e4m3: an e4m3 tile
  // read in the permuted layouts above (std::true_type), else bf16.
  auto step = [&](auto e4m3, uint32_t kt, uint32_t vt, float scale, bool full, auto visible) {
    // Two accumulator sets (dims 64j + 32dh + 16uu, uu = 0 / 1): four independent HMMA chains of 9, not two of 18.
    float s2[2][2][4] = {};
    if constexpr (decltype(e4m3)::value) {
#pragma unroll
      for (int j = 0; j < 9; ++j) {
        uint32_t d[4];  // matrix 2 uu + nt: keys 16kh + 8nt .. + 7, dims 64j + 32dh + 16uu .. + 15
        ldsm_x4(d, kt + kofs8 + j * 64);
#pragma unroll
        for (int uu = 0; uu < 2; ++uu)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
            mma_f16(s2[uu][nt], qf[j][uu], e4m3x2_to_f16x2(d[2 * uu + nt]), e4m3x2_to_f16x2(d[2 * uu + nt] >> 16));
      }
    } else {
#pragma unroll
      for (int j = 0; j < 9; ++j)
#pragma unroll
        for (int uu = 0; uu < 2; ++uu) {
          uint32_t b[4];
          ldsm_x4(b, kt + kofs[uu] + j * 128);
          mma_bf16(s2[uu][0], qf[j][uu], b[0], b[1]);
          mma_bf16(s2[uu][1], qf[j][uu], b[2], b[3]);
        }
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
      if constexpr (decltype(e4m3)::value)  // P in f16 for the f16 PV MMA (P <= 2^RESCALE_SLACK)
        *reinterpret_cast<uint2*>(ps + srow * C::P_PITCH + skey) = make_uint2(pack_f16(x[0], x[1]), pack_f16(x[2], x[3]));
      else
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
      if constexpr (decltype(e4m3)::value) {
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t r[4];  // matrix 2 h + kk: keys 8kk .. + 7 of this k16, dv chunk 4 warp + 2 np + h
          ldsm_x4_trans(r, vt + vofs8[np] + k16 * 16 * ROW8);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int cc = 2 * np + h;  // n8 tiles 2cc (dv 16cc + 2g) and 2cc + 1 (dv 16cc + 2g + 1) of this warp
            const uint32_t e0 = e4m3x2_to_f16x2(prmt0(r[2 * h], 0x5420)), e1 = e4m3x2_to_f16x2(prmt0(r[2 * h + 1], 0x5420));
            const uint32_t o0 = e4m3x2_to_f16x2(prmt0(r[2 * h], 0x5431)), o1 = e4m3x2_to_f16x2(prmt0(r[2 * h + 1], 0x5431));
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma_f16(acc[mt][2 * cc], pa[mt], e0, e1);
              mma_f16(acc[mt][2 * cc + 1], pa[mt], o0, o1);
            }
          }
        }
      } else {
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
    }
  };

  if (FP8 && !w.draft) {
    // A four-slot ring of e4m3 tiles at ring + 18 KB s. Thread (lrow, lch) loads chunks lch + 8k (k < 5, chunk
    // < 36) of row lrow = 4 warp + lane / 8. Q is staged in slot 1 of the bf16 layout (bytes 36..72 KB: e4m3 slots
    // 2 and 3), so tiles 0 and 1 load beside it and tile 2 after Q is in registers; step t loads tile t + 3.
    constexpr int TILE8 = C::BN * ROW8;
    static_assert(4 * TILE8 <= C::RING_BYTES, "four e4m3 slots in the ring");
    const int lrow = warp * 4 + (lane >> 3), lch = lane & 7, sw8 = (lrow >> 1) & 3;
    const int ntiles = (w.kend - w.kbeg + C::BN - 1) / C::BN;
    const unsigned char* kb8 = reinterpret_cast<const unsigned char*>(p.kb);
    auto fetch = [&](int t) -> int64_t {
      const int key = w.kbeg + t * C::BN + lrow;
      return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
    };
    auto load8 = [&](int t, int64_t raw) {
      if (t >= ntiles) return;
      const uint32_t d = ring + (t & 3) * TILE8 + lrow * ROW8;
      const bool ok = w.kbeg + t * C::BN + lrow < w.kend;
      const int64_t slot = ok ? checked_slot(p, raw, lch == 0) : 0;
      const unsigned char* src = kb8 + slot * p.kb_s;
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        const int c = lch + 8 * k;
        if (k < 4 || lch < 4) cp_async_16s(d + ((c ^ sw8) << 4), src + c * 16, ok ? 16 : 0);
      }
    };
    load8(0, fetch(0));
    cp_async_commit();  // group 0: Q and tile 0
    load8(1, fetch(1));
    cp_async_commit();
    int64_t pending = fetch(2);
    cp_async_wait<1>();
    __syncthreads();
    load_q_regs_perm();
    __syncthreads();  // slot 1 of the bf16 layout (e4m3 slots 2, 3) is free
    load8(2, pending);
    cp_async_commit();
    pending = fetch(3);
    for (int t = 0; t < ntiles; ++t) {
      cp_async_wait<2>();  // this thread's part of tile t has landed (t + 1, t + 2 may be in flight)
      __syncthreads();     // all of tile t is visible; every warp is done with step t - 1, so its slot is free
      load8(t + 3, pending);
      cp_async_commit();
      pending = fetch(t + 4);
      const int key0 = w.kbeg + t * C::BN;
      const uint32_t tile = ring + (t & 3) * TILE8;
      step(std::true_type{}, tile, tile, ldexpf(p.scale_pre, qexp), key0 + C::BN <= w.kend,
           [&](int col, int) { return key0 + col < w.kend; });
    }
  } else if (!w.draft) {
    prefix_pipeline<STAGES, C::BN, C::TILE_BYTES, 128, false>(
        p, w, ring, [](int r, int lch) { return (uint32_t)(r * ROW + ((lch ^ (r & 7)) << 4)); },
        [&](uint32_t kt, int key0) {
          step(std::false_type{}, kt, kt, p.scale_pre, key0 + C::BN <= w.kend,
               [&](int col, int) { return key0 + col < w.kend; });
        },
        load_q_regs);
  } else {
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    load_q_regs();  // draft_pipeline's first barrier keeps slot 1 until every warp has its Q
    const DraftMask dm = draft_mask(p, w);
    draft_pipeline<C::BN, C::THREADS, false>(p, w, swizzled(smem), swizzled(smem + C::TILE_BYTES), [&](int key0) {
      step(std::false_type{}, ring, slot1, p.scale_draft, false,
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
      if constexpr (F4) {  // every lane (write_partial_row_f4 swaps values in lane pairs); rows past R are not stored
        write_partial_row_f4<8>(p, w.part0 + gr, gr < p.R, stat[BM + rr], stat[2 * BM + rr], vscale,
                                warp == 0 && (lane & 3) == 0, warp * 64, acc[mt], h);
        continue;
      }
      if (gr >= p.R) continue;
      if (fp8_prefix) {  // the permuted columns: dv 16cc + 4t .. + 3 are tiles 2cc, 2cc + 1, elements 2h, 2h + 1
        pdl_launch_dependents();
        const float l = stat[2 * BM + rr], inv = l > 0.f ? vscale / l : 0.f;
        const int64_t prow = w.part0 + gr;
        if (warp == 0 && (lane & 3) == 0) p.lse_part[prow] = l > 0.f ? stat[BM + rr] + log2f(l) : -INFINITY;
        float* dst = p.o_part + prow * D_V + warp * 64 + (lane & 3) * 4;
#pragma unroll
        for (int cc = 0; cc < 4; ++cc)
          *reinterpret_cast<float4*>(dst + 16 * cc) =
              make_float4(acc[mt][2 * cc][2 * h] * inv, acc[mt][2 * cc + 1][2 * h] * inv,
                          acc[mt][2 * cc][2 * h + 1] * inv, acc[mt][2 * cc + 1][2 * h + 1] * inv);
      } else {
        write_partial_row<8>(p, w.part0 + gr, stat[BM + rr], stat[2 * BM + rr], vscale, warp == 0 && (lane & 3) == 0,
                             warp * 64, acc[mt], h);
      }
    }
}

template <int BM, int STAGES, bool FP8 = false>
__global__ void __launch_bounds__(Cfg120<STAGES>::THREADS, 1) verify_sm120_kernel(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  Work w;
  if (!setup_work<BM, Cfg120<STAGES>::THREADS>(p, Cfg120<STAGES>::BN, w)) return;
  sm120_cta<BM, STAGES, FP8, !FP8>(p, w, smem);  // the bf16 pool's partial rows in 16-byte stores
}

template <int STAGES>
constexpr ConfigEntry sm120_entry() {
  static_assert(STAGES == 2, "name the new configuration below");
  return ConfigEntry{Cfg120<STAGES>::BM, STAGES, Cfg120<STAGES>::THREADS, Cfg120<STAGES>::SMEM, Cfg120<STAGES>::BN,
                     "verify_sm120_kernel<32,2>", &verify_sm120_kernel<Cfg120<STAGES>::BM, STAGES>, ARCH_MMA_SYNC,
                     KV_BF16_BIT};
}

constexpr ConfigEntry sm120_fp8_entry() {
  return ConfigEntry{Cfg120<2>::BM, 2, Cfg120<2>::THREADS, Cfg120<2>::SMEM, Cfg120<2>::BN,
                     "verify_sm120_kernel<32,2,true>", &verify_sm120_kernel<Cfg120<2>::BM, 2, true>, ARCH_MMA_SYNC,
                     KV_FP8_BIT};
}

}  // namespace kdt
