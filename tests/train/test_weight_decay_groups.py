"""``optimizer.exclude_bias_and_norm`` decides, through the real ``PretrainModule``
``configure_optimizers`` of a tiny ``contrastkit pretrain`` run, which parameters get weight
decay: every parameter (the SGD recipes: SCE D.1, DySTreSS A.1, SINCERE J) or all but biases and
normalisation parameters (the LARS recipes: SCE D.2/D.3)."""

from __future__ import annotations

import pytest
from pretrain_args import TINY, method_args
from torch import nn

from contrastkit.cli.pretrain import pretrain
from contrastkit.train.specs import OptimizerSpec

WD = 1e-3


def _optimizer_groups(tmp_path, exclude: bool | None, optimizer: str = "sgd"):
    """Train one tiny epoch; ``exclude=None`` leaves the option at its default."""
    flag = [] if exclude is None else ["--model.optimizer.exclude_bias_and_norm",
                                       str(exclude).lower()]
    cli = pretrain([
        *TINY, *method_args("SCE", queue_size=64), "--data.subset", "64",
        "--trainer.max_epochs", "1", "--model.online_eval.knn", "false",
        "--model.optimizer.name", optimizer, "--model.optimizer.weight_decay", str(WD),
        *flag, "--output", str(tmp_path / f"{optimizer}_{exclude}"),
    ])
    method = cli.model.method
    groups = cli.trainer.optimizers[0].param_groups
    return method, cli.model.classifier, groups


def _norm_and_bias_ids(method: nn.Module) -> set[int]:
    """Trainable (online) batch-norm parameters and biases."""
    ids = {id(p) for m in method.modules() if isinstance(m, nn.modules.batchnorm._NormBase)
           for p in m.parameters(recurse=False) if p.requires_grad}
    ids |= {id(p) for name, p in method.named_parameters()
            if name.endswith("bias") and p.requires_grad}
    return ids


def test_every_parameter_is_decayed_when_exclusion_is_off(tmp_path):
    method, classifier, groups = _optimizer_groups(tmp_path, exclude=False, optimizer="lars")
    trainable = {id(p) for p in method.parameters() if p.requires_grad}
    decayed = [g for g in groups if g["weight_decay"] == WD]
    assert len(decayed) == 1
    assert {id(p) for p in decayed[0]["params"]} == trainable
    assert _norm_and_bias_ids(method)  # batch-norm parameters and biases are among them
    # the EMA target is not optimised; the online classifier keeps its own undecayed group
    assert not {id(p) for p in method.target.parameters()} & trainable
    rest = [g for g in groups if g is not decayed[0]]
    assert [g["name"] for g in rest] == ["online_linear"] and rest[0]["weight_decay"] == 0.0
    assert {id(p) for p in rest[0]["params"]} == {id(p) for p in classifier.parameters()}
    assert decayed[0]["lars_adapt"]  # LARS adapts every parameter too


def test_biases_and_norms_are_excluded_by_default(tmp_path):
    method, _, groups = _optimizer_groups(tmp_path, exclude=None)
    by_name = {g["name"]: g for g in groups}
    excluded = {id(p) for p in by_name["no_decay"]["params"]}
    assert excluded == _norm_and_bias_ids(method) and excluded
    assert by_name["no_decay"]["weight_decay"] == 0.0 and not by_name["no_decay"]["lars_adapt"]
    decayed = {id(p) for p in by_name["decay"]["params"]}
    assert by_name["decay"]["weight_decay"] == WD
    assert all(p.ndim > 1 for p in method.parameters() if id(p) in decayed)


def test_the_lars_options_reach_the_optimiser(tmp_path):
    """optimizer.eta, clip_lr and trust_ratio reach every LARS group, and excluded_lr_ratio
    sets the excluded parameters' learning rate, kept by the schedule (the official Barlow
    Twins code: biases and BN at 0.0048 / 0.2 of the weights' rate)."""
    cli = pretrain([
        *TINY, *method_args("SimCLR"), "--data.subset", "64", "--trainer.max_epochs", "1",
        "--model.online_eval.knn", "false", "--model.optimizer.name", "lars",
        "--model.optimizer.eta", "0.02", "--model.optimizer.clip_lr", "true",
        "--model.optimizer.trust_ratio", "update", "--model.optimizer.excluded_lr_ratio",
        "0.024", "--output", str(tmp_path / "run"),
    ])
    optimizer = cli.trainer.optimizers[0]
    by_name = {g["name"]: g for g in optimizer.param_groups}
    for group in by_name.values():
        assert (group["eta"], group["clip_lr"], group["trust_ratio"]) == (0.02, True, "update")
    ratio = by_name["no_decay"]["initial_lr"] / by_name["decay"]["initial_lr"]
    assert abs(ratio - 0.024) < 1e-12  # the schedule multiplies both by the same factor
    assert by_name["online_linear"]["initial_lr"] == 0.1  # the classifier's own rate


def test_lars_options_with_another_optimiser_are_refused():
    with pytest.raises(ValueError, match=r"optimizer\.clip_lr applies to LARS: set optimizer"):
        OptimizerSpec(name="sgd", clip_lr=True)
    with pytest.raises(ValueError, match=r"optimizer\.excluded_lr_ratio applies to the"):
        OptimizerSpec(name="lars", exclude_bias_and_norm=False, excluded_lr_ratio=0.5)
    with pytest.raises(ValueError, match=r"optimizer\.eta must be > 0"):
        OptimizerSpec(name="lars", eta=0.0)
    assert OptimizerSpec(name="sgd", excluded_lr_ratio=0.5).excluded_lr_ratio == 0.5


def test_a_learning_rate_of_zero_is_the_random_init_baselines_and_is_accepted():
    """configs/repro/cpu/random_init.yaml trains one step at base_lr 0 (no weight changes);
    issue 52's check refused it (``must be finite and > 0``), and with it every random-init
    baseline of the reproduction study. The online classifier's rate stays > 0."""
    assert OptimizerSpec(base_lr=0.0).base_lr == 0.0
    with pytest.raises(ValueError, match=r"model\.optimizer\.base_lr must be finite and >= 0"):
        OptimizerSpec(base_lr=-0.1)
    with pytest.raises(ValueError, match=r"model\.optimizer\.online_lr must be finite and > 0"):
        OptimizerSpec(online_lr=0.0)
