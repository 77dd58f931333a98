"""SGLang's target-verify buffer contract (``data/contracts/``) and the audit of a call's buffers against it: what
the kernels are written against. Imports only ``core``."""
