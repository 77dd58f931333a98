"""The generated blocks of README.md and docs/, one module per subject (``scripts/readme_tables.py`` maps each
block name to its function and rewrites the pages).

- ``runs``: the runs of record quoted, the shapes selected, kernel names.
- ``common``: helpers every table uses.
- ``h200``: the H200 kernels (v1 to v5) and their targets.
- ``defaults``: the current defaults, the headline sentence, the implementation registry, the chain grid.
- ``sm120``: the sm_120 kernels forced on the H200, their targets, the XQA MLA peer.
- ``fp8``: fp8 pools, the mma.sync rate per instruction, the e4m3 configuration's accuracy.
- ``peers``: b12x's dense MLA, the closest sm_120 peer, beside ours.
- ``rtx``: predictions for RTX cards.
- ``card_floor``: issue 52's targets, the sm_120 forms against their runs' floors (H200 records; each H100 grid call).
- ``speculation``: notebook 07's tables.
"""
