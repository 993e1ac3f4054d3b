"""Experiment tracking (MLflow), opened once per sweep in the parent process only."""


def failure_line(e: BaseException) -> str:
    """An MLflow error as one short line (its messages run to screens of nested causes)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:160]}"
