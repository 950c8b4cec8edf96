"""Report metrics as SQL views, one per file. Applied by `warehouse init`/`upgrade`."""
