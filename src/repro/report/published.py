"""Published figures our experiments reproduce, with their source (REFERENCES.md),
and the side-by-side section of a report: published figure, ours, and each side's ratio."""

from __future__ import annotations

from repro.ledger.record import view
from repro.report.comparison import Comparison, Row

NOT_COMPARABLE = ("Absolute times measured on other hardware are not comparable with ours; the ratio of "
                  "JAX's time to PyTorch's on the same machine is, and that is the column to read.")

STACK_WARS = {
    "source": '"Stack Wars: JAX vs. PyTorch" (2025), TPU v6e-1, latency in ms (REFERENCES.md B)',
    "hardware": "TPU v6e-1 (32 GB HBM), PyTorch through torch_xla",
    # model name → workload → framework → (first run, second run, steady state); None: OOM
    "models": {
        "gemm": ("GEMM", {"jax": (41.243, 0.451, 0.192), "torch": (0.198, 0.086, 0.055)}),
        "ffn": ("FFN", {"jax": (1081.837, 0.474, 0.225), "torch": (256.368, 2.729, 0.347)}),
        "mha": ("MHA", {"jax": (1118.373, 0.619, 0.363), "torch": (987.797, 15.758, 0.946)}),
        "resnet50": ("ResNet-50", {"jax": (7328.458, 1.442, 0.931), "torch": (7659.820, 7271.575, 10.562)}),
        "bert_base": ("BERT-base", {"jax": (9103.082, 1.351, 0.913), "torch": (4098.641, 3774.402, 21.723)}),
        "gpt2_small": ("GPT-2 small", {"jax": (2128.444, 1.061, 0.708), "torch": (3545.754, 3256.955, 27.896)}),
        "vit": ("ViT-B/16", {"jax": (36453.13, 2.313, 1.836), "torch": None}),
        "gpt_neo_1_3b": ("GPT-Neo 1.3B", {"jax": (8011.992, 4.596, 4.883), "torch": None}),
        "llama3_8b": ("LLaMA-3.1 8B", {"jax": None, "torch": None}),
    },
}

VIT_L4 = {
    "source": '"AI Model Training with JAX" (Towards Data Science, 2024), ViT-B/16 training step, batch 32, '
              "TF32, one L4 and one A100 (REFERENCES.md A)",
    "findings": [
        "L4: JAX far ahead of PyTorch (eager and torch.compile).",
        "A100: JAX and PyTorch/XLA neck and neck.",
        "torch.compile underwhelmed in fp32 (its value shows with mixed precision).",
    ],
}

PUBLISHED = {"stack_wars": STACK_WARS, "stack_wars_cpu": STACK_WARS, "vit_l4": VIT_L4}


def _ms(v: float | None) -> str:
    return "OOM" if v is None else f"{v:.3f}"


def _ratio(jax: float | None, torch: float | None) -> str:
    return f"{jax / torch:.3g}" if jax and torch else "—"


def _ours(members: list[Row], fw: str) -> float | None:
    c = next((c for c in members if c.framework == fw), None)
    return c.median_s * 1e3 if c and c.median_s else None


def _model_groups(comparison: Comparison) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for c in comparison.rows:
        out.setdefault(view(c.records[0]).config.model.name, []).append(c)
    return out


def _pytorch(members: list[Row]) -> str:
    """The framework that stands for the study's PyTorch (lowered through XLA): torch_xla where run."""
    return "torch_xla" if any(c.framework == "torch_xla" for c in members) else "torch"


def _phases(pub: dict, ours: dict[str, list[Row]]) -> list[str]:
    """First, second and steady runs, published and ours, per workload and framework: the
    second run's effect (second ≫ steady) is the study's finding."""
    lines = ["First, second and steady runs (ms): published, then ours, and our second run over our steady state.",
             "", "| workload | framework | published first | published second | published steady | our framework | "
             "our first | our second | our steady | our second/steady |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    names = {"jax": "jax", "torch": "PyTorch", None: "PyTorch eager (not in the study)"}
    for model, (workload, figures) in pub["models"].items():
        if model not in ours:
            continue
        for fw, mine in (("jax", "jax"), ("torch", _pytorch(ours[model])), (None, "torch")):
            if fw is None and mine == _pytorch(ours[model]):
                continue  # eager is shown beside torch_xla only when both ran
            row = next((c for c in ours[model] if c.framework == mine), None)
            first, second, steady = ((row.first_s, row.second_s, row.median_s) if row else (None, None, None))
            first, second, steady = (v * 1e3 if v is not None else None for v in (first, second, steady))
            published = figures.get(fw) if fw else ()
            cells = [_ms(v) for v in published] if published else (["OOM"] * 3 if fw else ["—"] * 3)
            ours_cells = ["—" if v is None else f"{v:.3f}" for v in (first, second, steady)]
            lines.append(f"| {workload} | {names[fw]} | " + " | ".join(cells) + f" | {mine} | " + " | ".join(ours_cells)
                         + f" | {f'{second / steady:.3g}' if second and steady else '—'} |")
    return lines


def section(experiment: str, comparison: Comparison) -> list[str]:
    """Markdown lines: the published figures beside ours, or [] when the exp reproduces none."""
    pub = PUBLISHED.get(experiment)
    if not pub:
        return []
    lines = ["## Published figures beside ours", "", f"Source: {pub['source']}.", "", NOT_COMPARABLE, ""]
    ours = _model_groups(comparison)
    if "models" in pub:
        lines += ["| workload | published JAX steady (ms) | published PyTorch steady (ms) | published JAX/PyTorch |"
                  " our JAX steady (ms) | our PyTorch steady (ms) | our JAX/PyTorch |", "|---|---:|---:|---:|---:|---:|---:|"]
        for model, (workload, figures) in pub["models"].items():
            if model not in ours:
                continue
            pj, pt = (figures[f][2] if figures[f] else None for f in ("jax", "torch"))
            oj, ot = _ours(ours[model], "jax"), _ours(ours[model], _pytorch(ours[model]))
            lines.append(f"| {workload} | {_ms(pj)} | {_ms(pt)} | {_ratio(pj, pt)} | "
                         f"{'—' if oj is None else f'{oj:.3f}'} | {'—' if ot is None else f'{ot:.3f}'} | {_ratio(oj, ot)} |")
        lines += ["", f"Published on {pub['hardware']}; ours at this sweep's sizes, precision and hardware "
                  "(see the table above). OOM: the published run did not fit in memory. Our PyTorch: through "
                  "torch_xla where the sweep ran it, as the study did; else eager.", ""]
        lines += _phases(pub, ours)
    else:
        lines += ["Published findings (no per-step figures were published):", ""]
        lines += [f"- {f}" for f in pub["findings"]]
        lines += ["", "Ours: JAX's steady step time over each other framework's (below 1: JAX faster):", ""]
        for model, members in _model_groups(comparison).items():
            jax = _ours(members, "jax")
            lines.append(f"- {model}: " + ", ".join(f"jax/{c.framework} {_ratio(jax, _ours(members, c.framework))}"
                                                     for c in members if c.framework != "jax"))
    return lines + [""]
