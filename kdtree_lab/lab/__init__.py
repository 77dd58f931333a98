"""The notebook lab: the environment doctor, run profiles, the papermill runner, results records, provenance,
figures, and every GPU of a node or cluster (Dask)."""
