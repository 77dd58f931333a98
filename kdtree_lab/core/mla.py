"""MLA's fixed widths and scales, as the kernels see them (the C side: kernels/common/frame.cuh D_QK, D_V). A leaf
module."""

D_QK = 576  # a latent KV row: kv_lora_rank (512) + qk_rope_head_dim (64); also Q's width after absorption
D_V = 512  # the V part of a latent row (kv_lora_rank): the output width
# DeepSeek-V2/V3 and Kimi K2 scale logits by 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim) = 1 / sqrt(128 + 64)
MODEL_SM_SCALE = 192 ** -0.5
# extend_attention_fwd's own default when its caller passes sm_scale=None: 1 / sqrt(q's last dim)
KERNEL_DEFAULT_SM_SCALE = D_QK ** -0.5
