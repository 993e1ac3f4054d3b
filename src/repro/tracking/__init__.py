"""Experiment tracking (MLflow), opened once per sweep in the parent process only."""

AUTOFLUSH_NOTE = "(raised as a result of Query-invoked autoflush"  # SQLAlchemy's wrapper line, not a cause


def root_cause(e: BaseException) -> BaseException:
    """The innermost exception `e` was raised from (or while handling)."""
    seen = {id(e)}
    while (inner := e.__cause__ or e.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        e = inner
    return e


def failure_line(e: BaseException) -> str:
    """An MLflow error as one short line (its messages run to screens of nested causes). A
    database's own error (sqlite: "database or disk is full", "database is locked") is the real
    cause under MLflow's and SQLAlchemy's wrappers: that one is named."""
    root = root_cause(e)
    if type(root).__module__ == "sqlite3" or str(e).lstrip().startswith(AUTOFLUSH_NOTE):
        e = root
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:160]}"
