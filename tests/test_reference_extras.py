"""What the reference does beyond the contract (so not graded): conveniences a submission need
not have. Each is a choice documented in docs/contract.md."""

import torch

from transformer_spec.submission import loader

reference = loader.load("reference")


def test_generate_accepts_a_one_dimensional_tensor_as_seed():
    torch.manual_seed(0)
    model = reference.MiniGPT(11, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=8)
    out = model.generate(torch.tensor([1, 2]), max_new_tokens=2, temperature=0)
    assert out[:2] == [1, 2] and len(out) == 4
    assert out == model.generate([1, 2], max_new_tokens=2, temperature=0)


def test_minillama_generates_the_same_tokens_with_and_without_its_kv_cache():
    """``use_cache`` (not in the contract): the cached steps rotate each new token at its absolute
    position, so greedy tokens match the plain loop's, before and after the window slides."""
    import reference

    torch.manual_seed(0)
    model = reference.MiniLlama(13, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, max_len=8)
    with_cache = model.generate([1, 2, 3], 12, temperature=0, use_cache=True)
    assert with_cache == model.generate([1, 2, 3], 12, temperature=0, use_cache=False)


def test_the_reference_adamw_step_evaluates_a_closure_with_gradients_on_and_returns_its_loss():
    """torch.optim's step(closure) protocol: the closure recomputes the loss (with autograd on, though step
    itself runs under no_grad) and step returns it."""
    import reference

    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = reference.AdamW([p], lr=0.1, weight_decay=0.0)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss) == 5.0 and torch.allclose(p.detach(), torch.tensor([0.9, -1.9]))
