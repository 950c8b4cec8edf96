"""The trainer: environment (tasks, sandbox, grading, reward), tree-search rollouts and GRPO steps.

Everything it produces lands in the warehouse schema owned by :mod:`warehouse`.
"""
