"""Generation checked token for token: a small model of the DeepSeek-V3 / Kimi K2 architecture (transformers' own
classes, trained briefly on text Python ships), its attention in the absorbed MLA form over a paged latent pool laid
out as SGLang lays it, a draft model, and speculative decoding (chains, EAGLE trees, DDTree) verified by our kernel,
the SGLang hook, SGLang's Triton kernel or the fp32 reference in the same loop, every emitted token compared with
greedy decoding (docs/generation.md).

Modules, lowest first: ``model`` (the architecture and its absorbed weights), ``corpus`` (text, training,
prompts), ``pool`` (the latent pool and its slots), ``forward`` (the absorbed forward), ``attend`` (the verify
paths), ``drafts`` (draft configurations and the drafter), ``loop`` (the step: draft, verify, accept; graphs),
``check`` (tokens against fp32 greedy decoding), ``run`` (a whole check and its summary).
"""
