"""What a person sees: live progress and the closing comparison table."""

from rich.console import Console


def console() -> Console:
    """A terminal console, or a wide one for logs (off a terminal rich assumes 80 columns)."""
    c = Console()
    return c if c.is_terminal else Console(width=200)
