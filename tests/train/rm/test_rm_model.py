"""The pair forward: packed (one row, no padding) gives the rewards of separate forwards, as
the padded two-row batch does; truncation keeps the end of a conversation."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def reward_model(tiny_base):
    from train.rm.model import LoraSpec, add_lora, load_reward_model, load_tokenizer

    tokenizer = load_tokenizer(tiny_base)
    model = add_lora(load_reward_model(tiny_base, torch.device("cpu"), 42, tokenizer.pad_token_id),
                     LoraSpec(rank=4, alpha=8, dropout=0.0))
    with torch.no_grad():  # non-zero LoRA B so the adapters count
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    return model.eval(), tokenizer


def test_packed_and_padded_pairs_score_like_separate_forwards(reward_model):
    from train.rm.model import encode, pair_attention, pair_rewards

    model, tokenizer = reward_model
    long = encode(tokenizer, [{"role": "user", "content": "tell me about owls please"},
                              {"role": "assistant", "content": "Sure! Owls are quiet and patient birds."}], 512)
    short = encode(tokenizer, [{"role": "user", "content": "owls?"}, {"role": "assistant", "content": "No."}], 512)
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([ids])).logits.item() for ids in (long, short)]
        with pair_attention(model, True):
            packed = [r.item() for r in pair_rewards(model, long, short, torch.device("cpu"), pack=True)]
        padded = [r.item() for r in pair_rewards(model, long, short, torch.device("cpu"), pack=False)]
    assert packed == pytest.approx(alone, abs=1e-5)
    assert padded == pytest.approx(alone, abs=1e-5)
    assert alone[0] != pytest.approx(alone[1], abs=1e-4)


def test_left_truncation_keeps_the_answer(reward_model):
    from train.rm.model import encode

    _, tokenizer = reward_model
    messages = [{"role": "user", "content": "a very long question " * 20}, {"role": "assistant", "content": "the end"}]
    full, cut = encode(tokenizer, messages, 10_000), encode(tokenizer, messages, 12)
    assert len(cut) == 12 and cut == full[-12:] and "the end" in tokenizer.decode(cut)


@pytest.mark.parametrize("prefix", [0, 9])
def test_packed_gradients_match_separate_forwards(reward_model, prefix):
    """The backward through the pair attention (shared prompt or none) gives the gradients of
    two separate forwards."""
    from train.rm.model import pair_attention, pair_rewards

    model, _ = reward_model
    prompt = list(range(100, 100 + prefix))
    a, b = prompt + list(range(5, 30)), prompt + list(range(40, 52))
    head = [p for n, p in model.named_parameters() if p.requires_grad and "lora_A" in n][0]
    with pair_attention(model, True):
        r_a, r_b = pair_rewards(model, a, b, torch.device("cpu"), pack=True)
        (r_a - r_b).backward()
    packed_grad, head.grad = head.grad.clone(), None
    (model(input_ids=torch.tensor([a])).logits - model(input_ids=torch.tensor([b])).logits).sum().backward()
    assert torch.allclose(packed_grad, head.grad, atol=1e-6) and packed_grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_several_pairs_in_one_row_score_and_train_like_separate_forwards(reward_model):
    """`pack_tokens`: three pairs (a shared prompt, none, a long one) in one row give each side
    the reward of its own forward, and the summed loss the gradients of separate forwards."""
    from train.rm.model import packed_length, packed_rewards, pair_attention

    model, _ = reward_model
    prompt = list(range(100, 109))
    pairs = [(prompt + list(range(5, 30)), prompt + list(range(40, 52))),
             (list(range(60, 70)), list(range(70, 85))),
             (list(range(200, 240)) + [7], list(range(200, 240)) + [8, 9])]
    assert [packed_length(*p) for p in pairs] == [9 + 25 + 12, 25, 40 + 1 + 2]
    lora = [p for n, p in model.named_parameters() if p.requires_grad and "lora_A" in n][0]
    with pair_attention(model, True):
        r_chosen, r_rejected = packed_rewards(model, pairs, torch.device("cpu"))
        (r_chosen - r_rejected).sum().backward()
    packed_grad, lora.grad = lora.grad.clone(), None
    alone = [(model(input_ids=torch.tensor([c])).logits[0, 0], model(input_ids=torch.tensor([r])).logits[0, 0])
             for c, r in pairs]
    sum(c - r for c, r in alone).backward()
    assert torch.allclose(r_chosen, torch.stack([c for c, _ in alone]), atol=1e-5)
    assert torch.allclose(r_rejected, torch.stack([r for _, r in alone]), atol=1e-5)
    assert torch.allclose(packed_grad, lora.grad, atol=1e-6) and packed_grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_answers_flash_path_is_causal_from_the_end():
    """On the GPU an answer attends through flash attention's causal flag (lower-right for
    fewer queries than keys); it must equal the explicit end-aligned mask."""
    import torch.nn.functional as F

    from train.learn.packed_attention import repeat_kv
    from train.rm.pair_attention import _end_aligned_causal, _flash_usable

    torch.manual_seed(0)
    q = torch.randn(1, 4, 5, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 2, 12, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))  # grouped-query
    assert _flash_usable(q, k, v, 0.0)  # not refused as torch's causal check refuses fewer queries than keys
    mask = torch.ones((5, 12), dtype=torch.bool, device="cuda").tril(diagonal=7)
    want = F.scaled_dot_product_attention(q.float(), repeat_kv(k, 2).float(), repeat_kv(v, 2).float(), attn_mask=mask)
    assert torch.allclose(_end_aligned_causal(q, k, v, None, 0.0, flash=True).float(), want, atol=2e-2)
