"""The bottom floor: errors, numeric bounds, safe writes, JSONL, storage layout, the registries and
extension settings, statistics: what every other floor may import, importing nothing above it."""
