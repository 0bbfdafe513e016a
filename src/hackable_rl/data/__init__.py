"""Data providers, the prompt format and the prepare stage."""
