"""The losses against the papers' authors' public code, as outside references.

Each ``_*_code`` function below re-states, in this file's own words, what one function of an
authors' repository computes (read at the commit named; not copied), and each test compares a
contrastkit loss with it on the same inputs. Where the two differ by design the test shows the
difference and the docstring says why (docs/reproduction.md lists the same):

* SCE, juliendenize/eztorch @ d835471, ``eztorch/losses/sce_loss.py`` (``compute_sce_loss``,
  ``compute_sce_mask``; default config ``use_keys: False``): with a queue and ``use_keys``
  False the key's target softmax gets a constant logit 0 for the positive, where eq. 5 masks
  it; contrastkit's ``positive_target="zero_logit"`` is that form, ``"masked"`` (the default)
  eq. 5's, which the code's ``use_keys: True`` in-batch form computes. The code's
  ``use_keys: True`` with a queue uses the other keys *and* the queue as negatives; contrastkit
  takes one or the other (not compared).
* DySTreSS, sadimanna/DySTreSS @ its stored commit, ``smallscale/main.py``
  (``get_temp_positive``/``get_temp_negative`` with ``func='cossin'``, ``train``): the same
  temperature function and the same cross-entropy over (positive, 2N - 2 negatives), each pair
  at the temperature of its own detached cosine similarity. The code's default ``--func`` is
  not among its choices and falls to the constant ``t_max`` (SimCLR at 0.2: the study's
  primary baseline); contrastkit clamps the similarity to [-1, 1] first (no effect on unit
  vectors).
* SupCon, HobbitLong/SupContrast @ 66a8fe5, ``losses.py`` (``SupConLoss``, ``contrast_mode``
  'all'): the same loss times ``temperature / base_temperature``; ``base_temperature`` is 0.07
  by default and the SupCon repository's ``main_supcon.py`` leaves it there, so at
  ``--temp 0.1`` its loss is 0.1/0.07 times contrastkit's (and its gradients too: an
  effective learning-rate factor). The SINCERE authors' fork sets ``base_temperature`` to the
  temperature, so the two agree.
* SINCERE, tufts-ml/SupContrast @ f307724, ``revised_losses.py`` (``SINCERELoss``,
  ``MultiviewSINCERELoss``, ``EpsSupInfoNCELoss``): the same loss. The code divides each
  anchor's sum by its number of positives and the total by the batch, so an anchor without a
  positive would divide by zero; contrastkit leaves such anchors out (not compared: every
  anchor here has a positive, as with two views).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from contrastkit.losses import DySTreSSTemperature
from contrastkit.losses.infonce import nt_xent
from contrastkit.losses.sce import sce
from contrastkit.losses.sincere import eps_supinfonce, sincere, supcon

DTYPE = torch.float64


def _unit(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g, dtype=DTYPE), dim=-1)


# --- SCE: eztorch compute_sce_loss ------------------------------------------------------------
def _eztorch_sce_code(q, k, queue, *, use_keys, coeff, temp, temp_m):
    """``compute_sce_loss`` of eztorch: ``queue`` is (D, K) (the code's layout) or None."""
    n = q.shape[0]
    if use_keys:  # the key's similarities to every key (itself masked) and q's to every key
        target_logits, online_logits = k @ k.T, q @ k.T
        positive = torch.eye(n, dtype=q.dtype)
    else:  # one column for the positive: q.k online, a constant 0 in the target
        target_logits = torch.zeros(n, 1, dtype=q.dtype)
        online_logits = (q * k).sum(1, keepdim=True)
        positive = torch.ones(n, 1, dtype=q.dtype)
    if queue is not None:
        target_logits = torch.cat([target_logits, k @ queue], dim=1)
        online_logits = torch.cat([online_logits, q @ queue], dim=1)
    positive = F.pad(positive, (0, online_logits.shape[1] - positive.shape[1]))
    if use_keys:
        target_logits = target_logits - 1e9 * positive
    target = torch.softmax(target_logits / temp_m, dim=1)
    weights = coeff * positive + (1 - coeff) * target
    weights = weights / weights.abs().sum(1, keepdim=True)
    return -(weights * torch.log_softmax(online_logits / temp, dim=1)).sum(1).mean()


@pytest.mark.parametrize("coeff", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("temp_m", [0.05, 1.0])
def test_sce_zero_logit_form_is_the_authors_queue_code(coeff, temp_m):
    q, k, queue = _unit(16, 8, seed=0), _unit(16, 8, seed=1), _unit(16, 8, seed=2)
    code = _eztorch_sce_code(q, k, queue.T, use_keys=False, coeff=coeff, temp=0.1,
                             temp_m=temp_m)
    ours = sce(q, k, queue, temperature=0.1, target_temperature=temp_m, coeff=coeff,
               positive_target="zero_logit")
    torch.testing.assert_close(ours, code, rtol=1e-10, atol=1e-10)
    masked = sce(q, k, queue, temperature=0.1, target_temperature=temp_m, coeff=coeff)
    if coeff < 1.0 and temp_m == 1.0:
        # at a soft target the zero logit keeps a visible weight on the positive (about
        # 1 / (1 + K) here), which eq. 5's mask gives to the negatives
        assert not torch.isclose(masked, code, rtol=1e-3, atol=0)
    if coeff == 1.0:  # InfoNCE: no target, the two forms are one
        torch.testing.assert_close(masked, code, rtol=1e-10, atol=1e-10)


def test_sce_masked_form_is_the_authors_in_batch_code_with_keys():
    q, k = _unit(12, 8, seed=3), _unit(12, 8, seed=4)
    code = _eztorch_sce_code(q, k, None, use_keys=True, coeff=0.5, temp=0.1, temp_m=0.07)
    ours = sce(q, k, None, temperature=0.1, target_temperature=0.07, coeff=0.5)
    torch.testing.assert_close(ours, code, rtol=1e-10, atol=1e-10)


def test_sce_zero_logit_gradient_matches_the_authors_code():
    """Gradients with respect to the raw (un-normalised) query: the authors' model normalises
    its outputs before the loss (``normalize_outputs: True``), contrastkit's loss does."""
    q0, k, queue = 2 * _unit(10, 6, seed=5), _unit(10, 6, seed=6), _unit(32, 6, seed=7)
    q1, q2 = q0.clone().requires_grad_(), q0.clone().requires_grad_()
    _eztorch_sce_code(F.normalize(q1, dim=1), k, queue.T, use_keys=False, coeff=0.5, temp=0.2,
                      temp_m=0.07).backward()
    sce(q2, k, queue, temperature=0.2, target_temperature=0.07,
        positive_target="zero_logit").backward()
    torch.testing.assert_close(q2.grad, q1.grad, rtol=1e-9, atol=1e-12)


# --- DySTreSS: smallscale/main.py ----------------------------------------------------------------
def _dystress_temperature_code(t_min, t_max, cos, func="cossin"):
    """``get_temp_positive`` / ``get_temp_negative`` of the DySTreSS code (the two are equal)."""
    if func == "cossin":
        return t_min + 0.5 * (t_max - t_min) * (1 + torch.cos((1 + cos) * math.pi))
    return t_max  # any other --func (its default 'expo' included): the constant t_max


def _dystress_train_code(z1, z2, t_min, t_max, func="cossin"):
    """The loss of one step of ``train`` in the DySTreSS code, on normalised views."""
    n = z1.shape[0]
    z = torch.cat([z1, z2])
    sim = z @ z.T
    positives = torch.cat([torch.diagonal(sim, n), torch.diagonal(sim, -n)]).reshape(2 * n, 1)
    keep = ~torch.eye(2 * n, dtype=torch.bool)
    keep[torch.arange(n), torch.arange(n) + n] = False
    keep[torch.arange(n) + n, torch.arange(n)] = False
    negatives = sim[keep].reshape(2 * n, -1)
    positives = positives / _dystress_temperature_code(t_min, t_max, positives.detach(), func)
    negatives = negatives / _dystress_temperature_code(t_min, t_max, negatives.detach(), func)
    logits = torch.cat([positives, negatives], dim=1)
    return F.cross_entropy(logits, torch.zeros(2 * n, dtype=torch.long))


def test_dystress_temperature_is_the_authors_function():
    cos = torch.linspace(-1, 1, 41, dtype=DTYPE)
    ours = DySTreSSTemperature(t_min=0.07, t_max=0.2)(cos)
    torch.testing.assert_close(ours, _dystress_temperature_code(0.07, 0.2, cos))


def test_dystress_loss_and_gradient_are_the_authors_training_loss():
    """On raw projector outputs: the authors' model normalises them, contrastkit's loss does."""
    z1, z2 = 3 * _unit(12, 8, seed=8), _unit(12, 8, seed=9)
    a1, a2 = z1.clone().requires_grad_(), z1.clone().requires_grad_()
    code = _dystress_train_code(F.normalize(a1, dim=1), z2, 0.07, 0.2)
    ours = nt_xent(a2, z2, temperature=DySTreSSTemperature(t_min=0.07, t_max=0.2))
    torch.testing.assert_close(ours, code, rtol=1e-10, atol=1e-10)
    code.backward()
    ours.backward()
    torch.testing.assert_close(a2.grad, a1.grad, rtol=1e-9, atol=1e-12)


def test_dystress_code_default_is_simclr_at_t_max():
    """The code's constant mode (its default ``--func``) is NT-Xent at ``t_max``: the SimCLR
    baseline the study compares DySTreSS with first (t = 0.2)."""
    z1, z2 = _unit(12, 8, seed=10), _unit(12, 8, seed=11)
    code = _dystress_train_code(z1, z2, 0.07, 0.2, func="expo")
    torch.testing.assert_close(nt_xent(z1, z2, temperature=0.2), code, rtol=1e-10, atol=1e-10)


# --- SupCon: HobbitLong/SupContrast losses.py -------------------------------------------------
def _supcon_code(features, labels, temperature, base_temperature=0.07):
    """``SupConLoss(temperature, contrast_mode='all', base_temperature)`` on (B, V, D)."""
    b, v = features.shape[:2]
    same = (labels[:, None] == labels[None, :]).to(features.dtype).repeat(v, v)
    anchors = torch.cat(torch.unbind(features, dim=1))  # view-major: all first views, ...
    logits = anchors @ anchors.T / temperature
    logits = logits - logits.max(dim=1, keepdim=True).values.detach()
    not_self = 1.0 - torch.eye(b * v, dtype=features.dtype)
    same = same * not_self
    log_prob = logits - torch.log((torch.exp(logits) * not_self).sum(1, keepdim=True))
    mean_pos = (same * log_prob).sum(1) / same.sum(1)
    return (-(temperature / base_temperature) * mean_pos).mean()


def test_supcon_is_the_supcon_code_up_to_its_temperature_factor():
    features, labels = _unit(16, 2, 8, seed=12), torch.randint(0, 4, (16,),
                                                             generator=torch.Generator()
                                                             .manual_seed(0))
    ours = supcon(features, labels, temperature=0.1)
    # the SINCERE authors' fork: base_temperature = temperature
    torch.testing.assert_close(ours, _supcon_code(features, labels, 0.1, 0.1), rtol=1e-10,
                               atol=1e-10)
    # the SupCon repository's default base_temperature 0.07 scales the loss by 0.1 / 0.07
    default = _supcon_code(features, labels, 0.1)
    torch.testing.assert_close(default, ours * (0.1 / 0.07), rtol=1e-10, atol=1e-10)


# --- SINCERE: tufts-ml/SupContrast revised_losses.py ------------------------------------------
def _sincere_code(embeds, labels, temperature, epsilon=0.0):
    """``SINCERELoss`` (``epsilon`` 0) / ``EpsSupInfoNCELoss`` on (M, D) unit embeddings."""
    logits = embeds @ embeds.T / temperature
    same = labels[None, :] == labels[:, None]
    noise = torch.where(same, torch.full_like(logits, -math.inf), logits)
    noise_lse = torch.logsumexp(noise, dim=0)[:, None].expand_as(logits)  # row i: i's noise
    partners = same & ~torch.eye(len(labels), dtype=torch.bool)
    count = partners.sum(dim=0)
    pair = torch.zeros_like(logits)
    pair[partners] = -(logits[partners] - torch.logaddexp(logits[partners] - epsilon,
                                                         noise_lse[partners]))
    return (pair / count).sum() / len(labels)


def _multiview(features, labels):
    """``MultiviewSINCERELoss``'s layout: views of one sample next to each other."""
    return features.reshape(-1, features.shape[-1]), labels.repeat_interleave(features.shape[1])


def test_sincere_is_the_authors_code():
    g = torch.Generator().manual_seed(1)
    features, labels = _unit(16, 2, 8, seed=13), torch.randint(0, 3, (16,), generator=g)
    embeds, flat = _multiview(features, labels)
    torch.testing.assert_close(sincere(features, labels, temperature=0.1),
                               _sincere_code(embeds, flat, 0.1), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(eps_supinfonce(features, labels, temperature=0.1, epsilon=0.25),
                               _sincere_code(embeds, flat, 0.1, 0.25), rtol=1e-10, atol=1e-10)


def test_sincere_gradient_is_the_authors_code():
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 2, (10,), generator=g)  # CIFAR-2: two classes
    f0 = 2 * _unit(10, 2, 6, seed=14)  # raw outputs: the authors' model normalises them
    f1, f2 = f0.clone().requires_grad_(), f0.clone().requires_grad_()
    embeds, flat = _multiview(F.normalize(f1, dim=-1), labels)
    _sincere_code(embeds, flat, 0.05).backward()
    sincere(f2, labels, temperature=0.05).backward()
    torch.testing.assert_close(f2.grad, f1.grad, rtol=1e-9, atol=1e-12)
