import torch

from learn_helpers import random_samples, tiny_policy, one_thread  # noqa: F401 (autouse)
from train.learn.packed_attention import packed_attention
from train.learn.logprobs import causal_lm, pack_row, plain_logprobs, row_logprobs


def test_chunked_packed_logprobs_equal_the_plain_ones_and_their_grads():
    policy = tiny_policy(init=False)
    samples = random_samples(4)
    row = pack_row([(s.prompt_ids, s.response_ids) for s in samples])
    chunked, entropy = row_logprobs(policy, row, chunk=5)  # chunks cut across sequences
    plain = torch.cat([plain_logprobs(policy, s.prompt_ids, s.response_ids) for s in samples])
    torch.testing.assert_close(chunked, plain, rtol=1e-5, atol=1e-5)
    assert entropy.shape == chunked.shape and bool((entropy > 0).all())

    params = [p for p in policy.parameters() if p.requires_grad]
    with packed_attention(causal_lm(policy)):  # the checkpointed recompute needs it too
        g_chunked = torch.autograd.grad(chunked.sum(), params)
    g_plain = torch.autograd.grad(plain.sum(), params)
    for a, b in zip(g_chunked, g_plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_entropy_is_the_full_distribution_entropy():
    policy = tiny_policy(init=False)
    s = random_samples(1)[0]
    row = pack_row([(s.prompt_ids, s.response_ids)])
    _, entropy = row_logprobs(policy, row, chunk=3)
    ids = torch.tensor([list(s.prompt_ids) + list(s.response_ids)])
    logp = torch.log_softmax(policy(input_ids=ids).logits[0].float(), -1)[len(s.prompt_ids) - 1:-1]
    torch.testing.assert_close(entropy, -(logp.exp() * logp).sum(-1), rtol=1e-4, atol=1e-5)
