"""repro's Hydra sweeper: Hydra instantiates sweepers only from the hydra_plugins namespace."""
