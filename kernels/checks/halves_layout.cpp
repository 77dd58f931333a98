// Host-side check of the sm_120 third form's tile layout (mma_sync/verify_sm120_halves_layout.cuh), exhaustive over
// lanes, k16 steps and halves: the loads' map covers the tile once; every ldmatrix the QK and PV warps issue hands
// each thread the (key, dim) elements mma.sync m16n8k16 expects in its B fragment; the eight rows of each 8x8
// matrix fall on eight different 16-byte bank groups (no conflict). ldmatrix semantics: lane l gives the address
// of row l & 7 of matrix l >> 3; thread t receives elements (row t / 4, columns 2 (t % 4), + 1) of each matrix, or
// with .trans (rows 2 (t % 4), + 1, column t / 4). B fragment (k x n, "col"): register 0 holds k = 2 (t % 4), + 1
// at n = t / 4, register 1 the same at k + 8. Prints one line per problem and exits non-zero if there is any.
#include <stdio.h>

#include <vector>

#include "../mma_sync/verify_sm120_halves_layout.cuh"

using namespace kdt::halves;

static int problems = 0;
static void problem(const char* what, int a, int b, int c, int d) {
  if (++problems <= 20) printf("%s (%d, %d, %d, %d)\n", what, a, b, c, d);
}

int main() {
  const int chunks = TILE / 16;
  std::vector<int> key_at(chunks, -1), dim_at(chunks, -1);
  auto place = [&](uint32_t off, int key, int dim) {
    if (off % 16 || off >= (uint32_t)TILE) return problem("load offset outside the tile or unaligned", key, dim, off, 0);
    if (key_at[off / 16] >= 0) return problem("two chunks stored at one offset", key, dim, off, key_at[off / 16]);
    key_at[off / 16] = key;
    dim_at[off / 16] = dim;
  };
  for (int k = 0; k < BN; ++k) {
    for (int c = 0; c < 32; ++c) place(lat_offset(k, c), k, 8 * c);
    for (int c = 0; c < 4; ++c) place(rope_offset(k, c), k, 256 + 8 * c);
  }
  for (int i = 0; i < chunks; ++i)
    if (key_at[i] < 0) problem("tile chunk no load writes", i, 0, 0, 0);
  auto conflict_free = [&](const uint32_t* addr, const char* who, int a, int b, int c) {
    for (int j = 0; j < 4; ++j) {
      unsigned groups = 0;
      for (int r = 0; r < 8; ++r) groups |= 1u << ((addr[8 * j + r] / 16) % 8);
      if (groups != 0xffu) problem(who, a, b, c, j);
    }
  };
  // QK warps: B = K^T of keys 16 kh + 8 (j >> 1) + n at local dims kdim + 8 (j & 1) + k, for matrix j
  for (int dh = 0; dh < 2; ++dh)
    for (int kk = 0; kk < 9; ++kk)
      for (int kh = 0; kh < 2; ++kh) {
        uint32_t addr[32];
        for (int l = 0; l < 32; ++l)
          addr[l] = kk < 8 ? k_step(k_base(l), kk, kh, dh) : rope_step(rope_base(l, dh), kh);
        conflict_free(addr, "K ldmatrix bank conflict (dh, kk, kh, matrix)", dh, kk, kh);
        const int kdim = kk < 8 ? 128 * dh + 16 * kk : 256 + 16 * dh;
        for (int j = 0; j < 4; ++j)
          for (int t = 0; t < 32; ++t) {
            const uint32_t a = addr[8 * j + t / 4];
            if (a % 16 || a >= (uint32_t)TILE) {
              problem("K ldmatrix address outside the tile (dh, kk, kh, lane)", dh, kk, kh, 8 * j + t / 4);
              continue;
            }
            const int key = key_at[a / 16], dim = dim_at[a / 16] + 2 * (t % 4);
            if (key != 16 * kh + 8 * (j >> 1) + t / 4 || dim != kdim + 8 * (j & 1) + 2 * (t % 4))
              problem("K fragment holds the wrong element (dh, kk, kh, thread)", dh, kk, kh, t);
          }
      }
  // PV warps: B = V of keys 16 ks + 8 (j & 1) + k at output columns 64 pw + 16 np + 8 (j >> 1) + n, for matrix j
  for (int pw = 0; pw < 4; ++pw)
    for (int ks = 0; ks < 2; ++ks)
      for (int np = 0; np < 4; ++np) {
        uint32_t addr[32];
        for (int l = 0; l < 32; ++l) addr[l] = v_step(v_base(l, pw), ks, np);
        conflict_free(addr, "V ldmatrix bank conflict (pw, ks, np, matrix)", pw, ks, np);
        for (int j = 0; j < 4; ++j) {
          const uint32_t a0 = addr[8 * j];
          for (int r = 0; r < 8; ++r) {
            const uint32_t a = addr[8 * j + r];
            if (a % 16 || a >= (uint32_t)TILE || dim_at[a / 16] != dim_at[a0 / 16] || dim_at[a / 16] >= 256) {
              problem("V matrix rows not one latent column block (pw, ks, np, lane)", pw, ks, np, 8 * j + r);
              continue;
            }
          }
          for (int t = 0; t < 32; ++t) {
            const uint32_t a = addr[8 * j + 2 * (t % 4)], b = addr[8 * j + 2 * (t % 4) + 1];
            if (a >= (uint32_t)TILE || b >= (uint32_t)TILE) continue;
            const int key = key_at[a / 16], col = dim_at[a / 16] + t / 4;
            if (key != 16 * ks + 8 * (j & 1) + 2 * (t % 4) || key_at[b / 16] != key + 1 ||
                col != 64 * pw + 16 * np + 8 * (j >> 1) + t / 4)
              problem("V fragment holds the wrong element (pw, ks, np, thread)", pw, ks, np, t);
          }
        }
      }
  printf(problems ? "%d layout problems\n" : "layout ok\n", problems);
  return problems ? 1 : 0;
}
