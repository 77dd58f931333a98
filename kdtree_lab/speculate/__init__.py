"""Speculative decoding end to end: what a verify kernel buys in tokens per second, against today's best.

- ``acceptance``: tokens committed per verify step for chains and DDTree trees, from per-depth draft distributions
  (exact per step; a step population calibrated to published acceptance lengths or the user's own).
- ``kernel_times``: verify (ours over a bf16 and an fp8 pool, SGLang's) and one-token decode attention per layer
  from the committed benchmark grids of the current default kernels (measured on the H200; predicted by the card
  model, and labelled so, for sm_120 cards), or measured here.
- ``card_model``: an sm_120 card's time for a kernel timed on the H200 (the floor plus the largest of its bytes, its
  tensor work and its issue-bound H200 time scaled by SMs x clock), each input sourced in ``gpus.yaml``.
- ``card_checks``: the card model against every published sm_120 measurement found, and the error band it carries.
- ``presets``: the model's inputs from ``data/presets/speculation.yaml`` (architectures, rates, drafts, today's
  best, published measurements), each with its source.
- ``step``: the model of one decode step of an MLA MoE target per GPU, each part with its source.
- ``today``: today's best (vLLM's TRITON_MLA decode rows with full CUDA graphs) as that step's parts, seven values
  fitted to the published tables and pinned.
- ``sweep``: tokens per second by context for no speculation, a chain and trees of N nodes with each verify kernel;
  the best variant per context within each pool's capacity; the break-even context.
- ``published``: the model against measurements no one here made, cell by cell, and the band it carries.
- ``answer``: the one table a person reads: today's best, the best setup with ours, the ratio with its band.
"""
