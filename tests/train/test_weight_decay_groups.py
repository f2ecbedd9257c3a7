"""``optimizer.exclude_bias_and_norm`` decides, through the real ``PretrainModule``
``configure_optimizers`` of a tiny ``contrastkit pretrain`` run, which parameters get weight
decay: every parameter (the SGD recipes: SCE D.1, DySTreSS A.1, SINCERE J) or all but biases and
normalisation parameters (the LARS recipes: SCE D.2/D.3)."""

from __future__ import annotations

from pretrain_args import TINY, method_args
from torch import nn

from contrastkit.cli.pretrain import pretrain

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
