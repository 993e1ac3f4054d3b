"""Environments: what a run's interpreter had installed, and rebuilding it.

- `lock`: every installed distribution of an interpreter as a pip/uv requirements file,
  content-addressed (`<ledger>/envs/<sha256>.txt`); records name it as `environment.env_hash`.
- `venvs`: a venv with exactly a lock's versions, built with uv, cached by its hash.
- `worktrees`: the code of a recorded commit as a cached git worktree.
- `cli`: `repro env list | show HASH | prune`.
"""
