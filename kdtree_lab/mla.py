"""MLA's fixed widths, as the kernels see them (the C side: kernels/common/frame.cuh D_QK, D_V). A leaf module."""

D_QK = 576  # a latent KV row: kv_lora_rank (512) + qk_rope_head_dim (64); also Q's width after absorption
D_V = 512  # the V part of a latent row (kv_lora_rank): the output width
