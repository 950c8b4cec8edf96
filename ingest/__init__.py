"""Read data roots (DATA.md) into the warehouse schema."""
