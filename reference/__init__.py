"""The reference implementation of the transformer-spec contract (``docs/contract.md``).

One module per concept; this package exports exactly the contract's names.
"""

from .attention import scaled_dot_product_attention
from .blocks import TransformerDecoderBlock, TransformerEncoderBlock
from .feedforward import FeedForward
from .masks import causal_mask, padding_mask
from .minigpt import MiniGPT
from .multihead import MultiHeadAttention, MultiHeadSelfAttention
from .position import LearnedPositionEmbedding, SinusoidalPositionEncoding
from .seq2seq import Seq2SeqTransformer

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "FeedForward",
    "TransformerEncoderBlock",
    "TransformerDecoderBlock",
    "SinusoidalPositionEncoding",
    "LearnedPositionEmbedding",
    "MiniGPT",
    "Seq2SeqTransformer",
]
