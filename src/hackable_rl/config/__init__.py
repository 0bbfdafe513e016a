"""The schema of params.yaml (`experiment`), its field types, loading a params file (`loading`: read,
override, validate; no extension imported) and the per-stage torch settings (`runtime`)."""
