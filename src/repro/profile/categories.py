"""One vocabulary for every framework's ops: the table that maps op names to categories.

A profiled step's time is divided into these categories, whichever framework ran it. Each
rule maps a framework family's own op names (PyTorch's `aten::` ops and record_function
scopes, XLA's HLO instructions and fusions, inductor's generated kernels) to one category.
An XLA fusion is classified by the HLO ops inside it (`inside`, read from the compiled HLO
text by repro.profile.hlo) where they are known, else by the words in its name.

Time in which no categorised op runs (Python, the dispatcher, the autograd engine, waiting)
is "host gaps"; it is not matched here but computed by repro.profile.reduce.
"""

from __future__ import annotations

import re

MATMUL, ELEMENTWISE, REDUCTION, MOVEMENT = "matmul/conv", "element-wise", "reduction/norm", "data movement"
OPTIMIZER, COLLECTIVES, OTHER, HOST = "optimizer", "collectives", "other ops", "host gaps"
# In display order (the stacked bar's order, bottom up).
CATEGORIES = (MATMUL, ELEMENTWISE, REDUCTION, MOVEMENT, OPTIMIZER, COLLECTIVES, OTHER, HOST)

# (family, pattern on the op's own name, category): the first match wins. Families: "torch"
# (aten ops, record_function scopes, inductor's kernels as the profiler names them), "xla"
# (HLO instruction names as XLA's profiler names the thunks/kernels it runs), "any".
RULES: tuple[tuple[str, str, str | None], ...] = (
    ("any", r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|allreduce|allgather|"
            r"c10d::|nccl|gloo|_reduce_scatter", COLLECTIVES),
    # -- PyTorch (eager and torch.compile's extern calls) ---------------------------------------
    ("torch", r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_?conv\w*|_convolution\w*|mkldnn_\w*conv\w*|"
              r"convolution\w*|_scaled_dot_product\w*|scaled_dot_product\w*|einsum|dot|mv|addmv|"
              r"_addmm_activation|mkldnn_linear\w*|_mkl_linear|cudnn_convolution\w*|thnn_conv\w*)$", MATMUL),
    ("torch", r"^aten::(native_layer_norm\w*|layer_norm|native_batch_norm\w*|batch_norm\w*|_batch_norm\w*|"
              r"cudnn_batch_norm\w*|group_norm|native_group_norm\w*|rms_norm|_fused_rms_norm\w*|sum|mean|"
              r"amax|amin|max|min|var|std|var_mean|softmax|_softmax\w*|log_softmax|_log_softmax\w*|"
              r"nll_loss\w*|cross_entropy_loss|norm|linalg_vector_norm|argmax|argmin|cumsum|logsumexp|"
              r"max_pool\w*|avg_pool\w*|adaptive_avg_pool\w*|_adaptive_avg_pool\w*|mse_loss\w*)$", REDUCTION),
    ("torch", r"^aten::(copy_|_to_copy|to|clone|contiguous|transpose|permute|t|view|reshape|_reshape_alias|"
              r"expand|expand_as|as_strided\w*|slice|select|cat|stack|split\w*|chunk|unbind|index\w*|gather|"
              r"scatter\w*|embedding\w*|narrow|flatten|unflatten|unsqueeze|squeeze|pad|constant_pad_nd|"
              r"empty\w*|zeros\w*|ones\w*|fill_|zero_|new_\w+|resolve_conj|resolve_neg|detach|alias|"
              r"lift_fresh\w*|_unsafe_view|repeat|tril|triu|arange|full\w*|split_with_sizes|"
              r"_local_scalar_dense|item|roll|flip|_to_dense|set_|resize_)$", MOVEMENT),
    ("torch", r"^aten::_foreach_\w+|^aten::_fused_adamw?\w*|multi_tensor_apply_kernel|fused_adamw?_kernel",
     OPTIMIZER),  # GPU kernels have no CPU scope: the foreach/fused optimizer kernels by name
    ("torch", r"^aten::", ELEMENTWISE),  # every other aten op is one pointwise kernel in eager
    # inductor: its generated kernels (GPU: triton_{poi,red,per}_fused_*; CPU: cpp_fused_*), and,
    # when the CPU kernels are not profiled one by one, the compiled graph's own time.
    ("torch", r"^triton_(red|per)_|^cpp_fused_\w*(layer_norm|batch_norm|softmax|sum|mean|amax|max|var)",
     REDUCTION),
    ("torch", r"^triton_poi_|^cpp_fused_|^## Call CompiledFxGraph", ELEMENTWISE),
    # CUDA kernels as Kineto names them (often `void ns::kernel<...>(...)`): by the words in them
    ("torch", r"Memcpy|Memset|copy_kernel|transpose|CatArrayBatched|index_\w*kernel|gather|scatter", MOVEMENT),
    ("torch", r"gemm|gemv|cutlass|cublas|xmma|cudnn|conv|matmul|flash_fwd|flash_bwd|fmha", MATMUL),
    ("torch", r"reduce_kernel|softmax|norm|nll_loss|cross_entropy", REDUCTION),
    ("torch", r"elementwise|vectorized|unrolled|pointwise", ELEMENTWISE),
    # -- XLA (JAX, PyTorch/XLA): HLO instruction names; fusions by what they hold -------------
    ("xla", r"^(dot|convolution|custom-call\w*gemm|cublas|gemm|__cublas|onednn\w*matmul|ynn_dot|xnn_dot)",
     MATMUL),
    ("xla", r"^(reduce|reduce-window|reduce_window|select-and-scatter|sort|argmax|batch-norm)", REDUCTION),
    ("xla", r"^(copy|transpose|bitcast|broadcast|slice|dynamic-slice|dynamic-update-slice|dynamic_slice|"
            r"dynamic_update_slice|concatenate|pad|reshape|gather|scatter|iota|constant|tuple|"
            r"get-tuple-element|parameter|copy-start|copy-done)(\.\d+)?$", MOVEMENT),
    ("xla", r"reduce", REDUCTION),  # fusion names carry their kinds' words: input_reduce_fusion...
    ("xla", r"dot|conv|gemm|matmul", MATMUL),
    ("xla", r"^(transpose|copy|concatenate|slice|dynamic|gather|scatter|pad)\w*_fusion", MOVEMENT),
    ("xla", r".", ELEMENTWISE),  # loop fusions and single element-wise ops (wrapped_tanh, add.3...)
)
_COMPILED = tuple((family, re.compile(pattern), category) for family, pattern, category in RULES)

# HLO opcodes inside a fusion, by what they do (for fusions whose name says too little).
HLO_MATMUL = {"dot", "convolution"}
HLO_REDUCTION = {"reduce", "reduce-window", "select-and-scatter", "sort", "batch-norm-training",
                 "batch-norm-inference", "batch-norm-grad"}
HLO_MOVEMENT = {"copy", "transpose", "bitcast", "broadcast", "slice", "dynamic-slice", "dynamic-update-slice",
                "concatenate", "pad", "reshape", "gather", "scatter", "iota", "constant", "parameter", "tuple",
                "get-tuple-element", "bitcast-convert"}
HLO_COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                   "all-reduce-start", "all-gather-start", "collective-permute-start"}
# Scopes (PyTorch record_function names) whose every op is the optimizer's update.
OPTIMIZER_SCOPES = re.compile(r"^Optimizer\.(step|zero_grad)#")
# Source files whose ops (XLA metadata) are the optimizer's update.
OPTIMIZER_SOURCES = re.compile(r"/optax/|/torch/optim/")


def from_hlo_inside(opcodes: set[str]) -> str:
    """A fusion's category from the HLO opcodes it holds."""
    if opcodes & HLO_COLLECTIVES:
        return COLLECTIVES
    if opcodes & HLO_MATMUL:
        return MATMUL
    if opcodes & HLO_REDUCTION:
        return REDUCTION
    if opcodes and opcodes <= HLO_MOVEMENT:
        return MOVEMENT
    return ELEMENTWISE


def categorize(family: str, name: str, *, inside: set[str] | None = None, optimizer: bool = False) -> str:
    """The category of one op. `inside`: the HLO opcodes of an XLA fusion (where known);
    `optimizer`: the op runs inside the optimizer's update (a scope or source file says so)."""
    if optimizer:
        return OPTIMIZER
    if family == "xla" and inside:
        return from_hlo_inside(inside)
    for fam, pattern, category in _COMPILED:
        if fam in (family, "any") and pattern.search(name):
            return category
    return OTHER


def op_key(name: str) -> str:
    """The name an op is compared by across steps and runs: `aten::addmm` → `addmm`,
    `fusion.12` → `fusion`, `ynn_fusion.2` → `ynn_fusion`."""
    name = name.removeprefix("aten::")
    name = re.sub(r"\.\d+$", "", name)
    return re.sub(r"^## Call CompiledFxGraph \w+ ##$", "inductor graph (CPU kernels)", name)
