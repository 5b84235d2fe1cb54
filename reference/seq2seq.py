"""The encoder-decoder Transformer (seed 001 section 2).

    memory = encoder(embed(src))                      # source padding blocked
    logits = out(decoder(embed(tgt), memory))         # causal self-attention, padding-blocked cross-attention
"""

from __future__ import annotations

import math
import numbers

import torch.nn as nn

from ._validation import check_dropout, check_heads, check_positive_int, check_tokens
from .blocks import TransformerDecoderBlock, TransformerEncoderBlock
from .init import init_weights
from .masks import causal_mask, padding_mask
from .position import SinusoidalPositionEncoding


class Seq2SeqTransformer(nn.Module):
    """Pre-LN encoder and decoder stacks with sinusoidal positions and an output projection."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, num_heads=4,
                 num_encoder_layers=2, num_decoder_layers=2, d_ff=512, max_len=128,
                 dropout=0.1, pad_id=0):
        super().__init__()
        check_positive_int("src_vocab_size", src_vocab_size)
        check_positive_int("tgt_vocab_size", tgt_vocab_size)
        check_heads(d_model, num_heads)
        check_positive_int("num_encoder_layers", num_encoder_layers)
        check_positive_int("num_decoder_layers", num_decoder_layers)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_dropout(dropout)
        if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
            raise TypeError(f"pad_id must be an int token id, got {pad_id!r}")
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.d_model = d_model
        self.max_len = max_len
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.pos_encoding = SinusoidalPositionEncoding(d_model, max_len)
        self.encoder = nn.ModuleList(
            [TransformerEncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_encoder_layers)]
        )
        self.decoder = nn.ModuleList(
            [TransformerDecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_decoder_layers)]
        )
        self.encoder_norm = nn.LayerNorm(d_model)  # Pre-LN stacks end with a LayerNorm
        self.decoder_norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, tgt_vocab_size)
        self.apply(init_weights)

    def forward(self, src, tgt):
        """``(src (B, Ls), tgt (B, Lt))`` long -> logits ``(B, Lt, tgt_vocab_size)``."""
        check_tokens("src", src, self.src_vocab_size, self.max_len)
        check_tokens("tgt", tgt, self.tgt_vocab_size, self.max_len)
        if src.size(0) != tgt.size(0):
            raise ValueError(
                f"src and tgt must have the same batch size, got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}"
            )
        ### BEGIN SOLUTION
        scale = math.sqrt(self.d_model)
        src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, Ls): padded source keys blocked
        tgt_mask = causal_mask(tgt.size(1), device=tgt.device)  # (Lt, Lt): no peeking ahead

        memory = self.pos_encoding(self.src_embed(src) * scale)  # (B, Ls, D)
        for block in self.encoder:
            memory, _ = block(memory, src_mask)
        memory = self.encoder_norm(memory)

        x = self.pos_encoding(self.tgt_embed(tgt) * scale)  # (B, Lt, D)
        for block in self.decoder:
            x, _, _ = block(x, memory, tgt_mask, src_mask)
        return self.out(self.decoder_norm(x))  # (B, Lt, tgt_vocab)
        ### END SOLUTION
