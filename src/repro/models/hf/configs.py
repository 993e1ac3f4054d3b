"""Our model dims -> a transformers config, one function per zoo model.

Dropout is off (our models have none), the attention is eager, the KV cache is off (training),
and the activation is the one our model computes (exact-erf GELU where HF's default is tanh).
Importing transformers pulls in every installed framework unless told otherwise: the callers
(torch_models / flax_models) import it first through `transformers_for(family)`.
"""

from __future__ import annotations

from typing import Any

import transformers as tf

from repro.models import bert_base, gpt2_small, gpt_neo_1_3b, llama3_8b, resnet50, vit

COMMON = dict(attn_implementation="eager", use_cache=False)


def vit_config(d: vit.ViTDims) -> tf.ViTConfig:
    return tf.ViTConfig(image_size=d.image, patch_size=d.patch, num_channels=d.channels,
                        hidden_size=d.width, num_hidden_layers=d.depth, num_attention_heads=d.heads,
                        intermediate_size=d.mlp, num_labels=d.classes, layer_norm_eps=vit.EPS,
                        hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **COMMON)


def resnet50_config(d: resnet50.ResNetDims) -> tf.ResNetConfig:
    w = d.width
    return tf.ResNetConfig(num_channels=d.channels, embedding_size=w, layer_type="bottleneck",
                           hidden_sizes=[w * 2**i * resnet50.EXPANSION for i in range(len(d.blocks))],
                           depths=list(d.blocks), hidden_act="relu", downsample_in_first_stage=False,
                           downsample_in_bottleneck=False, num_labels=d.classes, **COMMON)


def bert_base_config(d: bert_base.BERTDims) -> tf.BertConfig:
    return tf.BertConfig(vocab_size=d.vocab, hidden_size=d.dim, num_hidden_layers=d.depth,
                         num_attention_heads=d.heads, intermediate_size=d.mlp,
                         max_position_embeddings=d.max_pos, type_vocab_size=d.type_vocab,
                         layer_norm_eps=bert_base.EPS, hidden_act="gelu", hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, **COMMON)


def gpt2_small_config(d: gpt2_small.GPT2Dims) -> tf.GPT2Config:
    return tf.GPT2Config(vocab_size=d.vocab, n_positions=d.ctx, n_embd=d.dim, n_layer=d.depth,
                         n_head=d.heads, layer_norm_epsilon=gpt2_small.EPS, activation_function="gelu",
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **COMMON)


def gpt_neo_1_3b_config(d: gpt_neo_1_3b.GPTNeoDims) -> tf.GPTNeoConfig:
    # Layers alternate global (even) and local (odd), as ours; one entry per layer so any depth works.
    types = [[[("global", "local")[i % 2]], 1] for i in range(d.depth)]
    return tf.GPTNeoConfig(vocab_size=d.vocab, max_position_embeddings=d.ctx, hidden_size=d.dim,
                           num_layers=d.depth, num_heads=d.heads, attention_types=types,
                           window_size=d.window, activation_function="gelu",
                           layer_norm_epsilon=gpt2_small.EPS, embed_dropout=0.0, attention_dropout=0.0,
                           resid_dropout=0.0, **COMMON)


def llama3_8b_config(d: llama3_8b.LlamaDims) -> tf.LlamaConfig:
    return tf.LlamaConfig(vocab_size=d.vocab, hidden_size=d.dim, intermediate_size=d.hidden,
                          num_hidden_layers=d.depth, num_attention_heads=d.heads,
                          num_key_value_heads=d.kv_heads, max_position_embeddings=d.seq,
                          rope_theta=d.theta, rms_norm_eps=llama3_8b.EPS, hidden_act="silu",
                          tie_word_embeddings=False, attention_bias=False, mlp_bias=False, **COMMON)


def config_for(name: str, dims: Any):
    """The transformers config of zoo model `name` from its typed dimensions (its `dims_type`)."""
    return globals()[f"{name}_config"](dims)
