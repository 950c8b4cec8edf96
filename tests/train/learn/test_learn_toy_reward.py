"""A few GRPO steps raise a toy reward's valid rate (synthetic task, not the bundled tasks:
the tiny pre-trained policy takes minutes to build, too slow for this suite).

Toy task: vocabulary of 16 tokens; a response is "valid" when its first token is < 4 (a
random policy: about 25%); a valid response earns 0.5 + 0.5 * (share of its tokens < 4),
an invalid one the crash sentinel -0.5. Siblings of one prompt form a group.
"""
import torch

from learn_helpers import one_thread, tiny_policy  # noqa: F401 (autouse)
from train.learn.lora import make_optimizer
from train.learn.step import Sample, StepConfig, grpo_step
from train.learn.timing import PhaseTimer

SEEDS, STEPS, SIBLINGS, LENGTH, LR = (0, 1, 2), 8, 8, 3, 1e-2


@torch.no_grad()
def _sample(policy, prompt, n, length, gen) -> list[list[int]]:
    policy.eval()
    ids = torch.tensor([prompt] * n)
    for _ in range(length):
        probs = torch.softmax(policy(input_ids=ids).logits[:, -1].float(), -1)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=gen)], 1)
    return ids[:, len(prompt):].tolist()


def _reward(response: list[int]) -> float:
    if response[0] >= 4:
        return -0.5
    return 0.5 + 0.5 * sum(t < 4 for t in response) / len(response)


def _valid_rate(policy, prompts, gen, n=64) -> float:
    valid = [_reward(r) >= 0 for p in prompts for r in _sample(policy, p, n, 1, gen)]
    return sum(valid) / len(valid)


def _train(seed: int) -> tuple[float, float]:
    policy = tiny_policy(seed=seed, vocab=16)
    optimizer = make_optimizer(policy, LR)
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(0, 16, (4,), generator=gen).tolist() for _ in range(4)]
    before = _valid_rate(policy, prompts, gen)
    for _ in range(STEPS):
        samples = [Sample(p, r, _reward(r), f"prompt{i}") for i, p in enumerate(prompts)
                   for r in _sample(policy, p, SIBLINGS, LENGTH, gen)]
        grpo_step(policy, optimizer, samples, StepConfig(token_budget=64), PhaseTimer())
    return before, _valid_rate(policy, prompts, gen)


def test_grpo_steps_raise_the_valid_rate_over_seeds():
    rates = [_train(seed) for seed in SEEDS]
    before = sum(b for b, _ in rates) / len(rates)
    after = sum(a for _, a in rates) / len(rates)
    print(f"valid rate over seeds {SEEDS}: {before:.3f} -> {after:.3f} ({rates})")
    assert after > before + 0.05
    assert sum(a > b for b, a in rates) >= 2
