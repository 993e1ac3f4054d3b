from __future__ import annotations

from typing import Any, Mapping

from repro.models.common_torch import Attention


def build(dims: Mapping[str, Any]) -> Attention:
    return Attention(dims["dim"], dims["heads"])
