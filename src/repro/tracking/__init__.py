"""Experiment tracking (MLflow), opened once per sweep in the parent process only."""
