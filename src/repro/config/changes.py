"""Changes to what a config computes: code after which a recorded config is no longer the same maths.

A config hash names what was asked for; the code decides what is computed. When a commit changes
that for some configs (a layer's parameter layout, a fused projection, how the initial weights are
drawn), a record made before it cannot be replayed bit for bit by today's code, whatever the
machine: `repro replay` refuses it before any worker starts and points at `--as-recorded`, which
runs the record's own commit and packages. Records keep their config hash: a key added later gets
its value from the time the record was made (schema.py `ADDED_AT_DEFAULT`); this list is the same
idea for the maths behind unchanged keys.

A change is dated by its commit's time (UTC), compared with the record's `created`: a shallow or
bundled checkout may not hold the record's commit, and the clock is the same one that wrote both.
Found by replaying every shipped record in the code that followed (the replay test,
tests/test_replay_shipped.py); a new change that alters a config's numbers adds its line here.
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH = ("torch", "torch_compile", "torch_xla")


@dataclass(frozen=True)
class Change:
    commit: str
    at: str  # the commit's time, ISO 8601 UTC, as records write `created`
    what: str
    frameworks: tuple[str, ...] | None = None  # None: every framework
    models: tuple[str, ...] | None = None  # None: every model

    def touches(self, framework: str, model: str) -> bool:
        return ((self.frameworks is None or framework in self.frameworks)
                and (self.models is None or model in self.models))


CHANGES = (
    Change("20fd947", "2026-11-23T10:55:04Z", "run.init: the initial weights drawn once in NumPy (shared) or by "
           "the framework (native), in a new layout", frameworks=("jax",)),
    Change("1f15db1", "2026-11-23T11:16:16Z", "JAX LayerNorm's variance in one pass", frameworks=("jax",),
           models=("vit", "bert_base", "gpt2_small", "gpt_neo_1_3b", "mha")),
    Change("4d94679", "2026-11-23T13:56:00Z", "Flax Linear stores its weight [out, in]", frameworks=("jax",)),
    Change("4d94679", "2026-11-23T13:56:00Z", "attention's q, k and v as one fused projection", frameworks=TORCH,
           models=("vit", "bert_base", "gpt2_small", "gpt_neo_1_3b", "llama3_8b", "mha")),
    Change("cd2e2de", "2026-11-23T13:56:00Z", "JAX BatchNorm's two-pass statistics with a closed-form backward",
           frameworks=("jax",), models=("resnet50",)),
    Change("7beb2fa", "2026-11-23T14:13:56Z", "learned positions as a slice of the table",
           models=("bert_base", "gpt2_small", "gpt_neo_1_3b")),
)


def since(created: str | None, framework: str, model: str) -> Change | None:
    """The newest change after `created` (a record's time) that alters what `framework` computes
    for `model`, or None. A record with no time is taken as made by today's code."""
    if not created:
        return None
    after = [c for c in CHANGES if c.at > _utc(created) and c.touches(framework, model)]
    return max(after, key=lambda c: c.at) if after else None


def _utc(created: str) -> str:
    """A record's `created` (2026-11-23T12:17:36.836Z) in the changes' form, to compare as text."""
    return created[:19] + "Z"
