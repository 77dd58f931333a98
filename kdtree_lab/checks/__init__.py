"""What proves the kernels correct, fast and capture-safe: the fp64 oracle, the verify-batch builder, parity, the
benchmark (timing, roofline arithmetic, presets, post-processing), CUDA graphs, the capture audit and its plants,
the sanitizer cases, SGLang's own kernels as the reference. Imports ``core``, ``contract`` and ``kernels``."""
