"""What varied between runs, and short words for it (`jax · batch 64`).

Two views: what the user *asked* to vary (the keys of each record's command-line
`overrides`, the sweep's parameters included: the audit lists those as "varied", not as
warnings) and what *did* differ (the configs themselves: table row labels and titles).
"""

from __future__ import annotations

from typing import Any

from repro.config.spec import semantic
from repro.hashing import canonical_json
from repro.flat import flatten

# Override keys that choose where and how a run is shown, not what runs.
HOUSEKEEPING = ("ledger", "tracking", "progress", "hydra", "run.repeats", "run.timeout_s", "exp", "verdict",
                "run.resume")  # whether to skip a recorded job: a resumed sweep's rows and audit never name it
# Config groups named by their choice (`framework=jax`), not by their fields.
GROUPS = ("framework", "precision", "sharding", "hardware", "data", "cluster")
SHORT = {"run.batch_size": "batch", "model.preset": "preset"}
# Keys whose values read as words: the determinism mode (`torch · free`, `torch · deterministic · no NaN fill`).
WORDS = {"run.deterministic": {"true": "deterministic", "false": "free"},
         "run.fill_uninitialized_memory": {"none": "", "null": "", "true": "NaN fill", "false": "no NaN fill"}}
# A side of a verdict whose value reads as no word (the fill left to torch's default) is named so.
UNSET = {"run.fill_uninitialized_memory": "NaN fill (torch's default)"}
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
    """Override keys whose value is not the same in every record (or that some record lacks):
    varied on purpose. The one derivation: the audit, the run names, the sweep's MLflow params
    and `repro --dry-run` all read it. Framework, model and preset first, then the rest by name."""
    values = [override_values(r) for r in records]
    keys = {k for v in values for k in v}
    return _ordered([k for k in keys if len({v.get(k) for v in values}) > 1])


def _ordered(keys) -> list[str]:
    return sorted(keys, key=lambda k: (FIRST.index(k) if k in FIRST else len(FIRST), k))


def related(key: str, other: str) -> bool:
    """One key is the other or inside it (`precision` and `precision.matmul`)."""
    return key == other or key.startswith(other + ".") or other.startswith(key + ".")


_ABSENT = object()


def _lookup(record: dict, key: str) -> Any:
    node: Any = record["config"]
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node.get("name") if isinstance(node, dict) else node


def value_of(record: dict, key: str) -> Any:
    return None if (v := _lookup(record, key)) is _ABSENT else v


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
    return _ordered(k for k in keys if len({f.get(k) for f in flats}) > 1)


def name_keys(records: list[dict]) -> list[str]:
    """The keys that name a run among `records`: the framework, the swept keys, and any other
    config key that differs without a swept key explaining it (runs from different sweeps)."""
    swept = swept_keys(records)
    unexplained = [k for k in differing_keys(records) if not any(related(k, s) for s in swept)]
    return _ordered({"framework", *swept, *unexplained})


def describe(key: str, value: Any) -> str:
    """`framework`, jax → "jax"; `run.batch_size`, 64 → "batch 64"; `model.width`, 256 → "width 256"."""
    if key in GROUPS or key == "model":
        return str(value)
    if key in WORDS:
        return WORDS[key].get(str(value).lower(), f"{key.split('.')[-1]} {value}")
    if key == "env.packages":  # a version sweep: the pins are the name (`jax==0.10.2`)
        pins = value if isinstance(value, (list, tuple)) else str(value).strip("[]").replace("'", "").split(", ")
        return ", ".join(p for p in pins if p) or "as installed"
    return f"{SHORT.get(key, key.split('.')[-1])} {value}"


def describe_values(record: dict, keys: list[str]) -> str:
    """The record's values of `keys` in short words (its config's, else its override's)."""
    overrides = override_values(record)
    words = (describe(k, v if (v := _lookup(record, k)) is not _ABSENT else overrides.get(k)) for k in keys)
    return " · ".join(w for w in words if w)


def run_name(record: dict, keys: list[str]) -> str:
    """The one name of a run, the same in the terminal, MLflow, report.md and results.csv:
    its values of the naming keys (`name_keys`), `jax · batch 64`. `record` needs only its
    `config` (a job about to run is named the same way as its record)."""
    return describe_values(record, keys or ["framework"])
