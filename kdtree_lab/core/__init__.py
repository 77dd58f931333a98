"""The lowest layer: facts every other part reads (MLA widths, KV dtypes, draft trees, repository paths, the CUDA
tools on this machine, runtime choices, text display). Imports nothing else of kdtree_lab, and not torch (a KV
dtype's torch dtype is looked up when asked for); tests/test_imports.py keeps the first, test_launch_plan.py the
second for what the budget imports."""
