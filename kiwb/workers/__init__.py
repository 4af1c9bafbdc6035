"""Job code run in worker processes: the only layer that loads models and data sets."""
