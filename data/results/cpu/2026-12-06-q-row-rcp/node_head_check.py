"""node_head (kernels/common/frame.cuh, from q-row-rcp.patch) against integer division: every gr < 2^21,
H = 1..1024, the reciprocal correctly rounded and 1 or 2 ulp off either way. Prints the mismatches (0 expected)."""
import numpy as np
gr = np.arange(0, 1 << 21, dtype=np.int64)
grf = gr.astype(np.float32)
bad = 0
for H in range(1, 1025):
    r0 = np.float32(1.0) / np.float32(H)
    for ulp in (-2, -1, 0, 1, 2):
        r = np.float32(r0)
        for _ in range(abs(ulp)):
            r = np.nextafter(r, np.float32(np.inf if ulp > 0 else -np.inf), dtype=np.float32)
        t = np.trunc(grf * r).astype(np.int64)
        h = gr - t * H
        up = h >= H; t[up] += 1; h[up] -= H
        dn = h < 0; t[dn] -= 1; h[dn] += H
        bad += int(np.count_nonzero((t != gr // H) | (h != gr % H)))
print("mismatches:", bad)
