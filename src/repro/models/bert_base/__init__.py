"""BERT masked LM (HF BertForMaskedLM without pooler): post-LN encoder, MLM head tied to the
word embeddings. Inputs are tokens with ~15% replaced by a mask id; targets are the originals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repro.models.base import ZooModel
from repro.models.common import attention_flops, attention_params, linear_params

EPS = 1e-12
MASK_RATE = 0.15


@dataclass(frozen=True)
class BERTDims:
    vocab: int
    seq: int
    max_pos: int
    type_vocab: int
    dim: int
    depth: int
    heads: int
    mlp: int


class BERT(ZooModel):
    name = "bert_base"
    task = "lm"
    description = "BERT masked LM (post-LN encoder, tied MLM decoder, exact GELU)"
    dims_type = BERTDims
    presets = {
        "tiny": dict(vocab=128, seq=16, max_pos=32, type_vocab=2, dim=32, depth=2, heads=4, mlp=64),
        "base": dict(vocab=30522, seq=512, max_pos=512, type_vocab=2, dim=768, depth=12, heads=12, mlp=3072),
    }

    def param_count(self, d):
        dim = d.dim
        emb = (d.vocab + d.max_pos + d.type_vocab) * dim + 2 * dim
        layer = attention_params(dim, d.heads) + linear_params(dim, d.mlp) + linear_params(d.mlp, dim) + 4 * dim
        head = linear_params(dim, dim) + 2 * dim + d.vocab  # dense, LayerNorm, decoder bias
        return emb + d.depth * layer + head

    def flops_per_example(self, d):
        t, dim = d.seq, d.dim
        layer = attention_flops(t, dim, d.heads) + 2 * 2 * t * dim * d.mlp
        return float(d.depth * layer + 2 * t * dim * dim + 2 * t * dim * d.vocab)

    def make_batch(self, d, batch_size, rng):
        """Tokens with about MASK_RATE of them the mask id; the targets are the originals."""
        mask_id = min(103, d.vocab - 1)  # [MASK] in the BERT uncased vocabulary
        targets = rng.integers(0, d.vocab, size=(batch_size, d.seq), dtype=np.int32)
        tokens = np.where(rng.random(targets.shape) < MASK_RATE, mask_id, targets).astype(np.int32)
        return tokens, targets
