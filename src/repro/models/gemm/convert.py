"""GEMM twins share attribute names; the generic path-derived mapping covers them."""

from repro.models.common_convert import flax_to_torch, pairs, torch_to_flax

__all__ = ["torch_to_flax", "flax_to_torch", "pairs"]
