"""`--space projector`: evaluating the pretraining projector's output (SINCERE section 4.1
measures its kNN accuracy and target-noise margin in the loss's embedding space)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from contrastkit.checkpoints import (
    dino_bottleneck_from_weights,
    load_projector,
    projector_from_weights,
)
from contrastkit.cli import main
from contrastkit.models.factory import DINOHeadSpec, HeadSpec, build_head
from contrastkit.models.heads import MLPHead
from contrastkit.models.prototypes import DINOHead

pytest.importorskip("sklearn")



@pytest.mark.parametrize("layers,batch_norm", [(1, "none"), (1, "all"), (2, "none"),
                                               (2, "hidden"), (2, "all"), (3, "hidden")])
def test_projector_is_rebuilt_from_its_weights(layers: int, batch_norm: str) -> None:
    torch.manual_seed(0)
    head = MLPHead(6, 5, 4, layers, batch_norm)  # type: ignore[arg-type]
    for module in head.modules():  # statistics that are not the defaults
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    head.eval()
    rebuilt, spec = projector_from_weights(head.state_dict())
    assert (spec.num_layers, spec.batch_norm, spec.out_dim) == (layers, batch_norm, 4)
    assert spec.last_bias is (batch_norm != "all")
    x = torch.randn(7, 6)
    torch.testing.assert_close(rebuilt(x), head(x), rtol=0, atol=0)


def test_a_head_without_its_last_bias_is_rebuilt_without_it() -> None:
    """Barlow Twins' and VICReg's projectors end in a linear layer without bias."""
    head = build_head(HeadSpec(hidden_dim=5, out_dim=4, num_layers=3, last_bias=False), 6)
    assert head.layers[-1].bias is None
    rebuilt, spec = projector_from_weights(head.eval().state_dict())
    assert spec.last_bias is False and rebuilt.layers[-1].bias is None


def test_weights_of_no_head_are_refused() -> None:
    with pytest.raises(ValueError, match="no linear layer"):
        projector_from_weights({"layers.0.running_mean": torch.zeros(3)})


def test_knn_in_projector_space_reads_the_projector_output(tiny_checkpoint: Path, tmp_path) -> None:
    cache = tmp_path / "cache"
    for space in ("backbone", "projector"):
        assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                     "--k", "1", "--space", space, "--cache-dir", str(cache), "--quiet",
                     "--output", str(tmp_path / space)]) == 0
    record = json.loads((tmp_path / "projector" / "results.json").read_text())["checkpoint"]
    assert record["space"] == "projector"
    assert record["projector"] == {"hidden_dim": 12, "out_dim": 8, "num_layers": 2,
                                   "batch_norm": "all", "last_bias": False}
    backbone_record = json.loads((tmp_path / "backbone" / "results.json").read_text())
    assert backbone_record["checkpoint"]["space"] == "backbone"
    assert "| space " in (tmp_path / "projector" / "results.md").read_text()
    assert "| space " not in (tmp_path / "backbone" / "results.md").read_text()
    # one cache entry per split and space: the projector's features are g(backbone features)
    entries = [load_file(str(p)) for p in sorted(cache.glob("*.safetensors"))]
    by_dim: dict[int, list[torch.Tensor]] = {}
    for entry in entries:
        by_dim.setdefault(entry["features"].shape[1], []).append(entry["features"])
    assert sorted(by_dim) == [8, 16] and len(by_dim[8]) == len(by_dim[16]) == 2
    head, _ = load_projector(tiny_checkpoint)
    with torch.no_grad():
        projected = sorted((head(f) for f in by_dim[16]), key=len)
    for got, want in zip(sorted(by_dim[8], key=len), projected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_projector_space_of_a_file_without_one_is_refused(tiny_checkpoint: Path, tmp_path,
                                                          capsys) -> None:
    from contrastkit.export import export_backbone

    exported = tmp_path / "backbone.safetensors"
    export_backbone(tiny_checkpoint, exported)
    code = main(["eval", "knn", "--checkpoint", str(exported), "--data", "digits",
                 "--space", "projector", "--no-cache", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1
    assert "--space projector" in err[0] and "holds no projector" in err[0]


def test_random_init_baseline_in_projector_space_has_a_random_projector(tiny_checkpoint: Path,
                                                                        tmp_path) -> None:
    cache = tmp_path / "cache"
    assert main(["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data", "digits", "--k",
                 "1", "--space", "projector", "--baselines", "--cache-dir", str(cache), "--quiet",
                 "--output", str(tmp_path / "out")]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(results["baselines"]) >= {"random init", "raw pixels"}
    dims = sorted(load_file(str(p))["features"].shape[1] for p in cache.glob("*.safetensors"))
    # pretrained and random-init projector outputs (train, test), raw pixels (8x8x3, train, test)
    assert dims == [8, 8, 8, 8, 192, 192]


def test_analyze_in_projector_space_measures_the_projector_output(tiny_checkpoint: Path, tmp_path,
                                                                  capsys) -> None:
    metrics = {}
    for space in ("backbone", "projector"):
        out = tmp_path / space
        assert main(["analyze", "--checkpoint", str(tiny_checkpoint), "--data", "digits",
                     "--space", space, "--no-cache", "--paper-references", "--output",
                     str(out)]) == 0
        results = json.loads((out / "results.json").read_text())
        assert results["checkpoint"]["space"] == space
        metrics[space] = results["metrics"]
    stdout = capsys.readouterr().out
    # the papers' reading under each table names where its uniformity and alignment were
    # measured
    assert "(this backbone's features;" in stdout and "(the projector's output;" in stdout
    # and so does the figure beside the table's models
    for space, words in (("backbone", "this backbone's features"),
                         ("projector", "the projector's output")):
        assert f"the star, {words} (" in (tmp_path / space / "results.md").read_text()
    # the two spaces are different features: 16-d backbone output, 8-d projector output
    assert metrics["projector"]["uniformity"] != metrics["backbone"]["uniformity"]
    assert (tmp_path / "projector" / "similarity_histograms.png").is_file()


@pytest.mark.parametrize("layers,batch_norm,norm_last_layer", [(1, False, True), (3, False, True),
                                                                (2, True, False)])
def test_dinos_head_is_read_as_its_bottleneck(layers: int, batch_norm: bool,
                                              norm_last_layer: bool) -> None:
    """DINO's head (an MLP with GELU to a bottleneck, then a weight-normalised layer to K
    prototype scores) is rebuilt from its weights; g is its MLP: the embedding the prototypes
    score, as SwAV's projector output is."""
    torch.manual_seed(0)
    head = DINOHead(6, hidden_dim=10, bottleneck_dim=4, num_prototypes=9, num_layers=layers,
                    batch_norm=batch_norm, norm_last_layer=norm_last_layer)
    for module in head.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.running_mean.uniform_(-1, 1)
    head.eval()
    mlp, spec = dino_bottleneck_from_weights(head.state_dict())
    assert spec == DINOHeadSpec(hidden_dim=10 if layers > 1 else 4, bottleneck_dim=4,
                                num_prototypes=9, num_layers=layers, batch_norm=batch_norm,
                                norm_last_layer=norm_last_layer)
    x = torch.randn(5, 6)
    torch.testing.assert_close(mlp(x), head.mlp(x), rtol=0, atol=0)
    assert mlp.out_dim == 4
    with pytest.raises(ValueError, match="no DINO head"):
        dino_bottleneck_from_weights({k: v for k, v in head.state_dict().items()
                                      if not k.startswith("last_layer.")})


def test_a_dino_checkpoint_is_evaluated_and_analysed_in_projector_space(tmp_path, capsys) -> None:
    """A real DINO run (its head is not an MLP head: the study's DINO analysis failed on it):
    knn with the random-init baseline and analyze read the 8-d bottleneck; results say so."""
    from tiny_run import TINY_PRETRAIN

    from contrastkit.cli.pretrain import pretrain

    run = tmp_path / "dino"
    simclr = TINY_PRETRAIN.index("--model.method")
    pretrain([*TINY_PRETRAIN[:simclr], "--trainer.max_epochs", "1",
              "--model.method", "contrastkit.methods.DINO",
              "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
              "--model.method.projector",
              '{"hidden_dim": 12, "bottleneck_dim": 8, "num_prototypes": 32}',
              "--output", str(run)])
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    assert main(["eval", "knn", "--checkpoint", checkpoint, "--data", "digits", "--k", "1",
                 "--space", "projector", "--baselines", "--no-cache", "--quiet",
                 "--output", str(tmp_path / "knn")]) == 0
    record = json.loads((tmp_path / "knn" / "results.json").read_text())["checkpoint"]
    assert record["projector"] == {"hidden_dim": 12, "bottleneck_dim": 8, "num_prototypes": 32,
                                   "num_layers": 3, "batch_norm": False,
                                   "norm_last_layer": True}
    assert "DINO head's bottleneck (8-d, before its 32 prototypes" in (
        tmp_path / "knn" / "results.md").read_text()
    assert main(["analyze", "--checkpoint", checkpoint, "--data", "digits", "--space",
                 "projector", "--no-cache", "--output", str(tmp_path / "analyze")]) == 0
    analysed = json.loads((tmp_path / "analyze" / "results.json").read_text())
    assert analysed["checkpoint"]["projector"] == record["projector"]
    assert "uniformity" in analysed["metrics"]
