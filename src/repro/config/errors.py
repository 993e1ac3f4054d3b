"""The error a config that cannot run raises, apart from the schema: the command line's first steps
(`preflight.search.normalise`, before the code snapshot and a single run's early worker) raise it
without importing the schema's dataclasses (~30 ms on the 2-core reference machine)."""


class ConfigError(ValueError):
    """A config that cannot run: names the key, the bad value and what would be valid."""
