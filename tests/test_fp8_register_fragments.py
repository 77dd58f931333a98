"""CPU model of the fp8 register path's fragment index math (verify_sm120_kernel<32,2,true>, prefix CTAs): emulate
ldmatrix (.x4, .trans), the m16n8k16 fragment layouts, the e4m3 tile swizzle and the permutations, and compare one
32-key step's S (QK over each warp's dims) and P V (each warp's 64 output columns) with direct products
(it restates the kernel's addresses, swizzle, selectors and epilogue order: keep the two in step; it proves the index
math, the GPU tests prove the kernel)."""
import numpy as np

rng = np.random.default_rng(0)
D_QK, D_V, BN, BM = 576, 512, 32, 32
ROW8 = D_QK
LUT = rng.standard_normal(256)  # "e4m3 -> value": any injective table checks the index math


def cvt(two_bytes):  # a 16-bit pair of e4m3 codes -> (lo value, hi value)
    return (LUT[two_bytes & 0xFF], LUT[(two_bytes >> 8) & 0xFF])


def prmt0(a, sel):
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [0, 0, 0, 0]
    return sum(src[(sel >> (4 * k)) & 0xF] << (8 * k) for k in range(4))


# ---- an e4m3 tile of 32 keys in shared memory, swizzled as the kernel stores it
codes = rng.integers(0, 256, size=(BN, D_QK), dtype=np.int64)
smem8 = np.zeros(BN * ROW8, dtype=np.int64)
for r in range(BN):
    for c in range(36):
        pos = c ^ ((r >> 1) & 3)
        smem8[r * ROW8 + pos * 16: r * ROW8 + pos * 16 + 16] = codes[r, c * 16: c * 16 + 16]
Kval = LUT[codes]  # [key, dim]


def word(addr):  # 32-bit little-endian word of bytes at addr
    return int(sum(int(smem8[addr + i]) << (8 * i) for i in range(4)))


def ldsm_x4(addrs, trans=False):
    """addrs[lane]: row address supplied by each lane. Returns regs[lane][i] (32-bit) for matrices i < 4."""
    out = [[0] * 4 for _ in range(32)]
    for i in range(4):
        rows = [addrs[8 * i + rr] for rr in range(8)]
        for T in range(32):
            g, t = T // 4, T % 4
            if not trans:  # row g, b16 elements 2t, 2t+1 -> bytes 4t..4t+3
                out[T][i] = word(rows[g] + 4 * t)
            else:  # b16 element g of rows 2t and 2t+1
                lo = int(smem8[rows[2 * t] + 2 * g]) | int(smem8[rows[2 * t] + 2 * g + 1]) << 8
                hi = int(smem8[rows[2 * t + 1] + 2 * g]) | int(smem8[rows[2 * t + 1] + 2 * g + 1]) << 8
                out[T][i] = lo | hi << 16
    return out


def mma(A_regs, B_regs):
    """A_regs[lane] = 4 regs, each a pair (lo, hi) of values; B_regs[lane] = 2 pairs. Returns C [16, 8]."""
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for T in range(32):
        g, t = T // 4, T % 4
        (a0, a1), (a2, a3), (a4, a5), (a6, a7) = A_regs[T]
        A[g, 2 * t], A[g, 2 * t + 1], A[g + 8, 2 * t], A[g + 8, 2 * t + 1] = a0, a1, a2, a3
        A[g, 2 * t + 8], A[g, 2 * t + 9], A[g + 8, 2 * t + 8], A[g + 8, 2 * t + 9] = a4, a5, a6, a7
        (b0, b1), (b2, b3) = B_regs[T]
        B[2 * t, g], B[2 * t + 1, g], B[2 * t + 8, g], B[2 * t + 9, g] = b0, b1, b2, b3
    return A @ B


def c_to_thread(C):  # C[16, 8] -> per lane (c0, c1, c2, c3)
    return [(C[T // 4, 2 * (T % 4)], C[T // 4, 2 * (T % 4) + 1], C[T // 4 + 8, 2 * (T % 4)],
             C[T // 4 + 8, 2 * (T % 4) + 1]) for T in range(32)]


# ---- Q staged as bf16 (values kept exact), swizzled by (row & 7) in 16-byte chunks, read with 8-byte loads
Qval = rng.standard_normal((BM, D_QK))
qsm = np.zeros(BM * D_QK)  # element-addressed
for r in range(BM):
    for ch in range(72):
        qsm[r * D_QK + ((ch ^ (r & 7)) << 3): r * D_QK + ((ch ^ (r & 7)) << 3) + 8] = Qval[r, ch * 8: ch * 8 + 8]


def ld_v2(byte_addr):
    e = byte_addr // 2
    return (qsm[e], qsm[e + 1]), (qsm[e + 2], qsm[e + 3])




def test_fp8_register_path_fragments_match_direct_products():
    errs = []
    for warp in range(8):
        qr, dh, kh = warp & 1, (warp >> 1) & 1, warp >> 2
        # Q fragments, permuted
        qf = {}
        for j in range(9):
            for uu in range(2):
                regs = []
                for lane in range(32):
                    ch = (64 * j + 32 * dh + 16 * uu) // 8 + ((lane & 3) >> 1)
                    r4 = [None] * 4
                    for half in range(2):
                        r = 16 * qr + 8 * half + (lane >> 2)
                        x, y = ld_v2((r * D_QK + ((ch ^ (r & 7)) << 3)) * 2 + (lane & 1) * 8)
                        r4[half], r4[2 + half] = x, y
                    regs.append(r4)
                qf[j, uu] = regs
        # K fragments
        kofs8 = []
        for lane in range(32):
            kr = 16 * kh + ((lane >> 3) & 1) * 8 + (lane & 7)
            kofs8.append(kr * ROW8 + (((2 * dh + (lane >> 4)) ^ ((kr >> 1) & 3)) << 4))
        S = np.zeros((2, 16, 16))  # [uu] rows 16qr.., keys 16kh..
        for j in range(9):
            d = ldsm_x4([kofs8[l] + j * 64 for l in range(32)])
            for uu in range(2):
                for nt in range(2):
                    B = [(cvt(d[T][2 * uu + nt] & 0xFFFF), cvt(d[T][2 * uu + nt] >> 16)) for T in range(32)]
                    S[uu][:, 8 * nt: 8 * nt + 8] += mma(qf[j, uu], B)
        S = S.sum(0)
        dims = [64 * j + 32 * dh + 16 * uu + x for j in range(9) for uu in range(2) for x in range(16)]
        ref = Qval[16 * qr: 16 * qr + 16][:, dims] @ Kval[16 * kh: 16 * kh + 16][:, dims].T
        errs.append(np.abs(S - ref).max())

        # PV: P [32 rows, 32 keys] as A fragments (standard layout), V from the e4m3 tile via ldmatrix.trans
        P = rng.standard_normal((BM, BN))
        acc = np.zeros((2, 8, 32, 4))
        vofs8 = []
        for np_ in range(2):
            vofs8.append([])
            for lane in range(32):
                vr = ((lane >> 3) & 1) * 8 + (lane & 7)
                vofs8[np_].append(vr * ROW8 + ((4 * warp + ((2 * np_ + (lane >> 4)) ^ ((vr >> 1) & 3))) << 4))
        for k16 in range(2):
            pa = []
            for mt in range(2):
                regs = []
                for T in range(32):
                    g, t = T // 4, T % 4
                    rows, cols = 16 * mt + g, 16 * k16
                    regs.append([(P[rows, cols + 2 * t], P[rows, cols + 2 * t + 1]),
                                 (P[rows + 8, cols + 2 * t], P[rows + 8, cols + 2 * t + 1]),
                                 (P[rows, cols + 2 * t + 8], P[rows, cols + 2 * t + 9]),
                                 (P[rows + 8, cols + 2 * t + 8], P[rows + 8, cols + 2 * t + 9])])
                pa.append(regs)
            for np_ in range(2):
                r = ldsm_x4([vofs8[np_][l] + k16 * 16 * ROW8 for l in range(32)], trans=True)
                for h in range(2):
                    cc = 2 * np_ + h
                    E = [(cvt(prmt0(r[T][2 * h], 0x5420) & 0xFFFF), cvt(prmt0(r[T][2 * h + 1], 0x5420) & 0xFFFF))
                         for T in range(32)]
                    O = [(cvt(prmt0(r[T][2 * h], 0x5431) & 0xFFFF), cvt(prmt0(r[T][2 * h + 1], 0x5431) & 0xFFFF))
                         for T in range(32)]
                    for mt in range(2):
                        acc[mt, 2 * cc] += np.array(c_to_thread(mma(pa[mt], E)))
                        acc[mt, 2 * cc + 1] += np.array(c_to_thread(mma(pa[mt], O)))
        # the epilogue's column order: dv 16cc + 4t .. +3 = (E[2h], O[2h], E[2h+1], O[2h+1])
        out = np.zeros((BM, D_V))
        for mt in range(2):
            for h in range(2):
                for T in range(32):
                    g, t = T // 4, T % 4
                    rr = 16 * mt + 8 * h + g
                    for cc in range(4):
                        col = warp * 64 + 16 * cc + 4 * t
                        out[rr, col: col + 4] = (acc[mt, 2 * cc, T, 2 * h], acc[mt, 2 * cc + 1, T, 2 * h],
                                                 acc[mt, 2 * cc, T, 2 * h + 1], acc[mt, 2 * cc + 1, T, 2 * h + 1])
        ref_o = P @ Kval[:, :D_V]
        errs.append(np.abs(out[:, warp * 64: warp * 64 + 64] - ref_o[:, warp * 64: warp * 64 + 64]).max())

    assert max(errs) < 1e-9, errs
