"""Seed 000's facts: the causal mask of 7.1, the sinusoidal encoding of step 6, parameter counts
of the seed's default configuration, and the sqrt(d_k) experiment of step 8.

Expected numbers are written out with their derivation; none comes from the reference.
"""

import math

import pytest
import torch

from transformer_spec.probes.assertions import assert_close, assert_equal

# ---------------------------------------------------------------- 7.1: the causal mask


@pytest.mark.component("masks")
@pytest.mark.needs('causal_mask')
def test_causal_mask_4_as_printed_in_7_1(impl):
    printed = [
        [False, True, True, True],  # position 0 only sees itself
        [False, False, True, True],  # position 1 sees 0 and 1
        [False, False, False, True],  # position 2 sees 0, 1, 2
        [False, False, False, False],  # position 3 sees everything
    ]
    assert_equal(impl.causal_mask(4), torch.tensor(printed), what="causal_mask(4)",
                 seed="seed 000 section 7.1")


@pytest.mark.component("masks")
@pytest.mark.needs('causal_mask')
def test_causal_mask_1_and_device_argument(impl):
    assert_equal(impl.causal_mask(1, device=torch.device("cpu")), torch.tensor([[False]]),
                 what="causal_mask(1, device='cpu')", seed="seed 000 section 7.1")


# ---------------------------------------------------------------- step 6: sinusoidal encoding
# With d_model = 8 the frequencies 1 / 10000^(2i/8) are exactly 1, 0.1, 0.01, 0.001 (i = 0..3), so
# PE[pos] = [sin(pos), cos(pos), sin(pos/10), cos(pos/10), sin(pos/100), cos(pos/100),
#            sin(pos/1000), cos(pos/1000)]. Values below: Python's math.sin / math.cos.
SIN1, COS1 = 0.8414709848078965, 0.5403023058681398  # sin(1), cos(1)
SIN_1, COS_1 = 0.09983341664682815, 0.9950041652780258  # sin(0.1), cos(0.1)
SIN_01, COS_01 = 0.009999833334166664, 0.9999500004166653  # sin(0.01), cos(0.01)
SIN_001, COS_001 = 0.0009999998333333417, 0.9999995000000417  # sin(0.001), cos(0.001)
SIN_5, COS_5 = 0.479425538604203, 0.8775825618903728  # sin(0.5), cos(0.5)
SIN10, COS10 = -0.5440211108893698, -0.8390715290764524  # sin(10), cos(10)
PE_ENTRIES = [  # (pos, feature, value)
    (1, 0, SIN1), (1, 1, COS1), (1, 2, SIN_1), (1, 3, COS_1),
    (1, 4, SIN_01), (1, 5, COS_01), (1, 6, SIN_001), (1, 7, COS_001),
    (5, 2, SIN_5), (5, 3, COS_5),  # 5 / 10 = 0.5
    (50, 4, SIN_5), (50, 5, COS_5),  # 50 / 100 = 0.5
    (10, 0, SIN10), (10, 1, COS10),  # 10 / 1
    (100, 2, SIN10), (100, 3, COS10),  # 100 / 10
    (100, 6, SIN_1), (100, 7, COS_1),  # 100 / 1000 = 0.1
]
# The table may be stored in float32 (the seed's buffer is), so compare at float32 precision.
PE_TOL = {"rtol": 1e-5, "atol": 2e-6}


def _table(impl, d_model, max_len, length, dtype):
    """PE[:length] through the contract's forward: x = 0 gives x + pe[:, :L] = pe[:, :L]."""
    enc = impl.SinusoidalPositionEncoding(d_model, max_len=max_len)
    return enc(torch.zeros(1, length, d_model, dtype=dtype))[0]


@pytest.mark.component("position")
def test_sinusoidal_position_0_is_0_1_0_1(impl, dtype):
    pe = _table(impl, 16, 32, 1, dtype)
    assert_close(pe[0], torch.tensor([0.0, 1.0] * 8, dtype=dtype), **PE_TOL,
                 what="PE[pos=0] = [sin 0, cos 0, ...]", seed="seed 000 step 6")


@pytest.mark.component("position")
def test_sinusoidal_hand_computed_entries(impl, dtype):
    pe = _table(impl, 8, 128, 101, dtype)
    got = torch.stack([pe[p, f] for p, f, _ in PE_ENTRIES])
    expected = torch.tensor([v for _, _, v in PE_ENTRIES], dtype=dtype)
    for (p, f, _), g, e in zip(PE_ENTRIES, got, expected, strict=True):
        assert_close(g, e, **PE_TOL, what=f"PE[pos={p}, feature={f}] with d_model=8", seed="seed 000 step 6")


@pytest.mark.component("position")
def test_sinusoidal_wavelengths_run_from_2pi_to_10000_2pi(impl):
    """Pair i turns by w_i = 1/10000^(2i/D) per position: recovered as atan2(PE[1,2i], PE[1,2i+1]).

    Wavelengths 2 pi / w_i start at 2 pi (i = 0), grow by 10000^(2/D) per pair and end at
    2 pi * 10000^((D-2)/D), just below 10000 * 2 pi (seed 000 step 6, D = 512).
    """
    d = 512
    pe = _table(impl, d, 4, 2, torch.float64)
    omega = torch.atan2(pe[1, 0::2], pe[1, 1::2])  # (256,)
    wavelengths = 2 * math.pi / omega
    i = torch.arange(d // 2, dtype=torch.float64)
    expected = 2 * math.pi * 10000.0 ** (2 * i / d)
    where = "seed 000 step 6"
    assert_close(wavelengths, expected, rtol=1e-4, atol=0, what="wavelength of each sin/cos pair", seed=where)
    assert wavelengths[0].item() == pytest.approx(2 * math.pi, rel=1e-6), (
        f"{where}: the first pair (features 0, 1) must have wavelength 2*pi = 6.28319, got {wavelengths[0].item():.6g}"
    )
    assert 2 * math.pi * 9000 < wavelengths[-1].item() < 2 * math.pi * 10000, (
        f"{where}: the last pair's wavelength must be just below 10000 * 2*pi = 62831.9 "
        f"(2*pi * 10000^(510/512) = 60612), got {wavelengths[-1].item():.6g}"
    )


# ---------------------------------------------------------------- parameter counts
# The seed's defaults: d_model = 512, num_heads = 8, d_ff = 2048 for the building blocks,
# MiniGPT(vocab_size, d_model=128, num_heads=4, num_layers=4, d_ff=512) (vocab_size = 100 here).
D, FF = 512, 2048
MHA_COUNT = 4 * D * D  # W_Q, W_K, W_V, W_O without bias: 4 * 512^2 = 1_048_576
FFN_COUNT = D * FF + FF + FF * D + D  # 1_048_576 + 2048 + 1_048_576 + 512 = 2_099_712
LN_COUNT = 2 * D  # weight + bias = 1024
ENCODER_COUNT = MHA_COUNT + FFN_COUNT + 2 * LN_COUNT  # 3_150_336
DECODER_COUNT = 2 * MHA_COUNT + FFN_COUNT + 3 * LN_COUNT  # 4_199_936
V, d, ff, layers = 100, 128, 512, 4
GPT_BLOCK = 4 * d * d + (d * ff + ff + ff * d + d) + 2 * 2 * d  # 65_536 + 131_712 + 512 = 197_760
MINIGPT_COUNT = V * d + layers * GPT_BLOCK + 2 * d  # 12_800 + 791_040 + 256 = 804_096 (lm_head tied: 0)


def _count(module):
    # parameters() yields a shared (tied) tensor once.
    return sum(p.numel() for p in module.parameters())


def _check_count(module, expected, what, derivation):
    got = _count(module)
    assert got == expected, (
        f"{what}: expected {expected:,} trainable parameters ({derivation}), got {got:,}; "
        f"parameters: {[(n, tuple(p.shape)) for n, p in module.named_parameters()][:12]}"
    )


@pytest.mark.component("mha")
def test_parameter_count_multihead_attention(impl):
    assert MHA_COUNT == 1_048_576
    _check_count(impl.MultiHeadAttention(), MHA_COUNT, "MultiHeadAttention()",
                 "4 * d_model^2 for W_Q, W_K, W_V, W_O without bias")
    _check_count(impl.MultiHeadSelfAttention(), MHA_COUNT, "MultiHeadSelfAttention()", "4 * d_model^2")


@pytest.mark.component("ffn")
def test_parameter_count_feed_forward(impl):
    assert FFN_COUNT == 2_099_712
    _check_count(impl.FeedForward(), FFN_COUNT, "FeedForward()", "512*2048 + 2048 + 2048*512 + 512")


@pytest.mark.component("encoder")
def test_parameter_count_encoder_block(impl):
    assert ENCODER_COUNT == 3_150_336
    _check_count(impl.TransformerEncoderBlock(), ENCODER_COUNT, "TransformerEncoderBlock()",
                 "attention 4*512^2 + FFN 2,099,712 + 2 LayerNorms of 2*512")


@pytest.mark.component("decoder")
def test_parameter_count_decoder_block(impl):
    assert DECODER_COUNT == 4_199_936
    _check_count(impl.TransformerDecoderBlock(), DECODER_COUNT, "TransformerDecoderBlock()",
                 "2 attentions of 4*512^2 + FFN 2,099,712 + 3 LayerNorms of 2*512")


@pytest.mark.component("position")
def test_sinusoidal_table_is_a_buffer_not_a_parameter(impl):
    """The contract's ``pe`` is a buffer: the fixed table is not trained (seed 000 step 6 registers it
    with ``register_buffer``), so the encoding has no trainable parameters."""
    module = impl.SinusoidalPositionEncoding(8, max_len=16)
    _check_count(module, 0, "SinusoidalPositionEncoding(8, max_len=16)", "the sin/cos table is a fixed buffer")
    assert "pe" in dict(module.named_buffers()), (
        f"SinusoidalPositionEncoding: `pe` must be a buffer (register_buffer), got buffers "
        f"{[n for n, _ in module.named_buffers()]}")

@pytest.mark.component("minigpt")
def test_parameter_count_minigpt_with_weight_tying(impl):
    assert MINIGPT_COUNT == 804_096
    model = impl.MiniGPT(V)
    assert model.lm_head.weight is model.token_embed.weight or (
        model.lm_head.weight.data_ptr() == model.token_embed.weight.data_ptr()
    ), "MiniGPT: lm_head.weight must be tied to token_embed.weight (the same tensor), seed 000 step 7"
    _check_count(model, MINIGPT_COUNT, "MiniGPT(vocab_size=100)",
                 "embedding 100*128 + 4 blocks of 197,760 + final LayerNorm 256; the tied lm_head counted once")


# ---------------------------------------------------------------- step 8: the sqrt(d_k) experiment
N_QUERIES, N_KEYS = 256, 32


def _experiment(impl, d_k, scale):
    """Mean entropy and mean maximum weight of softmax(q k^T * scale), q, k ~ N(0, 1) (fixed seed)."""
    gen = torch.Generator().manual_seed(d_k)
    q = torch.randn(N_QUERIES, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(N_KEYS, d_k, generator=gen, dtype=torch.float64)
    v = torch.zeros(N_KEYS, 1, dtype=torch.float64)
    _, w = impl.scaled_dot_product_attention(q, k, v, scale=scale)
    entropy = -torch.special.xlogy(w, w).sum(-1).mean().item()
    return entropy, w.max(-1).values.mean().item()


@pytest.mark.component("attention")
@pytest.mark.needs('scale')
def test_sqrt_dk_experiment_of_step_8(impl):
    """Without scaling the softmax saturates as d_k grows; with 1/sqrt(d_k) it does not.

    q, k ~ N(0, 1): q . k has variance d_k, so unscaled scores have std sqrt(d_k) (16 at d_k=256)
    and the largest of 32 weights takes almost everything; scaled scores have std 1 whatever d_k.
    (With this seed: unscaled mean max weight 0.66 / 0.82 / 0.91 for d_k = 16 / 64 / 256, scaled
    about 0.16-0.19; scaled mean entropy about 3.0 nats of at most ln 32 = 3.47.)
    """
    where = "seed 000 step 8"
    rows = {dk: (_experiment(impl, dk, 1.0), _experiment(impl, dk, None)) for dk in (16, 64, 256)}
    table = "; ".join(
        f"d_k={dk}: unscaled entropy {u[0]:.3f} max {u[1]:.3f}, scaled entropy {s[0]:.3f} max {s[1]:.3f}"
        for dk, (u, s) in rows.items()
    )
    (u_ent, u_max), (s_ent, s_max) = rows[256]
    assert u_max > 0.85, f"{where}: at d_k=256 without scaling the mean max weight should be near 1; {table}"
    assert s_max < 0.3 and s_ent > 2.5, (
        f"{where}: at d_k=256 with scaling (scale=None) the weights should be spread out "
        f"(mean max < 0.3, entropy > 2.5); {table}"
    )
    assert s_ent > u_ent + 2.0, f"{where}: scaling must raise the entropy a lot at d_k=256; {table}"
    unscaled_max = [rows[dk][0][1] for dk in (16, 64, 256)]
    assert unscaled_max == sorted(unscaled_max), f"{where}: unscaled saturation must grow with d_k; {table}"
    scaled_ent = [rows[dk][1][0] for dk in (16, 64, 256)]
    assert max(scaled_ent) - min(scaled_ent) < 0.3, (
        f"{where}: with 1/sqrt(d_k) the entropy should hardly depend on d_k; {table}"
    )
