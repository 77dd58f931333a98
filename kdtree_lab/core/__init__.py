"""The lowest layer: facts every other part reads (MLA widths, KV dtypes, draft trees, repository paths, the CUDA
tools on this machine, runtime choices, text display). Imports nothing else of kdtree_lab; torch-free except
``dtypes``' torch mapping, which is looked up only when asked for."""
