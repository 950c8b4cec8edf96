"""The GRPO learning step: LoRA updates on a round's nodes, timed per phase, checkpointed.

Where this departs from textbook GRPO (DeepSeekMath):

* Advantages are `grpo_valid_only` (advantages.py): reward minus the sibling-group mean, no
  division by the group's std; infrastructure failures (reward -1.0) are left out of the
  baseline and get zero advantage; a group whose rewards are all equal gives zero advantage.
* The reference policy is the base model with the LoRA adapter disabled: no second model.
* One optimizer step per GRPO step (one mini-batch = the whole round), gradients accumulated
  over token-budget micro-batches; the loss is a token mean over every response token of
  the round, so the packing does not change the gradient.
* KL to the reference is the k3 ("low_var_kl") estimator added to the loss, not the reward.
"""
