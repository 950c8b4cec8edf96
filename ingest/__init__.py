"""Read data roots (docs/data-roots.md) into the warehouse schema."""
