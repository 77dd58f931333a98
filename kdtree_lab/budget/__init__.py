"""The memory budget for SGLang 0.5.23 with the verify kernel: the deployment asked about, the presets, SGLang's
memory formulas, the per-GPU weights under SGLang's sharding (and the caching allocator that holds them), the
calculator, the launch line, the calibration from logs and measurements, the public figures it is checked against,
the widget. Torch- and ctypes-free (it runs on a CPU without a GPU stack); imports ``core``, ``contract`` and
``kernels.launch_plan``."""
