"""Speculative decoding end to end: what a verify kernel buys in tokens per second.

- ``acceptance``: tokens committed per verify step for chains and DDTree trees, from per-depth draft distributions
  (exact per step; a step population calibrated to published acceptance lengths or the user's own).
- ``kernel_times``: verify and one-token decode attention per layer from the committed benchmark grid of the
  current default kernels (measured on the H200; predicted, and labelled so, for sm_120 cards), or measured here.
- ``presets``: the model's inputs from ``data/presets/speculation.yaml`` (architectures, rates, drafts, published
  measurements), each with its source.
- ``step``: the model of one decode step of an MLA MoE target per GPU, each part with its source.
- ``sweep``: tokens per second by context for no speculation, a chain and trees of N nodes with each verify kernel;
  the best variant per context; the break-even context.
- ``published``: the model against measurements no one here made.
"""
