"""The way into an SGLang server: the verify hook for its Triton backend, and the launcher and plugin that install
it in every rank."""
