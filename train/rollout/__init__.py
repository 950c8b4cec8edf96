"""Tree-search rollouts: expansions, parent choice, prompts, node records."""
