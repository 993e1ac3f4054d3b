"""Config: the schema (dataclasses), checks before running, and a run's identity hash."""

from repro.config.schema import ConfigError
from repro.config.spec import config_hash, semantic
from repro.config.validate import Plan, check, plan

__all__ = ["ConfigError", "Plan", "check", "plan", "config_hash", "semantic"]
