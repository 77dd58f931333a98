// Host-side check of the e4m3 configuration's tile layout (common/layout.cuh, namespace e4m3; the kernel is
// mma_sync/verify_sm120_e4m3.cuh), exhaustive over lanes, 32-dim steps, key halves, PV warps and output chunks: the
// loads' map covers the tile once; every ldmatrix the QK warps issue hands each thread the (key, dim) bytes mma.sync
// m16n8k32 expects in its B fragment (register i: k = 16 i + 4 (t % 4) + byte, n = t / 4); every ldmatrix.trans of
// the PV warps, after the kernel's prmt, hands each thread V's bytes at the keys P's A fragment holds for the same
// k (A register i: rows t / 4 (+ 8 for odd i), k = 16 (i >> 1) + 4 (t % 4) + byte; P packed from the m16n8
// accumulators of four 8-key n-tiles, element e of n-tile n at key 8 n + 2 (t % 4) + (e & 1)); the epilogue writes
// the even / odd column tiles back in column order; the eight rows of each 8x8 matrix fall on eight 16-byte bank
// groups. ldmatrix: lane l gives the address of row l & 7 of matrix l >> 3; thread t receives (row t / 4, b16 columns
// 2 (t % 4), + 1), or with .trans (b16 rows 2 (t % 4), + 1, column t / 4). Exits non-zero on any problem.
#include <stdio.h>

#include <vector>

#include "../common/layout.cuh"

using namespace kdt::e4m3;

static int problems = 0;
static void problem(const char* what, int a, int b, int c, int d) {
  if (++problems <= 20) printf("%s (%d, %d, %d, %d)\n", what, a, b, c, d);
}

static uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {  // PTX prmt.b32 (default mode)
  const uint64_t x = ((uint64_t)b << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) d |= (uint32_t)((x >> (8 * ((sel >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return d;
}

int main() {
  std::vector<int> key_at(TILE, -1), dim_at(TILE, -1);  // per byte of the tile
  for (int r = 0; r < KEYS; ++r)
    for (int c = 0; c < ROW / 16; ++c) {
      const uint32_t off = tile_offset(r, c);
      if (off % 16 || off + 16 > (uint32_t)TILE) {
        problem("load offset outside the tile or unaligned", r, c, off, 0);
        continue;
      }
      for (int b = 0; b < 16; ++b) {
        if (key_at[off + b] >= 0) problem("two bytes stored at one offset", r, c, off + b, key_at[off + b]);
        key_at[off + b] = r;
        dim_at[off + b] = 16 * c + b;
      }
    }
  for (int i = 0; i < TILE; ++i)
    if (key_at[i] < 0) problem("tile byte no load writes", i, 0, 0, 0);
  auto conflict_free = [&](const uint32_t* addr, const char* who, int a, int b, int c) {
    for (int m = 0; m < 4; ++m) {
      unsigned groups = 0;
      for (int r = 0; r < 8; ++r) groups |= 1u << ((addr[8 * m + r] / 16) % 8);
      if (groups != 0xffu) problem(who, a, b, c, m);
    }
  };
  // the 4 bytes thread t receives from matrix m whose 8 row addresses are addr[8 m ..]: (key, dim) of each byte
  auto receive = [&](const uint32_t* addr, int m, int t, bool trans, int (&key)[4], int (&dim)[4]) {
    for (int b = 0; b < 4; ++b) {
      const int row = trans ? 2 * (t % 4) + b / 2 : t / 4, col = trans ? 2 * (t / 4) + b % 2 : 4 * (t % 4) + b;
      const uint32_t a = addr[8 * m + row] + col;
      key[b] = a < (uint32_t)TILE ? key_at[a] : -1;
      dim[b] = a < (uint32_t)TILE ? dim_at[a] : -1;
    }
  };
  // QK: B fragments of n-tiles 2 half, 2 half + 1 for 32-dim step j
  for (int j = 0; j < ROW / 32; ++j)
    for (int half = 0; half < 2; ++half) {
      uint32_t addr[32];
      for (int l = 0; l < 32; ++l) {
        addr[l] = k_frag_base(l, j & 1) + 64 * (j >> 1) + 16 * ROW * half;
        const int mi = l >> 3, key = 16 * half + 8 * (mi >> 1) + (l & 7);
        if (addr[l] != tile_offset(key, 2 * j + (mi & 1))) problem("K row address is not its chunk's", j, half, l, 0);
        if (lane_swizzle(l) != ((key >> 1) & 3)) problem("a K row's swizzle is not the lane's", j, half, l, 0);
      }
      conflict_free(addr, "K ldmatrix bank conflict (j, half, -, matrix)", j, half, 0);
      for (int m = 0; m < 4; ++m)
        for (int t = 0; t < 32; ++t) {
          int key[4], dim[4];
          receive(addr, m, t, false, key, dim);
          for (int b = 0; b < 4; ++b)  // matrix m: n-tile 2 half + (m >> 1), register m & 1
            if (key[b] != 16 * half + 8 * (m >> 1) + t / 4 || dim[b] != 32 * j + 16 * (m & 1) + 4 * (t % 4) + b)
              problem("K fragment byte is not mma.sync's (j, half, matrix, thread)", j, half, m, t);
        }
    }
  // PV: V's B fragments for output chunk 4 pw + cc, even (column 2 g) and odd (2 g + 1) tiles, against P's key order
  for (int pw = 0; pw < 8; ++pw)
    for (int cc = 0; cc < 4; ++cc) {
      uint32_t addr[32];
      for (int l = 0; l < 32; ++l) {
        addr[l] = v_frag_row(l, pw) + 16 * (cc ^ lane_swizzle(l));
        if (addr[l] != tile_offset(l, 4 * pw + cc)) problem("V row address is not its chunk's", pw, cc, l, 0);
      }
      conflict_free(addr, "V ldmatrix.trans bank conflict (pw, cc, -, matrix)", pw, cc, 0);
      for (int t = 0; t < 32; ++t) {
        int key[4][4], dim[4][4];
        uint32_t r[4];  // the received registers, as byte codes: (key, dim) -> index into the decoded table
        for (int m = 0; m < 4; ++m) {
          receive(addr, m, t, true, key[m], dim[m]);
          r[m] = 0x03020100u + 0x04040404u * m;  // byte b of register m is code 4 m + b
        }
        const uint32_t sel[2] = {0x6420u, 0x7531u};  // even, odd columns (the kernel's prmt)
        for (int par = 0; par < 2; ++par)
          for (int reg = 0; reg < 2; ++reg) {
            const uint32_t v = prmt(r[2 * reg], r[2 * reg + 1], sel[par]);
            for (int b = 0; b < 4; ++b) {
              const int code = (v >> (8 * b)) & 0xff, m = code / 4, bb = code % 4;
              // k = 16 reg + 4 (t % 4) + b: P's A fragment holds there n-tile 2 reg + (b >> 1), element b & 1
              const int want_key = 8 * (2 * reg + (b >> 1)) + 2 * (t % 4) + (b & 1);
              const int want_dim = 64 * pw + 16 * cc + 2 * (t / 4) + par;
              if (key[m][bb] != want_key || dim[m][bb] != want_dim)
                problem("V fragment byte is not at P's key and the tile's column (pw, cc, thread, b)", pw, cc, t, b);
            }
          }
      }
      // the epilogue: thread t's row-g elements (even e0, odd e0, even e1, odd e1) are columns 16 cc + 4 (t % 4) ..
      for (int t = 0; t < 32; ++t)
        for (int i = 0; i < 4; ++i) {
          const int par = i & 1, e = i >> 1, n = 2 * (t % 4) + e;  // accumulator column n of tile `par`
          if (16 * cc + 2 * n + par != 16 * cc + 4 * (t % 4) + i) problem("epilogue column order", pw, cc, t, i);
        }
    }
  if (problems) {
    printf("%d problem(s)\n", problems);
    return 1;
  }
  printf("e4m3 tile: %d keys x %d bytes, K and V fragments of every lane, step, half and chunk decoded: layout ok\n",
         KEYS, ROW);
  return 0;
}
