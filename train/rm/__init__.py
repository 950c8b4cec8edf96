"""`train rm`: data root 004's Bradley-Terry reward model (LoRA + scalar head) and its model soup.

data (pair and evaluation files) -> run (the loop: train_member, soup, evaluate) -> publish
(warehouse rows through ingest.rm_records, data-root export). TRL's RewardTrainer was
evaluated first and kept only as the benchmark's baseline (README, benchmarks/RESULTS.md).
"""
