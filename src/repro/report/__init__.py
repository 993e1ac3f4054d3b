"""What a person sees: live progress and the closing comparison table."""
