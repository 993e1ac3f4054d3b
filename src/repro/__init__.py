"""repro: declarative, exactly reproducible deep-learning framework comparisons.

Importing `repro` is cheap on purpose (no framework, no MLflow): the worker process imports
only its own framework, and the parent imports MLflow once per sweep.
"""

__version__ = "0.1.0"
