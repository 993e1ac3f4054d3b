"""repro bisect: which commit or package version made a workload slower (issue 56)."""
