// Phase clocks, a development build's probe (KDT_PHASE_CLOCKS=1 in the environment builds its own library with
// -DKDT_PHASE_CLOCKS; in every other build each mark compiles to nothing, and the normal library's SASS is the same
// as without the marks: where a mark sits can still move code, e.g. one between the role split's publish_p and
// swap changed its sm_90a schedule, so a new mark is checked with scripts/sass_identity.py). Lane 0 of each warp stores the SM's clock64 and the global nanosecond timer at named points
// of its CTA's work, so a short call's time can be split inside its CTAs: how long a CTA waits for its indptr, its
// Q prologue, its first tile, each tile, its epilogue, when the combine starts against the split kernel's last
// CTA, and when the e4m3 forms' Q pass (entry and done only) runs against both (kdtree_lab.checks.phase_clocks reads
// and summarises them; docs/performance.md, "The fixed cost per call").
// Each mark is one branch on the lane and two stores, in the order the code runs: a phase build's times are its own.
#pragma once
#include <stdint.h>

namespace kdt {

enum PhaseMark : int {
  PH_ENTRY = 0,  // kernel entry
  PH_WORK,       // setup_work returned: qo_indptr and kv_indptr read (split kernel); the row's indptr read (combine)
  PH_READY,      // the CTA's mbarriers initialised and its first barrier passed
  PH_PROLOGUE,   // QK warp: Q in registers; PV warp: the first ring tiles issued; combine: griddepcontrol.wait left
  PH_FIRST,      // QK warp: tile 0's keys arrived; PV warp: P(0) acquired
  PH_TILE0,      // QK warp: P(0) published, which in its pipelined loop comes after tile 1's keys arrived and tile
                 // 1's MMAs were issued (tile0 - first is not one tile's cost); PV warp: tile 0's MMAs issued, after
                 // its V fragments and the refill of tile 0's slot
  PH_LOOP,       // the tile loop left (PV warp: and its copies complete)
  PH_DONE,       // the warp's last write issued: row statistics (QK), partial rows (PV, draft block), output (combine)
  PH_MARKS
};

constexpr int PHASE_CTAS = 2048, PHASE_WARPS = 16, PHASE_KERNELS = 3;  // 0: split kernel, 1: combine, 2: Q pass

struct PhaseStamp {
  unsigned long long cyc, ns;  // clock64 of the warp's SM, %globaltimer
};

// What a phase build records (one device variable; kdtree_verify_phase_clocks copies it out): per kernel, CTA
// (blockIdx.x + gridDim.x (blockIdx.y + gridDim.y blockIdx.z)), warp and mark a stamp (0 where never reached), and
// per split-kernel CTA its SM, tile count and whether it is the draft block.
struct PhaseBuffers {
  PhaseStamp stamp[PHASE_KERNELS][PHASE_CTAS][PHASE_WARPS][PH_MARKS];
  int meta[PHASE_CTAS][4];  // smid, ntiles, draft, 1 (written)
};

#if defined(KDT_PHASE_CLOCKS)
__device__ PhaseBuffers g_phase;

// The CTA's linear index and the warp, read from the special registers at each mark (volatile: nothing of a mark
// is hoisted or kept live across the code it stamps, so the marks add no registers to the loops between them)
__device__ __forceinline__ unsigned phase_cta() {
  unsigned x, y, z, nx, ny;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(x));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(y));
  asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(nx));
  asm volatile("mov.u32 %0, %%nctaid.y;" : "=r"(ny));
  return x + nx * (y + ny * z);
}

__device__ __forceinline__ void phase_mark(int kernel, int mark) {
  unsigned tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  const unsigned cta = phase_cta(), warp = tid >> 5;
  if ((tid & 31) == 0 && cta < PHASE_CTAS && warp < PHASE_WARPS) {
    unsigned long long ns, cyc;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(cyc));
    g_phase.stamp[kernel][cta][warp][mark] = PhaseStamp{cyc, ns};
  }
}

__device__ __forceinline__ void phase_meta(int ntiles, bool draft) {
  const unsigned cta = phase_cta();
  if (threadIdx.x == 0 && cta < PHASE_CTAS) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    g_phase.meta[cta][0] = (int)smid, g_phase.meta[cta][1] = ntiles, g_phase.meta[cta][2] = draft ? 1 : 0;
    g_phase.meta[cta][3] = 1;
  }
}
#else
__device__ __forceinline__ void phase_mark(int, int) {}
__device__ __forceinline__ void phase_meta(int, bool) {}
#endif

}  // namespace kdt
