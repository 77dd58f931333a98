"""The 32-row e4m3 form's 64-key step as a loop of two paths (fiftieth session, 2026-12-08; pure Python).

The QK warps publish P(s) at p(s). The PV warps then take P(s), issue step s's MMAs, read step s + 1's V (their
registers hold one step of V fragments) and refill step s + 1's slots with step s + 3's tiles: that refill goes at
p(s) + A, A = acquire + PV MMAs + two tiles' V reads + the copies' issue, and lands Lmem later. The QK warps start
step s + 2 at p(s + 1) (row maxima, pair barrier: Tq_pre), wait for step s + 3's tiles, then issue step s + 3's MMAs
beside step s + 2's exponentials (Tq_mma) and publish P(s + 2). So

    p(s + 2) = max(p(s + 1) + Tq_pre, p(s) + A + Lmem) + Tq_mma,

whose period T is Tq_pre + Tq_mma where the QK warps never wait, else (A + Lmem + Tq_mma) / 2: a cycle off A or
Lmem is half a cycle off a step. Calibrated on the H100 profile of 2026-12-07
(data/results/h100/2026-12-07-previous-p-and-ncu-32/, B = 8, L = 200k, N = 4: 395.4 us at 1.46 GHz over 195 steps
a CTA, the QK warps waiting for the ring 23% of their loop's samples, the PV warps issuing the refill 12% of theirs,
their MMA block 20%), then each change's A and PV path. A model, not a measurement: its numbers are predictions.

    python3 lead_model.py
"""

STEP_CYCLES = 395.4e-6 * 1.46e9 / 195  # the measured period at B = 8, 200k (cycles a 64-key step)
QK_WAIT = 0.23                         # the QK warps' share waiting for a step's tiles
PV_MMA = 0.20 * STEP_CYCLES            # the PV warps' MMA block a step
PV_REFILL = 0.12 * STEP_CYCLES         # the copies' issue a step (both tiles)
PV_V = 0.08 * STEP_CYCLES              # both tiles' V reads a step (16 ldmatrix, 64 prmt; an estimate)
PV_ACQ = 0.03 * STEP_CYCLES            # P taken, the rescale flags (an estimate)
TQ_MMA_SHARE = 0.8                     # of the QK warps' busy time, the part after the wait for the tiles


def period(a: float, lmem: float, tq_pre: float, tq_mma: float, pv_busy: float) -> float:
    """A step's cycles: the QK path, the ring's loop (A + Lmem + Tq_mma) / 2, or the PV warps' own work."""
    return max(tq_pre + tq_mma, (a + lmem + tq_mma) / 2, pv_busy)


def main() -> None:
    qk_busy = (1 - QK_WAIT) * STEP_CYCLES
    tq_mma, tq_pre = TQ_MMA_SHARE * qk_busy, (1 - TQ_MMA_SHARE) * qk_busy
    a_main = PV_ACQ + PV_MMA + PV_V + PV_REFILL
    lmem = 2 * STEP_CYCLES - tq_mma - a_main  # the ring's loop gives the measured period
    pv_main = PV_ACQ + PV_MMA + PV_V + PV_REFILL
    print(f"calibrated: step {STEP_CYCLES:.0f} cycles, QK busy {qk_busy:.0f} (pre {tq_pre:.0f}, MMAs {tq_mma:.0f}), "
          f"A {a_main:.0f}, Lmem {lmem:.0f} ({lmem / 1.46e3:.2f} us)")
    cases = {
        "main": (a_main, pv_main),
        # the next step's first tile's V read beside this step's MMAs: one tile's V reads off A
        "e4m3-32-v-early.patch": (a_main - PV_V / 2, pv_main),
        # and each tile's slot refilled once its V is read: the second tile's refill waits on half the copies
        "e4m3-32-v-early-split.patch": (a_main - PV_V / 2 - PV_REFILL / 2, pv_main),
        # and a fifth slot: a step's second tile comes into the slot of a first tile two steps before, refilled once
        # that tile's MMAs (half the block) and V read are done
        "e4m3-32-v-early-split-ring5.patch": (PV_ACQ + PV_MMA / 2 + PV_V / 2 + PV_REFILL / 2, pv_main),
        # no refill at all: no ring loop, no copies in the PV warps' work
        "no-refill ablation": (-1e9, pv_main - PV_REFILL),
        # the copies issued, no warp waiting for them
        "no-full-wait ablation": (-1e9, pv_main),
        # eight PV warps of 64 columns: a warp's MMAs and V reads half as long (the tensor pipe then holds both)
        "eight PV warps (not written)": (a_main - PV_MMA / 2 - PV_V / 2, pv_main - PV_MMA / 2 - PV_V / 2),
    }
    base = period(a_main, lmem, tq_pre, tq_mma, pv_main)
    for name, (a, pv) in cases.items():
        t = period(a, lmem, tq_pre, tq_mma, pv)
        print(f"{name:36s} {t:6.0f} cycles a step  {100 * (t / base - 1):+5.1f}%")


if __name__ == "__main__":
    main()
