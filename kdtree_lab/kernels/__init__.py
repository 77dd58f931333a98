"""The kernels and their loading, selection and dispatch: the C ABI, the nvcc build and its checks, the library
loader (the torch custom op), the implementation registry, the launch plan, dispatch, the Triton twin and its
ahead-of-time compile. Imports ``core`` and ``contract``."""
