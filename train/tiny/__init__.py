"""The tiny CPU policy: a small model pre-trained on the bundled tasks' solutions, written as
the tree search prompts for them, so it sits above the environment (train.env) and the
rollout (train.rollout) whose tasks and prompts it learns; the loader (train.policy) stays
below both and loads its build like any checkpoint."""
