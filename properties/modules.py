"""The modules under test, built from a drawn :class:`~properties.strategies.Config`.

One builder a contract class, so that every law constructs a module with the same arguments:
``config``'s sizes, its dtype, weights seeded from ``config.seed`` (:func:`strategies.build`), in
``eval()`` and with the default dropout (which must not act there). :func:`with_parameters` is
for the laws that compare two modules holding the same named weights.
"""

from __future__ import annotations

import torch.nn as nn

from transformer_spec.probes.testing import set_parameters

from .strategies import Config, build


def feed_forward(impl, config: Config) -> nn.Module:
    return build(impl.FeedForward, config, d_model=config.d_model, d_ff=config.d_ff)


def attention_module(cls, config: Config) -> nn.Module:
    """``MultiHeadAttention`` or ``MultiHeadSelfAttention`` (``cls``) of ``config``'s sizes."""
    return build(cls, config, d_model=config.d_model, num_heads=config.num_heads)


def multihead_attention(impl, config: Config) -> nn.Module:
    return attention_module(impl.MultiHeadAttention, config)


def self_attention(impl, config: Config) -> nn.Module:
    return attention_module(impl.MultiHeadSelfAttention, config)


def encoder_block(impl, config: Config, norm_first: bool) -> nn.Module:
    return build(impl.TransformerEncoderBlock, config, d_model=config.d_model, num_heads=config.num_heads,
                 d_ff=config.d_ff, norm_first=norm_first)


def decoder_block(impl, config: Config, norm_first: bool) -> nn.Module:
    return build(impl.TransformerDecoderBlock, config, d_model=config.d_model, num_heads=config.num_heads,
                 d_ff=config.d_ff, norm_first=norm_first)


def minigpt(impl, config: Config, vocab: int, layers: int = 1, max_len: int = 8) -> nn.Module:
    return build(impl.MiniGPT, config, vocab_size=vocab, d_model=config.d_model, num_heads=config.num_heads,
                 num_layers=layers, d_ff=config.d_ff, max_len=max_len)


def seq2seq(impl, config: Config, *, src_vocab: int = 6, tgt_vocab: int = 7, max_len: int = 10,
            pad_id: int = 0) -> nn.Module:
    """``Seq2SeqTransformer`` with one encoder and one decoder layer."""
    return build(impl.Seq2SeqTransformer, config, src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab,
                 d_model=config.d_model, num_heads=config.num_heads, num_encoder_layers=1,
                 num_decoder_layers=1, d_ff=config.d_ff, max_len=max_len, pad_id=pad_id)


def with_parameters(cls, config: Config, params: dict, **kwargs) -> nn.Module:
    """``cls(**kwargs)`` in ``config.dtype`` and ``eval()``, holding the named weights ``params``."""
    return set_parameters(cls(**kwargs).to(config.dtype).eval(), params)
