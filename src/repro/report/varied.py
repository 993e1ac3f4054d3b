"""What varied between runs, and short words for it (`jax · batch 64`).

Two views: what the user *asked* to vary (the keys of each record's command-line
`overrides`, the sweep's parameters included: the audit lists those as "varied", not as
warnings) and what *did* differ (the configs themselves: table row labels and titles).
"""

from __future__ import annotations

from typing import Any

from repro.config.spec import semantic
from repro.hashing import canonical_json
from repro.tracking.flat import flatten

# Override keys that choose where and how a run is shown, not what runs.
HOUSEKEEPING = ("ledger", "tracking", "progress", "hydra", "run.repeats", "run.timeout_s", "exp")
# Config groups named by their choice (`framework=jax`), not by their fields.
GROUPS = ("framework", "precision", "sharding", "hardware", "data", "cluster")
SHORT = {"run.batch_size": "batch", "model.preset": "preset"}
FIRST = ("framework", "model", "model.preset")  # label order: these first, the rest as found


def _bare(key: str) -> str:
    return key.lstrip("+~")


def _housekeeping(key: str) -> bool:
    return any(key == h or key.startswith(h + ".") for h in HOUSEKEEPING)


def override_values(record: dict) -> dict[str, str]:
    """{key: value} of the record's command-line overrides (the sweep's included)."""
    out = {}
    for item in record.get("overrides") or []:
        key, eq, value = item.partition("=")
        if eq and not _housekeeping(_bare(key)):
            out[_bare(key)] = value
    return out


def swept_keys(records: list[dict]) -> list[str]:
    """Override keys whose value is not the same in every record: varied on purpose."""
    values = [override_values(r) for r in records]
    keys = sorted({k for v in values for k in v})
    return [k for k in keys if len({v.get(k) for v in values}) > 1]


def related(key: str, other: str) -> bool:
    """One key is the other or inside it (`precision` and `precision.matmul`)."""
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


def value_of(record: dict, key: str) -> Any:
    node: Any = record["config"]
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node["name"] if key in GROUPS and isinstance(node, dict) else node


def _config_keys(config: dict) -> dict[str, str]:
    """Flat {key: canonical value} of what changes results, groups collapsed to their choice."""
    flat = {}
    for key, value in flatten(semantic(config)).items():
        group = key.split(".")[0]
        if group in GROUPS:
            flat[group] = canonical_json(config[group].get("name"))
        elif key != "model.name":
            flat[key] = canonical_json(value)
    flat["model"] = canonical_json(config["model"]["name"])
    return flat


def differing_keys(records: list[dict]) -> list[str]:
    """Config keys (groups by choice) whose value differs across the records: framework,
    model and preset first."""
    flats = [_config_keys(r["config"]) for r in records]
    keys = {k for f in flats for k in f}
    found = [k for k in keys if len({f.get(k) for f in flats}) > 1]
    return sorted(found, key=lambda k: (FIRST.index(k) if k in FIRST else len(FIRST), k))


def describe(key: str, value: Any) -> str:
    """`framework`, jax → "jax"; `run.batch_size`, 64 → "batch 64"; `model.width`, 256 → "width 256"."""
    if key in GROUPS or key == "model":
        return str(value)
    return f"{SHORT.get(key, key.split('.')[-1])} {value}"


def label(record: dict, keys: list[str]) -> str:
    return " · ".join(describe(k, value_of(record, k)) for k in keys)


def override_label(overrides: list[str], swept: list[str] | None = None,
                   shown: tuple[str, ...] = ("framework", "model", "precision")) -> str:
    """" · batch 64" for a job's overrides: those of the `swept` keys (None: all), leaving out
    keys already `shown` (MLflow run names)."""
    values = override_values({"overrides": overrides})
    return "".join(f" · {describe(k, v)}" for k, v in values.items()
                   if k not in shown and (swept is None or k in swept))
