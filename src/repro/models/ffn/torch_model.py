from __future__ import annotations

from typing import Any, Mapping

from repro.models.common_torch import MLP


def build(dims: Mapping[str, Any]) -> MLP:
    return MLP(dims["dim"], dims["hidden"])
