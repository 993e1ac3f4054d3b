from __future__ import annotations

import torch
from torch import nn

from repro.models.bert_base import EPS, BERTDims
from repro.models.common_torch import MLP, Attention, embed, first_rows, gelu


class Layer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.attn = Attention(dim, heads)
        self.ln1 = nn.LayerNorm(dim, eps=EPS)
        self.mlp = MLP(dim, hidden)
        self.ln2 = nn.LayerNorm(dim, eps=EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    def __init__(self, d: BERTDims):
        super().__init__()
        dim = d.dim
        self.word_emb = embed(d.vocab, dim)
        self.pos_emb = embed(d.max_pos, dim)
        self.type_emb = embed(d.type_vocab, dim)
        self.emb_ln = nn.LayerNorm(dim, eps=EPS)
        self.layers = nn.ModuleList(Layer(dim, d.heads, d.mlp) for _ in range(d.depth))
        self.head_dense = nn.Linear(dim, dim)
        self.head_ln = nn.LayerNorm(dim, eps=EPS)
        self.decoder_bias = nn.Parameter(torch.zeros(d.vocab))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.word_emb(tokens) + first_rows(self.pos_emb, t)
        x = self.emb_ln(x + self.type_emb(torch.zeros_like(tokens)))
        for layer in self.layers:
            x = layer(x)
        x = self.head_ln(gelu(self.head_dense(x)))
        return x @ self.word_emb.weight.T + self.decoder_bias


def build(dims: BERTDims) -> Bert:
    return Bert(dims)
