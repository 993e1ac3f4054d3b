"""What a person sees: live progress, the comparison (report/comparison.py) and its renderers."""

from repro.console import UNBOUNDED_WIDTH, console  # noqa: F401 - report.console() as before
