"""`model.impl=hf`: the canonical implementations, transformers 4.x PyTorch and Flax classes.

Built from a transformers config made from our model dims (`configs.py`), random weights, never
a download, eager attention (as the published ViT study ran them). The same dims give the same
parameter count as our native twins (tests/test_hf.py) and, where HF's default differs from our
model's function (GPT-2/GPT-Neo's tanh GELU), HF is configured to compute our function, so a
native-vs-hf timing compares implementations, not formulations.

This module is framework-free (the preflight reads it); `torch_models.py` and `flax_models.py`
import transformers only in the worker of their framework.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Callable


# zoo model -> (transformers PyTorch class, transformers Flax class)
CLASSES = {
    "vit": ("ViTForImageClassification", "FlaxViTForImageClassification"),
    "resnet50": ("ResNetForImageClassification", "FlaxResNetForImageClassification"),
    "bert_base": ("BertForMaskedLM", "FlaxBertForMaskedLM"),
    "gpt2_small": ("GPT2LMHeadModel", "FlaxGPT2LMHeadModel"),
    "gpt_neo_1_3b": ("GPTNeoForCausalLM", "FlaxGPTNeoForCausalLM"),
    "llama3_8b": ("LlamaForCausalLM", "FlaxLlamaForCausalLM"),
}


def transformers_for(family: str) -> ModuleType:
    """transformers, imported with only `family`'s framework ("flax" or "torch") enabled.

    Left alone, transformers imports every installed framework (a JAX worker would import torch).
    It reads USE_TORCH / USE_FLAX once, when first imported: they are set for that import only,
    so processes started later (workers of the other framework) inherit nothing."""
    off = {"USE_TORCH" if family == "flax" else "USE_FLAX": "0", "USE_TF": "0"}
    saved = {k: os.environ.get(k) for k in off}
    os.environ.update(off)
    try:
        return importlib.import_module("transformers")
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            f"model.impl=hf needs transformers>=4.40,<5 in the worker's interpreter {sys.executable}: "
            f"pip install -e '.[hf]' there (`make xla-env` installs it into .venv-xla)") from e
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


# Models whose transformers classes take one canonical state in both frameworks: their Flax
# variable paths name the PyTorch state_dict keys (models/state_flax.py maps kernels and scales),
# and after loading one draw both give the same logits (tests/test_hf_shared_init.py). The others
# are left out: BERT's and the GPT's tied output layers exist in torch's state_dict only, and
# Flax Llama's rotary embedding gives other logits from the same weights.
SHARED_INIT = ("vit", "resnet50")


def is_native(cfg) -> bool:
    """Whether the run's model is repro's own implementation (model.impl=native, the default)."""
    return cfg.model.impl == "native"


def hashes_init(cfg) -> bool:
    """Whether the run's initial parameters have a canonical-layout hash: every native model, and
    the transformers classes with a converter (the same numbers hash alike in both frameworks)."""
    return is_native(cfg) or cfg.model.name in SHARED_INIT


def refusal(cfg) -> str | None:
    """Why this resolved config cannot run with model.impl=hf (None when it can)."""
    model, fw, precision = cfg.model.name, cfg.framework, cfg.precision
    if model not in CLASSES:
        return (f"model.impl=hf: transformers has no PyTorch and Flax classes for model={model}; "
                f"impl=hf works for model {', '.join(CLASSES)} (or use model.impl=native)")
    if cfg.run.init != "native" and model not in SHARED_INIT:
        return (f"model.impl=hf with run.init=shared: no weight converter for model={model}'s transformers "
                f"classes (one draw must give the same logits in both frameworks); run.init=shared works "
                f"with impl=hf for model {', '.join(SHARED_INIT)}; use run.init=native (or model.impl=native)")
    if cfg.sharding.name != "none":
        return (f"model.impl=hf runs unsharded: sharding={cfg.sharding.name} is built for the native "
                f"models' parameter names; use sharding=none or model.impl=native")
    if fw.backend == "jax" and precision.param_dtype != "float32":
        return (f"model.impl=hf with framework={fw.name}: transformers' Flax classes keep float32 "
                f"parameters, precision={precision.name} stores {precision.param_dtype}; use "
                f"precision=fp32, tf32 or amp_bf16 (bf16 compute), or model.impl=native")
    return None


def build_fn(entry, impl: str, family: str) -> Callable:
    """The `build` function of one implementation: family "flax" or "torch", with the signature
    of the native `flax_model.build` / `torch_model.build` of that model."""
    if impl == "native":  # the workload protocol's builders (repro.models.api)
        return entry.build_flax if family == "flax" else entry.build_torch
    module = importlib.import_module(f"repro.models.hf.{family}_models")
    return lambda dims, *args, **kwargs: module.build(entry, dims, *args, **kwargs)
