// The e4m3 forms' Q pass (verify_sm120_e4m3.cuh, verify_sm120_e4m3_32.cuh): Q's two e4m3 terms and each row's logit
// scale (e4m3_rows.cuh has what they round), computed once per call by a small kernel before the split kernel rather
// than by the QK warps of every prefix CTA. The split kernel is its programmatic dependent (PDL): it launches at once,
// its PV warps load the first KV tiles, and its QK warps wait (pdl_wait) only where they read the terms. Before this
// pass each QK warp converted its m-tile's Q itself (a max pass and a terms pass over 1,152 B a row): ~7 us of a
// short call's ~13 us split kernel on an H100 (data/results/h100/2026-12-05-device-queue/call6-phase-clocks/). With
// it, on an H100 (timing library): a short call 2-7 us less, the fp8 headline 0.149 -> 0.139 ms, outputs bit for bit
// the forms' own (data/results/h100/2026-12-05-q-pass/).
//
// The workspace's q8 (Params::q8) holds, per request and 16-row group of its rows (rows padded to Q8_ROWS_ALIGN),
// each term as the A fragments of an m16n8k32 m-tile: [group][term][32-dim step j][lane][16 B], the 16 bytes lane
// (g, t4) holds in its four A registers (rows g / g + 8, dims 32 j + 4 t4 .. + 3 / 32 j + 16 + 4 t4 .. + 3), so a QK
// lane loads a step of a term in one 16-byte load, a warp 512 contiguous bytes. q8_scale: each row's logit scale.
// Rows past the request's are zeros with the scale of a zero row, as the forms computed them.
#pragma once
#include "../common/frame.cuh"
#include "e4m3_rows.cuh"
#include "roles_common.cuh"

namespace kdt {

struct QPass {
  static constexpr int STEPS = D_QK / 32;                     // 18 32-dim steps a row
  static constexpr int GROUP_ROWS = 16;                       // an m16n8k32 m-tile's rows: q8's unit
  static constexpr int STEP_BYTES = 32 * 16;                  // one term's step of a group: 16 bytes a lane
  static constexpr int GROUP_BYTES = 2 * STEPS * STEP_BYTES;  // a group's two terms: 18,432
  static constexpr int WARPS = 6, STEPS_PER_WARP = STEPS / WARPS, THREADS = 32 * WARPS;
  static_assert(STEPS % WARPS == 0 && GROUP_BYTES == GROUP_ROWS * 2 * Q8_TERM_BYTES, "a group's terms, whole");
  static_assert(Q8_ROWS_ALIGN % GROUP_ROWS == 0, "whole groups");
};

// rows a request keeps in q8 (N x H padded; int on the device, size_t for the host's workspace sizes)
template <class T>
__host__ __device__ constexpr T q8_rows(T rows) {
  return (rows + Q8_ROWS_ALIGN - 1) / Q8_ROWS_ALIGN * Q8_ROWS_ALIGN;
}

// One CTA per (16-row group, request): warp wj converts 32-dim steps 3 wj .. + 2 of the group's 16 rows (lane g, t4:
// rows g and g + 8, as a QK lane holds them); the rows' max |value| meets over the quad and then the six warps.
__global__ void __launch_bounds__(QPass::THREADS) e4m3_q_pass_kernel(Params p) {
  phase_mark(2, PH_ENTRY);
  pdl_launch_dependents();  // the split kernel may launch now: it reads q8 only after its pdl_wait
  __shared__ float amax_s[QPass::WARPS][2][32];
  const int b = blockIdx.y, grp = blockIdx.x, lane = threadIdx.x & 31, wj = threadIdx.x >> 5, g = lane >> 2,
            t4 = lane & 3;
  Work w;  // the request's rows as setup_work counts them (n_b clamped to N; setup_work flags it)
  w.tok0 = load_qo(p, b);
  w.rows_b = max(min((int)(load_qo(p, b + 1) - w.tok0), p.N), 0) * p.H;
  w.row0 = 16 * grp;
  const __nv_bfloat16* row[2] = {q_row(p, w, g), q_row(p, w, 8 + g)};
  uint2 v[QPass::STEPS_PER_WARP][2][2];  // [step][half][h]
  float amax[2] = {0.f, 0.f};
#pragma unroll
  for (int s = 0; s < QPass::STEPS_PER_WARP; ++s)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        v[s][half][h] = e4m3_q_ld4(row, h, 32 * (QPass::STEPS_PER_WARP * wj + s) + 16 * half + 4 * t4);
        amax[h] = e4m3_q_absmax(amax[h], v[s][half][h]);
      }
  // the max is exact, so its order is free: the forms' own (one quad over all 18 steps) gave the same bits
#pragma unroll
  for (int h = 0; h < 2; ++h) amax_s[wj][h][lane] = quad_max(amax[h]);
  __syncthreads();
  float qs[2], scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = amax_s[0][h][lane];
#pragma unroll
    for (int k = 1; k < QPass::WARPS; ++k) m = fmaxf(m, amax_s[k][h][lane]);
    e4m3_q_scale_of(p, m, qs[h], scale[h]);
  }
  // group grp of request b in q8 (Q8Tile reads the same addresses); the rows' scales below
  const int rp = q8_rows(p.R);
  uint8_t* frag = p.q8 + ((int64_t)b * (rp / QPass::GROUP_ROWS) + grp) * QPass::GROUP_BYTES + 16 * lane;
#pragma unroll
  for (int s = 0; s < QPass::STEPS_PER_WARP; ++s) {
    const int j = QPass::STEPS_PER_WARP * wj + s;
    uint32_t first[4], second[4];
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int h = 0; h < 2; ++h) e4m3_q_split4(v[s][half][h], qs[h], first[2 * half + h], second[2 * half + h]);
    *reinterpret_cast<uint4*>(frag + QPass::STEP_BYTES * j) = make_uint4(first[0], first[1], first[2], first[3]);
    *reinterpret_cast<uint4*>(frag + QPass::STEP_BYTES * (QPass::STEPS + j)) =
        make_uint4(second[0], second[1], second[2], second[3]);
  }
  if (wj == 0 && t4 == 0) {
    float* sc = p.q8_scale + (int64_t)b * rp + QPass::GROUP_ROWS * grp + g;
    sc[0] = scale[0], sc[8] = scale[1];
  }
  phase_mark(2, PH_DONE);
}

// A QK lane's m-tile in q8: rows row0 + 16 mt + g, + 8 of the CTA's request (blockIdx.z). Read only after pdl_wait.
struct Q8Tile {
  const uint8_t* frag;
  float scale[2];
  __device__ __forceinline__ Q8Tile(const Params& p, const Work& w, int mt, int lane) {
    const int rp = q8_rows(p.R), b = blockIdx.z, r = w.row0 + QPass::GROUP_ROWS * mt;
    frag = p.q8 + ((int64_t)b * (rp / QPass::GROUP_ROWS) + r / QPass::GROUP_ROWS) * QPass::GROUP_BYTES + 16 * lane;
    const float* sc = p.q8_scale + (int64_t)b * rp + r + (lane >> 2);
    scale[0] = sc[0], scale[1] = sc[8];
  }
  // step j's A fragment of the first term (0) or the second (1). Loaded through the non-coherent path after
  // pdl_wait, which makes the pass's writes visible to this grid; nothing reads q8 before it (fresh data in every one
  // of 23 capture sizes x 100 replays matched, 2026-12-05)
  __device__ __forceinline__ const void* src(int term, int j) const {
    return frag + QPass::STEP_BYTES * (QPass::STEPS * term + j);
  }
  __device__ __forceinline__ void load(int term, int j, uint32_t (&a)[4]) const { ld_global_nc_v4(a, src(term, j)); }
};

}  // namespace kdt
