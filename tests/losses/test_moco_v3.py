"""MoCo v3's loss against a loop over the queries written from its InfoNCE (float64)."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import make, unit

from contrastkit.losses import MoCoV3Loss, info_nce, moco_v3


def ref_moco_v3(q, k, temperature, offset=0):
    """2 tau * mean_i -log(exp(q_i.k_{o+i}/tau) / sum_j exp(q_i.k_j/tau)), all M keys."""
    q, k = unit(q), unit(k)
    losses = []
    for i in range(q.shape[0]):
        logits = torch.stack([q[i] @ k[j] for j in range(k.shape[0])]) / temperature
        losses.append(-(logits[offset + i] - torch.logsumexp(logits, dim=0)))
    return 2 * temperature * torch.stack(losses).mean()


@pytest.mark.parametrize("n,m,offset", [(2, 2, 0), (5, 5, 0), (4, 12, 0), (4, 12, 4), (4, 12, 8),
                                        (3, 7, 2)])
@pytest.mark.parametrize("temperature", [1.0, 0.2])
def test_moco_v3_matches_loop(n, m, offset, temperature):
    q, _, _ = make(n, 6, seed=1)
    k, _, _ = make(m, 6, seed=2)
    ours = moco_v3(q, k, temperature=temperature, key_offset=offset)
    ref = ref_moco_v3(q, k, temperature, offset)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, (q, k)), torch.autograd.grad(ref, (q, k)),
                             strict=True):
        torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("temperature", [1.0, 0.2, 0.05])
def test_in_batch_moco_v3_is_two_tau_info_nce(temperature):
    """The official factor 2 tau on the in-batch InfoNCE; not the InfoNCE alone."""
    q, k, _ = make(8, 5, grad=False)
    ours = moco_v3(q, k, temperature=temperature)
    torch.testing.assert_close(ours, 2 * temperature * info_nce(q, k, temperature=temperature))
    assert not torch.isclose(ours, info_nce(q, k, temperature=temperature))  # 2 tau != 1


def test_the_offset_picks_the_positive():
    """Each query's positive is row offset + i: matching keys placed there give a lower loss."""
    q, _, _ = make(4, 6, grad=False)
    others, _, _ = make(8, 6, seed=5, grad=False)
    keys = torch.cat([others[:4], q, others[4:]])  # rows 4..7 are the queries themselves
    assert moco_v3(q, keys, key_offset=4) < moco_v3(q, keys, key_offset=0)
    assert moco_v3(q, keys, key_offset=4) < moco_v3(q, keys, key_offset=8)


def test_module_equals_function():
    q, k, _ = make(4, 6, grad=False)
    keys = torch.cat([k, q])
    torch.testing.assert_close(MoCoV3Loss(temperature=0.3)(q, keys, 4),
                               moco_v3(q, keys, temperature=0.3, key_offset=4))


@pytest.mark.parametrize("kwargs,message", [
    ({"key_offset": 5}, "key_offset must be an int in \\[0, 4\\]"),
    ({"key_offset": -1}, "key_offset"),
    ({"key_offset": True}, "key_offset"),
    ({"temperature": 0.0}, "temperature"),
])
def test_bad_arguments_are_named(kwargs, message):
    q, k, _ = make(4, 6, grad=False)
    with pytest.raises(ValueError, match=message):
        moco_v3(q, torch.cat([k, q]), **kwargs)


def test_fewer_keys_than_queries_is_refused():
    q, k, _ = make(4, 6, grad=False)
    with pytest.raises(ValueError, match="key_offset"):
        moco_v3(q, k[:3])
    with pytest.raises(ValueError, match="key has batch size 1"):
        moco_v3(q[:1], k[:1])
