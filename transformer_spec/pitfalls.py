"""The pitfall catalogue: mistakes students really make, each a small patch of the reference.

Every :class:`Pitfall` is a list of :mod:`transformer_spec.patching` patches ``(file, old, new)``
of ``reference/``, the component whose code it breaks (one of ``contract.COMPONENTS``), a short
name and a one-line explanation addressed to a student. Because each patch names the exact text
it replaces, a patch that no longer applies after the reference changes raises ``PatchError``
(``tests/test_pitfalls.py`` applies every one) instead of silently testing nothing.

Uses: ``python -m tools.mutants`` runs the whole suite on each pitfall (the kill matrix), and
:mod:`transformer_spec.diagnose` recognises a pitfall in a failing submission by its behaviour.

Sources: seed 001 section 10 (the mask forgotten, shapes mixed up, softmax over the wrong
dimension), seed 000 (the sqrt(d_k) scaling, the sqrt(d_model) embedding scale), issue 6, and
issue 13 (a finite mask fill as in seed 001 sections 8.1 and 11; source padding from lengths).
"""

from __future__ import annotations

from dataclasses import dataclass

from .contract import COMPONENTS
from .patching import Patch

#: Generation mistakes are written against the plain (uncached) loop, as a student writes it.
_NO_CACHE: Patch = ("minigpt.py", "generator=None,\n                 use_cache=True):",
                    "generator=None,\n                 use_cache=False):")


@dataclass(frozen=True)
class Pitfall:
    """One known mistake."""

    name: str
    component: str
    explanation: str
    patches: tuple[Patch, ...]


def _p(name: str, component: str, explanation: str, *patches: Patch) -> Pitfall:
    return Pitfall(name, component, explanation, tuple(patches))


_SPLIT = "self.W_{p}({a}).view(B, {n}, self.num_heads, self.d_k).transpose(1, 2)"

CATALOGUE: tuple[Pitfall, ...] = (
    # ------------------------------------------------------------------ attention
    _p("no_scaling", "attention",
       "The scores are not divided by sqrt(d_k): softmax(QK^T) V saturates for large d_k "
       "(seed 000: `scores / math.sqrt(d_k)`).",
       ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0")),
    _p("scaled_by_d_k", "attention",
       "The scores are divided by d_k instead of sqrt(d_k).",
       ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0 / q.size(-1)")),
    _p("multiplied_by_sqrt_d_k", "attention",
       "The scores are multiplied by sqrt(d_k) instead of divided by it.",
       ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = math.sqrt(q.size(-1))")),
    _p("scale_argument_ignored", "attention",
       "A given `scale` is ignored: `scale=None` means 1/sqrt(d_k), but a float must multiply the scores.",
       ("attention.py", "scores = torch.matmul(q, k.transpose(-2, -1)) * scale",
        "scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))")),
    _p("softmax_over_queries", "attention",
       "softmax runs over the wrong dimension (the queries, dim=-2): it must normalise over the "
       "keys, dim=-1, so each query's weights sum to 1 (seed 001 section 10).",
       ("attention.py", "weights = F.softmax(scores, dim=-1)", "weights = F.softmax(scores, dim=-2)")),
    _p("mask_ignored", "attention",
       "The mask is never applied: blocked keys (padding, the future) still get attention "
       "(seed 001 section 10, 'mask forgotten').",
       ("attention.py", "if mask is not None:", "if False:  # the mask is forgotten")),
    _p("mask_inverted", "attention",
       "The boolean mask is read the wrong way round: in this contract True means BLOCKED "
       "(`masked_fill(mask, -inf)`), the opposite of torch's SDPA `attn_mask`.",
       ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', 'scores.masked_fill_(~mask, float("-inf"))')),
    _p("masked_with_zero", "attention",
       "Blocked scores are set to 0 instead of -inf: exp(0) = 1, so blocked keys still get weight.",
       ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, 0.0)")),
    _p("nan_on_fully_blocked_rows", "attention",
       "A query whose keys are all blocked gets softmax(-inf, ..., -inf) = NaN: such rows must give "
       "all-zero weights and an all-zero output.",
       ("attention.py", "if blocked_rows.any():", "if False:  # no special case")),
    _p("keys_not_transposed", "attention",
       "The scores are q @ k instead of q @ k^T (`k.transpose(-2, -1)`): the shapes are mixed up.",
       ("attention.py", "scores = torch.matmul(q, k.transpose(-2, -1)) * scale",
        "scores = torch.matmul(q, k) * scale")),
    _p("finite_mask_fill", "attention",
       "Blocked scores are filled with -1e9 (seed 001 section 11's exercise) instead of -inf: once the "
       "allowed scores are below -1e9 the blocked keys take the weight; blocked keys must get exactly 0.",
       ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, -1e9)")),
    _p("finite_mask_fill_1e4", "attention",
       "Blocked scores are filled with -10000 (seed 001 section 8.1's 'sufficiently small negative number') "
       "instead of -inf: an allowed score of -20000 loses to the blocked keys; blocked keys must get exactly 0.",
       ("attention.py", 'scores.masked_fill_(mask, float("-inf"))', "scores.masked_fill_(mask, -10000.0)")),
    _p("softmax_without_max_subtraction", "attention",
       "softmax written as exp(s) / sum(exp(s)) without subtracting the row maximum first: exp "
       "overflows to inf for scores above ~88 in float32, and inf / inf is NaN. Subtract "
       "`scores.amax(-1, keepdim=True)` before exp, or use F.softmax.",
       ("attention.py", "weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1",
        "exp = scores.exp()\n    weights = exp / exp.sum(dim=-1, keepdim=True)")),
    # ------------------------------------------------------------------ masks
    _p("causal_mask_blocks_diagonal", "masks",
       "Your causal mask also blocks the diagonal: a token must see itself (`triu(..., diagonal=1)`).",
       ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=0)")),
    _p("causal_mask_leaks_next_token", "masks",
       "Your causal mask lets each token see the next one (`diagonal=2`): only positions j > i "
       "must be blocked (`triu(..., diagonal=1)`).",
       ("masks.py", "torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=2)")),
    _p("causal_mask_transposed", "masks",
       "Your causal mask is transposed: it blocks the past (below the diagonal) instead of the future.",
       ("masks.py", "torch.triu(ones, diagonal=1)", "torch.tril(ones, diagonal=-1)")),
    _p("causal_mask_inverted", "masks",
       "Your causal mask marks the ALLOWED positions (torch's convention, `tril`): here True means blocked.",
       ("masks.py", "torch.triu(ones, diagonal=1)", "torch.tril(ones)")),
    _p("causal_mask_not_bool", "masks",
       "Your causal mask is a float tensor: the contract's masks are bool (True = blocked).",
       ("masks.py", "return torch.triu(ones, diagonal=1)", "return torch.triu(ones, diagonal=1).float()")),
    _p("padding_mask_blocks_queries", "masks",
       "Your padding mask has shape (B, 1, L, 1): it blocks padded QUERIES; it must be (B, 1, 1, L) "
       "to block padded keys.",
       ("masks.py", "(tokens == pad_id)[:, None, None, :]", "(tokens == pad_id)[:, None, :, None]")),
    _p("padding_mask_inverted", "masks",
       "Your padding mask is True at the real tokens: it must be True (blocked) where tokens == pad_id.",
       ("masks.py", "(tokens == pad_id)[:, None, None, :]", "(tokens != pad_id)[:, None, None, :]")),
    # ------------------------------------------------------------------ mha
    _p("heads_split_without_transpose", "mha",
       "The heads are split with view(B, H, L, d_k): it must be view(B, L, H, d_k).transpose(1, 2), "
       "otherwise each 'head' mixes positions (seed 001 section 10, 'shapes mixed up').",
       *(("multihead.py", _SPLIT.format(p=p, a=a, n=n),
          f"self.W_{p}({a}).view(B, self.num_heads, {n}, self.d_k)")
         for p, a, n in (("Q", "query", "Lq"), ("K", "key", "Lk"), ("V", "value", "Lk")))),
    _p("heads_merged_without_transpose", "mha",
       "The heads are merged with reshape(B, L, D) straight from (B, H, L, d_k): transpose(1, 2) first, "
       "so each position gets its own heads back.",
       ("multihead.py", "heads.transpose(1, 2).reshape(B, Lq, self.d_model)", "heads.reshape(B, Lq, self.d_model)")),
    _p("W_O_missing", "mha",
       "The concatenated heads are returned without the output projection W_O.",
       ("multihead.py", "return self.W_O(concat), weights", "return concat, weights")),
    _p("scaled_by_sqrt_d_model", "mha",
       "Multi-head attention scales by 1/sqrt(d_model): each head has d_k = d_model / num_heads "
       "features, so the scale is 1/sqrt(d_k).",
       ("multihead.py", "import torch.nn as nn\n", "import math\n\nimport torch.nn as nn\n"),
       ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
        "scaled_dot_product_attention(Q, K, V, mask, scale=1.0 / math.sqrt(self.d_model), dropout=self.dropout)")),
    _p("keys_from_query", "mha",
       "The keys are projected from the query (W_K(query)): in cross-attention the keys come from `key`.",
       ("multihead.py", "K = self.W_K(key).view(B, Lk,", "K = self.W_K(query).view(B, Lk,")),
    _p("values_from_key", "mha",
       "The values are projected from `key` instead of `value`.",
       ("multihead.py", "V = self.W_V(value).view(", "V = self.W_V(key).view(")),
    _p("W_Q_used_for_keys", "mha",
       "The keys are projected with W_Q instead of W_K (a copy-paste slip).",
       ("multihead.py", "K = self.W_K(key)", "K = self.W_Q(key)")),
    _p("mha_mask_not_passed", "mha",
       "Multi-head attention does not pass `mask` on to the attention: blocked keys are attended.",
       ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
        "scaled_dot_product_attention(Q, K, V, None, dropout=self.dropout)")),
    _p("mha_dropout_in_eval", "mha",
       "Attention dropout stays active in eval(): dropout must act only in train() mode.",
       ("multihead.py", "scaled_dot_product_attention(Q, K, V, mask, dropout=self.dropout)",
        "scaled_dot_product_attention(Q, K, V, mask, dropout=lambda w: nn.functional.dropout("
        "w, self.dropout.p, training=True))")),
    _p("self_attention_ignores_mask", "mha",
       "MultiHeadSelfAttention drops its `mask` argument.",
       ("multihead.py", "return super().forward(x, x, x, mask, kv_cache=kv_cache)",
        "return super().forward(x, x, x, None, kv_cache=kv_cache)")),
    # ------------------------------------------------------------------ ffn
    _p("relu_instead_of_gelu", "ffn",
       "The feed-forward uses ReLU: the contract asks for the exact (erf) GELU, F.gelu(x).",
       ("feedforward.py", "F.gelu(self.linear1(x))", "F.relu(self.linear1(x))")),
    _p("tanh_gelu", "ffn",
       "The feed-forward uses the tanh approximation of GELU: the contract asks for the exact erf GELU.",
       ("feedforward.py", "F.gelu(self.linear1(x))", 'F.gelu(self.linear1(x), approximate="tanh")')),
    _p("no_activation", "ffn",
       "The feed-forward has no activation between linear1 and linear2: it collapses to one linear map.",
       ("feedforward.py", "F.gelu(self.linear1(x))", "self.linear1(x)")),
    _p("ffn_dropout_after_linear2", "ffn",
       "Dropout is applied after linear2: the contract's FFN is linear2(dropout(gelu(linear1(x)))).",
       ("feedforward.py", "return self.linear2(self.dropout(F.gelu(self.linear1(x))))",
        "return self.dropout(self.linear2(F.gelu(self.linear1(x))))")),
    _p("ffn_dropout_in_eval", "ffn",
       "Dropout stays active in eval(): use self.dropout (nn.Dropout), which acts only in train() mode.",
       ("feedforward.py", "self.linear2(self.dropout(F.gelu(self.linear1(x))))",
        "self.linear2(F.dropout(F.gelu(self.linear1(x)), self.dropout.p, training=True))")),
    # ------------------------------------------------------------------ encoder
    _p("encoder_post_ln_for_pre_ln", "encoder",
       "The encoder block applies LayerNorm after the residual (Post-LN) when norm_first=True asks for "
       "Pre-LN, x + drop(attn(norm1(x))) (and the other way round).",
       ("blocks.py", "if self.norm_first:\n            attn_out, attn_weights",
        "if not self.norm_first:\n            attn_out, attn_weights")),
    _p("encoder_attention_residual_missing", "encoder",
       "The encoder block drops the residual connection around self-attention: x = x + drop(attn(...)).",
       ("blocks.py", "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))",
        "x = self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))")),
    _p("encoder_ffn_residual_missing", "encoder",
       "The encoder block drops the residual connection around the feed-forward: x = x + drop(ffn(...)).",
       ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = self.dropout(self.ffn(self.norm2(x)))")),
    _p("encoder_one_layernorm_reused", "encoder",
       "The encoder block reuses norm1 before the feed-forward: each sublayer has its own LayerNorm (norm2).",
       ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = x + self.dropout(self.ffn(self.norm1(x)))")),
    _p("encoder_mask_not_passed", "encoder",
       "The encoder block does not pass `mask` to its self-attention.",
       ("blocks.py", "self.self_attn(self.norm1(x), mask, kv_cache=kv_cache)",
        "self.self_attn(self.norm1(x), None, kv_cache=kv_cache)"),
       ("blocks.py", "self.self_attn(x, mask, kv_cache=kv_cache)", "self.self_attn(x, None, kv_cache=kv_cache)")),
    _p("encoder_dropout_on_residual_stream", "encoder",
       "Dropout is applied to the residual sum, dropout(x + attn): it belongs on the sublayer's output "
       "only, x + dropout(attn(...)).",
       ("blocks.py", "x = x + self.dropout(attn_out)\n            x = x + self.dropout(self.ffn(self.norm2(x)))",
        "x = self.dropout(x + attn_out)\n            x = self.dropout(x + self.ffn(self.norm2(x)))")),
    _p("encoder_sublayer_output_not_dropped", "encoder",
       "The encoder block never applies its own dropout to the FFN sublayer's output (as when dropout "
       "lives only inside the sublayers, nanoGPT-style): the contract's block is x + dropout(ffn(norm2(x))) "
       "(seed 000 step 5).",
       ("blocks.py", "x = x + self.dropout(self.ffn(self.norm2(x)))", "x = x + self.ffn(self.norm2(x))")),
    # ------------------------------------------------------------------ decoder
    _p("cross_attention_to_itself", "decoder",
       "The decoder's cross-attention attends to the decoder itself: its keys and values must come "
       "from `memory` (the encoder output).",
       ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
        "self.cross_attn(self.norm2(x), self.norm2(x), self.norm2(x), None)"),
       ("blocks.py", "self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, None)")),
    _p("cross_attention_without_memory_mask", "decoder",
       "The decoder's cross-attention ignores `memory_mask`: padded source positions are attended.",
       ("blocks.py", "self.cross_attn(self.norm2(x), memory, memory, memory_mask)",
        "self.cross_attn(self.norm2(x), memory, memory, None)"),
       ("blocks.py", "self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory, None)")),
    _p("decoder_self_attention_without_tgt_mask", "decoder",
       "The decoder's self-attention ignores `tgt_mask`: each target token sees the future.",
       ("blocks.py", "self.self_attn(self.norm1(x), tgt_mask)", "self.self_attn(self.norm1(x), None)"),
       ("blocks.py", "self.self_attn(x, tgt_mask)", "self.self_attn(x, None)")),
    _p("decoder_post_ln_for_pre_ln", "decoder",
       "The decoder block applies LayerNorm after the residual (Post-LN) when norm_first=True asks for "
       "Pre-LN (and the other way round).",
       ("blocks.py", "if self.norm_first:\n            attn_out, self_weights",
        "if not self.norm_first:\n            attn_out, self_weights")),
    _p("decoder_cross_residual_missing", "decoder",
       "The decoder block drops the residual connection around cross-attention.",
       ("blocks.py", "x = x + self.dropout(cross_out)", "x = self.dropout(cross_out)")),
    _p("decoder_sublayer_output_not_dropped", "decoder",
       "The decoder block never applies its own dropout to the FFN sublayer's output: the contract's "
       "block is x + dropout(ffn(norm3(x))), like the encoder's.",
       ("blocks.py", "x = x + self.dropout(self.ffn(self.norm3(x)))", "x = x + self.ffn(self.norm3(x))")),
    # ------------------------------------------------------------------ position
    _p("sin_cos_swapped", "position",
       "sin and cos are swapped: PE[pos, 2i] = sin(...), PE[pos, 2i+1] = cos(...) (position 0 is 0, 1, 0, 1, ...).",
       ("position.py", "pe[:, 0::2] = torch.sin(position * div_term)", "pe[:, 0::2] = torch.cos(position * div_term)"),
       ("position.py", "pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])",
        "pe[:, 1::2] = torch.sin(position * div_term[: d_model // 2])")),
    _p("wrong_exponent", "position",
       "The frequencies use 10000^(i/d_model): the exponent is 2i/d_model, i the index of the sin/cos pair.",
       ("position.py", "torch.arange(0, d_model, 2, dtype=torch.float64) * (",
        "torch.arange(0, d_model, 2, dtype=torch.float64) / 2 * (")),
    _p("positions_start_at_1", "position",
       "The positions start at 1: the first token is position 0 (its encoding is 0, 1, 0, 1, ...).",
       ("position.py", "torch.arange(max_len, dtype=torch.float64)",
        "torch.arange(1, max_len + 1, dtype=torch.float64)")),
    _p("sin_cos_halves_not_interleaved", "position",
       "The encoding puts all sines in the first half and all cosines in the second: they alternate, "
       "sin at even features, cos at odd ones.",
       ("position.py", "pe[:, 0::2] = torch.sin(position * div_term)",
        "pe[:, : (d_model + 1) // 2] = torch.sin(position * div_term)"),
       ("position.py", "pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])",
        "pe[:, (d_model + 1) // 2 :] = torch.cos(position * div_term[: d_model // 2])")),
    # ------------------------------------------------------------------ minigpt
    _p("embedding_not_scaled", "minigpt",
       "The token embeddings are not multiplied by sqrt(d_model) before the position encoding (seed 000).",
       ("minigpt.py", "x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)",
        "x = self.token_embed(tokens)  # (B, L, D)"),
       ("minigpt.py", "self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model), start)",
        "self.pos_encoding(self.token_embed(tokens), start)")),
    _p("embedding_scaled_after_positions", "minigpt",
       "The embeddings are scaled by sqrt(d_model) after adding the positions: scale first, then add PE.",
       ("minigpt.py", "x = self.token_embed(tokens) * math.sqrt(self.d_model)  # (B, L, D)\n        x = self.pos_encoding(x)",
        "x = self.pos_encoding(self.token_embed(tokens)) * math.sqrt(self.d_model)"),
       ("minigpt.py", "self.pos_encoding(self.token_embed(tokens) * math.sqrt(self.d_model), start)",
        "self.pos_encoding(self.token_embed(tokens), start) * math.sqrt(self.d_model)")),
    _p("no_weight_tying", "minigpt",
       "lm_head.weight is not tied to token_embed.weight: `self.lm_head.weight = self.token_embed.weight`.",
       ("minigpt.py", "self.lm_head.weight = self.token_embed.weight", "pass  # no weight tying")),
    _p("no_final_layernorm", "minigpt",
       "MiniGPT skips final_norm: a Pre-LN stack needs one LayerNorm before lm_head.",
       ("minigpt.py", "logits = self.lm_head(self.final_norm(x))", "logits = self.lm_head(x)"),
       ("minigpt.py", "return self.lm_head(self.final_norm(x[:, -1]))", "return self.lm_head(x[:, -1])")),
    _p("minigpt_without_causal_mask", "minigpt",
       "MiniGPT runs its blocks without the causal mask: every token sees the future "
       "(seed 001 section 10, 'peeking at the answer').",
       ("minigpt.py", "x, weights = block(x, mask)", "x, weights = block(x, None)"),
       ("minigpt.py", "mask = self.causal_mask[:T, :T] if T > 1 else None", "mask = None")),
    _p("minigpt_causal_mask_blocks_diagonal", "minigpt",
       "MiniGPT's causal mask also blocks the diagonal: a token must see itself (`diagonal=1`).",
       ("minigpt.py", "dtype=torch.bool), diagonal=1)", "dtype=torch.bool), diagonal=0)")),
    # ------------------------------------------------------------------ generate
    _p("minigpt_blocks_keep_their_default_dropout", "minigpt",
       "MiniGPT builds its blocks without passing its `dropout` on, so they keep their default 0.1: "
       "MiniGPT(dropout=0.0) still drops activations in train() mode.",
       ("minigpt.py", "[TransformerEncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]",
        "[TransformerEncoderBlock(d_model, num_heads, d_ff) for _ in range(num_layers)]")),
    _p("generate_reads_first_position", "generate",
       "generate takes the logits of the FIRST position: the next token comes from the last one, logits[0, -1].",
       _NO_CACHE, ("minigpt.py", "next_logits = self(window)[0][0, -1]", "next_logits = self(window)[0][0, 0]")),
    _p("temperature_multiplied", "generate",
       "generate multiplies the logits by the temperature: divide them (logits / temperature).",
       ("minigpt.py", "next_logits = next_logits / temperature", "next_logits = next_logits * temperature")),
    _p("window_ignored", "generate",
       "generate feeds the whole sequence: the model sees at most the last max_len tokens (tokens[-max_len:]).",
       _NO_CACHE, ("minigpt.py", "window = torch.tensor([tokens[-self.max_len:]], device=device)  # (1, <=max_len)",
                   "window = torch.tensor([tokens], device=device)")),
    _p("top_k_ignored", "generate",
       "generate ignores top_k: only the k most likely tokens may be sampled.",
       ("minigpt.py", "if top_k is not None and top_k < next_logits.numel():", "if False:")),
    _p("generator_ignored", "generate",
       "generate ignores `generator`: pass it to torch.multinomial so sampling is reproducible.",
       ("minigpt.py", "torch.multinomial(probs, 1, generator=generator)", "torch.multinomial(probs, 1)")),
    _p("mode_not_restored", "generate",
       "generate leaves the model in eval mode: restore the caller's train/eval mode afterwards.",
       ("minigpt.py", "self.train(was_training)", "pass  # the mode is not restored")),
    _p("generate_in_train_mode", "generate",
       "generate runs in train mode (dropout active while sampling): switch to eval() while generating.",
       ("minigpt.py", "caches = None\n        self.eval()", "caches = None")),
    _p("greedy_not_special_cased", "generate",
       "temperature=0 divides by zero: it means greedy decoding, the argmax.",
       ("minigpt.py", "if temperature == 0:", "if False:")),
    # ------------------------------------------------------------------ seq2seq
    _p("seq2seq_no_source_padding_mask", "seq2seq",
       "Seq2SeqTransformer never blocks the source padding (pad_id): padded tokens leak into the "
       "encoder and the cross-attention.",
       ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)", "src_mask = None")),
    _p("seq2seq_no_causal_target_mask", "seq2seq",
       "Seq2SeqTransformer's target self-attention is not causal: each target token sees the future.",
       ("seq2seq.py", "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)", "tgt_mask = None")),
    _p("seq2seq_cross_attention_unmasked", "seq2seq",
       "Seq2SeqTransformer's cross-attention does not block the source padding (memory_mask).",
       ("seq2seq.py", "x, _, _ = block(x, memory, tgt_mask, src_mask)", "x, _, _ = block(x, memory, tgt_mask, None)")),
    _p("seq2seq_encoder_unmasked", "seq2seq",
       "Seq2SeqTransformer's encoder self-attention does not block the source padding.",
       ("seq2seq.py", "memory, _ = block(memory, src_mask)", "memory, _ = block(memory, None)")),
    _p("source_padding_from_lengths", "seq2seq",
       "Seq2SeqTransformer blocks the last n source positions, n the number of pads (a mask from lengths): "
       "a pad between real tokens is attended and the real tokens after it are blocked. Block by token, "
       "src == pad_id (padding_mask, seed 001 section 8.1).",
       ("seq2seq.py", "import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n"),
       ("seq2seq.py", "src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, Ls): padded source keys blocked",
        "lengths = (src != self.pad_id).sum(1)  # real tokens per row, as if every pad were at the end\n"
        "        src_mask = (torch.arange(src.size(1), device=src.device)[None, :] >= lengths[:, None])[:, None, None, :]")),
    # ------------------------------------------------------------------ errors
    _p("heads_divisibility_not_checked", "errors",
       "d_model not divisible by num_heads is not rejected: raise ValueError naming d_model and num_heads.",
       ("_validation.py", "if d_model % num_heads != 0:", "if False:")),
    _p("positive_ints_not_checked", "errors",
       "Sizes such as d_model, num_heads or max_new_tokens are not checked: raise ValueError/TypeError "
       "naming the argument for 0, negatives and non-ints.",
       ("_validation.py", '"""``value`` must be an ``int`` (not a bool) greater than zero."""',
        '"""``value`` must be an ``int`` (not a bool) greater than zero."""\n    return value')),
    _p("max_len_not_checked", "errors",
       "A sequence longer than max_len is not rejected with a ValueError naming max_len.",
       ("position.py", "    if start + x.size(1) > max_len:", "    if False:")),
    _p("mask_dtype_not_checked", "errors",
       "A mask that is not bool is accepted: raise TypeError saying masks are bool (True = blocked).",
       ("_validation.py", "if mask.dtype != torch.bool:", "if False:")),
    _p("error_message_without_argument_name", "errors",
       "The error message does not name the argument: say which argument is wrong and its value.",
       ("_validation.py", 'raise ValueError(f"{name} must be a positive int, got {name}={value}")',
        'raise ValueError(f"must be a positive int, got {value}")')),
)

BY_NAME: dict[str, Pitfall] = {p.name: p for p in CATALOGUE}


def check_catalogue() -> None:
    """Raise ``ValueError`` if the catalogue is malformed (names, components, patches)."""
    if len(BY_NAME) != len(CATALOGUE):
        raise ValueError("duplicate pitfall names")
    for p in CATALOGUE:
        if p.component not in COMPONENTS:
            raise ValueError(f"pitfall {p.name}: unknown component {p.component!r}")
        if not p.patches or not p.explanation.strip() or "\n" in p.explanation:
            raise ValueError(f"pitfall {p.name}: needs patches and a one-line explanation")
