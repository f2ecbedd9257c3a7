"""Every YAML under configs/ goes through the real ``contrastkit pretrain`` parser.

Each config is parsed by :class:`contrastkit.cli.pretrain.PretrainCLI` (so an unknown key or a
wrong type fails exactly as it would for a user) and its model and data module are then
instantiated (the full networks are built; data module construction opens no file). The
trainer is not built: several configs ask for 8 GPUs. The data -> ``model.num_classes`` link
normally opens the dataset to count its classes; here it returns the dataset's known class
count instead, so configs of datasets absent from this machine still validate. The paper and
reference recipes are then checked value by value on the built objects.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

import contrastkit.cli.pretrain as cli_module
from contrastkit.checkpoints import projector_from_state
from contrastkit.gradients import GradientFreeze
from contrastkit.models.prototypes import DINOHead
from contrastkit.train.datamodule import PretrainDataModule
from contrastkit.train.module import PretrainModule
from studies.repro.baselines_section import EMBEDDING_DIMS

REPO = Path(__file__).resolve().parents[2]
#: configs/text/ (sentence encoders) builds other classes: tests/train/test_text_configs.py;
#: configs/vit/ (timm backbones) needs timm: tests/timm_lane/test_timm_configs.py.
CONFIGS = sorted(p for p in (REPO / "configs").rglob("*.yaml")
                 if p.relative_to(REPO / "configs").parts[0] not in ("text", "vit"))
CLASSES = {"digits": 10, "cifar10": 10, "cifar100": 100, "stl10": 10, "svhn": 10,
           "tinyimagenet": 200, "imagenet100": 100, "folder": 1000, "image_archive": 10,
           "ucf101": 101, "hmdb51": 51, "kinetics": 400, "video_folder": 4}



class _ParseOnly(cli_module.PretrainCLI):
    """The real parser and defaults, without instantiation (done by the test).

    The parser is built once and reused (a third of a parse's time is building it; every
    ``_cli`` call builds it with the same arguments, the class-count stub below included).
    """

    _shared_parser = None

    def setup_parser(self, add_subcommands, main_kwargs, subparser_kwargs) -> None:
        if _ParseOnly._shared_parser is None:
            super().setup_parser(add_subcommands, main_kwargs, subparser_kwargs)
            _ParseOnly._shared_parser = self.parser
        self.parser = _ParseOnly._shared_parser

    def instantiate_classes(self) -> None:
        pass


def _cli(path: Path, *extra: str) -> _ParseOnly:
    return _ParseOnly(
        PretrainModule,
        PretrainDataModule,
        args=["--config", str(path), *extra],
        run=False,
        seed_everything_default=0,
        trainer_defaults=cli_module.trainer_defaults("runs/test-configs"),
        parser_kwargs={"prog": "contrastkit pretrain", "default_env": False},
    )


@pytest.fixture(autouse=True)
def _known_class_counts(monkeypatch):
    monkeypatch.setattr(cli_module, "_num_classes",
                        lambda data: CLASSES[data.dataset_name] if data.val_split else 0)


#: Building ~90 full-size networks (and 65,536-row queues) takes minutes on 2 shared cores, so
#: the per-config check shrinks what only costs time: backbone width 4 and queues of at most
#: 256 rows. Every key, type and value-level check of the constructors still runs;
#: ``test_full_size_networks_build`` builds the largest configs at full size.
SMALL = ("--model.method.init_args.backbone.width", "4")
SMALL_QUEUE = 256


def _small_args(raw: dict) -> list[str]:
    args = list(SMALL)
    init = ((raw.get("model") or {}).get("method") or {}).get("init_args") or {}
    if int(init.get("queue_size", 0) or 0) > SMALL_QUEUE:
        args += ["--model.method.init_args.queue_size", str(SMALL_QUEUE)]
    return args


def _parse_and_build(path: Path, *extra: str, small: bool = False):
    if small:
        extra = (*_small_args(yaml.safe_load(path.read_text())), *extra)
    cli = _cli(path, *extra)
    built = cli.parser.instantiate_classes(cli.config)
    return cli.config, built.model, built.data


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO / "configs")) for p in paths]


def test_configs_exist():
    groups = {p.relative_to(REPO / "configs").parts[0] for p in CONFIGS}
    assert {"sce", "dystress", "sincere", "understanding", "cpu", "demo", "baselines"} <= groups
    assert len(CONFIGS) >= 80


#: Configs whose paper recipe is SGD with weight decay on every parameter (SCE D.1, DySTreSS
#: A.1, SINCERE appendix J; Wang & Liu via the SCE D.1 recipe): ``exclude_bias_and_norm: false``.
#: Every other config keeps the default exclusion of biases and norms (the LARS recipes: SCE
#: D.2/D.3, DySTreSS ImageNet; the CPU, demo and Part A configs keep the engine default).
#: The SCE D.1 recipe (Table 6 baseline comparison) and its Part B copies.
SCE_D1 = [f"sce/{d}_{m}.yaml" for d in ("cifar10", "cifar100", "stl10", "tinyimagenet",
                                         "imagenet100", "imagenet")
          for m in ("sce", "moco", "ressl")] + [f"repro/gpu/table6_{m}.yaml"
                                                 for m in ("sce", "moco", "ressl")]
#: The baselines whose sources decay every parameter (configs/README.md, "Weight decay"):
#: lightly's CIFAR-10 benchmark (one parameter group), W-MSE's codes (Adam over every
#: parameter) and the official SwAV code (LARC over SGD on every parameter).
BASELINES_DECAY_ALL = [
    *(f"baselines/cifar10_{m}_lightly.yaml"
      for m in ("byol", "dclw", "swav", "dino", "nnclr", "barlow_twins")),
    "baselines/cifar10_wmse_sololearn.yaml", "baselines/cifar100_wmse_sololearn.yaml",
    "baselines/imagenet100_wmse.yaml", "baselines/imagenet100_swav.yaml",
]
DECAY_EVERY_PARAMETER = SCE_D1 + BASELINES_DECAY_ALL + [
    name for name in _ids(CONFIGS)
    if name.startswith(("dystress/cifar", "sincere/", "understanding/", "repro/gpu/table3_"))
]
#: Shuffled key batch norm over 8 groups (MoCo v2's shuffling BN; configs/README.md): the SCE
#: D.1 configs and the Part A momentum configs. Not the D.2/D.3 LARS recipes (synchronised BN,
#: MoCo v3-style), nor the CPU and demo configs.
SHUFFLE_BN_8 = SCE_D1 + [f"repro/cpu/{m}.yaml" for m in ("sce", "moco", "ressl")]
MOMENTUM_METHODS = {f"contrastkit.methods.{m}" for m in ("SCE", "MoCo", "ReSSL")}


def _is_cifar_momentum_config(raw: dict) -> bool:
    """SCE, MoCo or ReSSL on CIFAR-10/100 (the dataset by name or the CIFAR-10 JPEG archive)."""
    method = ((raw.get("model") or {}).get("method") or {}).get("class_path")
    data = raw.get("data") or {}
    cifar = data.get("dataset") in ("cifar10", "cifar100") or "cifar10" in str(data.get("root"))
    return method in MOMENTUM_METHODS and cifar


CIFAR_MOMENTUM = [p for p in CONFIGS if _is_cifar_momentum_config(yaml.safe_load(p.read_text()))]


@pytest.mark.parametrize("path", CONFIGS, ids=_ids(CONFIGS))
def test_config_parses_and_builds(path):
    header = path.read_text().splitlines()[0]
    assert header.startswith("#"), f"{path}: first line must be a comment citing the source"
    config, model, data = _parse_and_build(path, small=True)
    assert isinstance(model, PretrainModule)
    assert isinstance(data, PretrainDataModule)
    assert config.trainer.max_epochs >= 1
    name = _ids([path])[0]
    decay_all = name in DECAY_EVERY_PARAMETER
    assert model.optimizer_spec.exclude_bias_and_norm is not decay_all, (
        f"{path}: optimizer.exclude_bias_and_norm must be {not decay_all} (configs/README.md)")
    if path in CIFAR_MOMENTUM:  # SCE supplement E: 0.99 for small datasets (configs/README.md)
        assert model.method.base_momentum == pytest.approx(0.99), path
    _projector_space_reads_it(model.method, path)
    shuffle = 8 if name in SHUFFLE_BN_8 else None
    assert getattr(model.method, "shuffle_bn", None) == shuffle, path
    if shuffle is not None:
        devices = config.trainer.devices if isinstance(config.trainer.devices, int) else 1
        assert (data.batch_size * devices) % shuffle == 0, path


def _projector_space_reads_it(method: nn.Module, path: Path) -> None:
    """``eval --space projector`` rebuilds the method's projector from its weights alone and
    gets its output (DINO's: its bottleneck); the study's DINO checkpoint was refused so."""
    projector = method.projector.eval()
    head, _ = projector_from_state(projector.state_dict())
    x = torch.randn(3, method.backbone.out_dim)
    with torch.no_grad():
        want = projector.mlp(x) if isinstance(projector, DINOHead) else projector(x)
        torch.testing.assert_close(head(x), want, rtol=0, atol=0, msg=str(path))


def test_expectation_lists_name_existing_configs():
    """The lists above are not vacuous: they name real files, all the CIFAR momentum ones."""
    names = set(_ids(CONFIGS))
    assert set(DECAY_EVERY_PARAMETER) <= names and len(DECAY_EVERY_PARAMETER) == 93
    assert set(SHUFFLE_BN_8) <= names and len(SHUFFLE_BN_8) == 24
    cifar = set(_ids(CIFAR_MOMENTUM))
    assert {f"sce/cifar{n}_{m}.yaml" for n in ("10", "100") for m in ("sce", "moco", "ressl")} \
        | {f"repro/gpu/table6_{m}.yaml" for m in ("sce", "moco", "ressl")} <= cifar
    assert "repro/cpu/moco.yaml" in cifar and "cpu/cifar10jpg_sce.yaml" in cifar


#: SCE Table 21 rows (and D.1: 200 epochs), checked on the built objects so that a change of an
#: engine default cannot silently change what a paper config trains. CIFAR ema: 0.99 from the
#: conference supplement (appendix E), not Table 21's 0.900 (configs/README.md).
#: (file, hidden, out, layers, queue, momentum, base_lr, weight decay, global batch, size)
TABLE_21 = [
    ("sce/cifar10_sce.yaml", 512, 128, 2, 4096, 0.99, 0.06, 5e-4, 256, 32),
    ("sce/cifar100_sce.yaml", 512, 128, 2, 4096, 0.99, 0.06, 5e-4, 256, 32),
    ("sce/stl10_sce.yaml", 512, 128, 2, 16384, 0.996, 0.06, 5e-4, 256, 96),
    ("sce/tinyimagenet_sce.yaml", 512, 128, 2, 16384, 0.996, 0.06, 5e-4, 256, 64),
    ("sce/imagenet100_sce.yaml", 4096, 256, 2, 65536, 0.996, 0.3, 1e-4, 512, 224),
    ("sce/imagenet_sce.yaml", 2048, 256, 3, 65536, 0.996, 0.5, 1e-4, 512, 224),
]


@pytest.mark.parametrize("row", TABLE_21, ids=[r[0] for r in TABLE_21])
def test_sce_configs_match_table_21(row):
    name, hidden, out, layers, queue, momentum, lr, wd, batch, size = row
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method = model.method
    linears = [m for m in method.projector.layers if m.__class__.__name__ == "Linear"]
    assert len(linears) == layers
    assert linears[0].out_features == hidden and linears[-1].out_features == out
    assert method.queue is not None and method.queue.size == queue
    assert method.base_momentum == pytest.approx(momentum)
    assert model.optimizer_spec.name == "sgd" and model.optimizer_spec.momentum == 0.9
    assert model.optimizer_spec.base_lr == pytest.approx(lr)
    assert model.optimizer_spec.weight_decay == pytest.approx(wd)
    assert model.optimizer_spec.warmup_epochs == 5 and model.optimizer_spec.scale_lr
    devices = config.trainer.devices if isinstance(config.trainer.devices, int) else 1
    assert data.batch_size * devices * (config.trainer.num_nodes or 1) == batch
    assert model.views_spec.size == size
    assert config.trainer.max_epochs == 200
    assert not method.symmetric and method.predictor is None


#: The baselines of issue 53 (configs/README.md, "Baselines"): each source's key values, checked
#: on the built objects. (file, method, optimiser, base_lr, scale_lr, weight decay, global batch,
#: epochs, the method's own values)
BYOL_MOCOV3_WMSE_DCLW = [
    ("baselines/cifar10_byol_sololearn.yaml", "BYOL", "lars", 1.0, True, 1e-5, 256, 1000,
     {"base_momentum": 0.99, "momentum_schedule": "cosine"}),
    ("baselines/cifar100_byol_sololearn.yaml", "BYOL", "lars", 1.0, True, 1e-5, 256, 1000,
     {"base_momentum": 0.99, "momentum_schedule": "cosine"}),
    ("baselines/cifar10_mocov3_sololearn.yaml", "MoCoV3", "lars", 0.3, True, 1e-6, 256, 1000,
     {"base_momentum": 0.99, "temperature": 0.2}),
    ("baselines/cifar100_mocov3_sololearn.yaml", "MoCoV3", "lars", 0.3, True, 1e-6, 256, 1000,
     {"base_momentum": 0.99, "temperature": 0.2}),
    ("baselines/cifar10_wmse_sololearn.yaml", "WMSE", "adam", 2e-3, True, 1e-6, 256, 1000,
     {"w_size": 128, "w_iter": 1, "eps": 0.0, "detach_second": True}),
    ("baselines/cifar100_wmse_sololearn.yaml", "WMSE", "adam", 2e-3, True, 1e-6, 256, 1000,
     {"w_size": 128, "w_iter": 1, "eps": 0.0, "detach_second": True}),
    # lightly's lr 0.06 * batch / 128 and weight decay 5e-4 for a loss 4x smaller (the header)
    ("baselines/cifar10_byol_lightly.yaml", "BYOL", "sgd", 0.12 / 4, True, 4 * 5e-4, 128, 200,
     {"base_momentum": 0.99, "momentum_schedule": "constant"}),
    ("baselines/cifar10_dclw_lightly.yaml", "SimCLR", "sgd", 0.12, True, 5e-4, 128, 200,
     {"loss_name": "dclw", "temperature": 0.1, "sigma": 0.5}),
    ("dystress/cifar10_dclw.yaml", "SimCLR", "sgd", 0.06, False, 5e-4, 128, 200,
     {"loss_name": "dclw", "temperature": 0.1, "sigma": 0.5}),
    ("dystress/cifar100_dclw.yaml", "SimCLR", "sgd", 0.06, False, 5e-4, 128, 200,
     {"loss_name": "dclw", "temperature": 0.1, "sigma": 0.5}),
    ("dystress/cifar10_wmse.yaml", "WMSE", "sgd", 0.06, False, 5e-4, 256, 200,
     {"w_size": 128, "detach_second": False}),
    ("dystress/cifar100_wmse.yaml", "WMSE", "sgd", 0.06, False, 5e-4, 256, 200,
     {"w_size": 128, "detach_second": False}),
    ("baselines/imagenet100_byol.yaml", "BYOL", "lars", 0.3, True, 1e-6, 512, 400,
     {"base_momentum": 0.99, "momentum_schedule": "cosine"}),
    ("baselines/imagenet100_mocov3.yaml", "MoCoV3", "lars", 0.3, True, 1e-6, 512, 400,
     {"base_momentum": 0.99, "temperature": 1.0}),
    ("baselines/imagenet100_wmse.yaml", "WMSE", "adam", 2e-3, False, 1e-6, 512, 240,
     {"w_size": 256, "detach_second": False}),
]
#: Projector (and predictor) layers (hidden, out) of each baseline's heads.
BASELINE_HEADS = {"BYOL": {"cifar": (4096, 256), "lightly": (1024, 256), "imagenet": (4096, 256)},
                  "MoCoV3": {"cifar": (4096, 256), "imagenet": (4096, 256)},
                  "WMSE": {"cifar": (1024, 64), "imagenet": (1024, 128)},
                  "SimCLR": {"cifar": (512, 128)}}


@pytest.mark.parametrize("row", BYOL_MOCOV3_WMSE_DCLW, ids=[r[0] for r in BYOL_MOCOV3_WMSE_DCLW])
def test_baseline_configs_keep_their_sources_recipes(row):
    name, method_name, optimizer, lr, scale, wd, batch, epochs, own = row
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method, spec = model.method, model.optimizer_spec
    assert type(method).__name__ == method_name
    assert (spec.name, spec.scale_lr) == (optimizer, scale)
    assert spec.base_lr == pytest.approx(lr) and spec.weight_decay == pytest.approx(wd)
    devices = config.trainer.devices if isinstance(config.trainer.devices, int) else 1
    assert data.batch_size * devices * (config.trainer.num_nodes or 1) == batch
    assert config.trainer.max_epochs == epochs
    for attribute, value in own.items():
        assert getattr(method, attribute) == pytest.approx(value), attribute
    kind = "lightly" if "byol_lightly" in name else "imagenet" if "imagenet" in name else "cifar"
    hidden, out = BASELINE_HEADS[method_name][kind]
    heads = [method.projector] + ([method.predictor] if method.predictor is not None else [])
    for head in heads:
        linears = [m for m in head.layers if m.__class__.__name__ == "Linear"]
        assert [m.out_features for m in linears] == [hidden, out]
    assert (method.predictor is not None) == (method_name in ("BYOL", "MoCoV3"))
    if method_name == "MoCoV3":  # MoCo_ResNet: a final BN without affine parameters
        assert method.projector.layers[-1].__class__.__name__ == "BatchNorm1d"
        assert not method.projector.layers[-1].affine
    if "_sololearn" in name and method_name != "WMSE":  # asymmetric.yaml
        assert (model.views_spec.online, model.views_spec.target) == ("strong_alpha_cifar",
                                                                     "strong_beta_cifar")


MOCOV3_CONFIGS = [p for p in CONFIGS if "contrastkit.methods.MoCoV3" in p.read_text()]


@pytest.mark.parametrize("path", MOCOV3_CONFIGS, ids=_ids(MOCOV3_CONFIGS))
def test_mocov3_configs_build_moco_resnet_heads(path):
    """moco-v3's ``_build_mlp`` (``moco/builder.py``): no linear layer has a bias; the projector
    ends in a BN without affine parameters, the predictor in its linear layer."""
    _, model, _ = _parse_and_build(path, *SMALL)
    method = model.method
    for head in (method.projector, method.predictor):
        assert all(m.bias is None for m in head.layers if isinstance(m, nn.Linear)), path
    last = method.projector.layers[-1]
    assert isinstance(last, nn.BatchNorm1d) and not last.affine
    assert isinstance(method.predictor.layers[-1], nn.Linear)


def test_every_mocov3_config_is_checked():
    assert {p.stem for p in MOCOV3_CONFIGS} == {
        "digits_mocov3", "cifar10_mocov3_sololearn", "cifar100_mocov3_sololearn",
        "imagenet100_mocov3", "mocov3"}


#: SCE Table 24 rows and appendix D.3 (LARS, wd 1e-6, peak lr 2.4 at batch 512, 200 epochs,
#: momentum 0.99 -> 1, symmetric, 8 frames of 2.56 s, RGB difference 0.2, colour strength 1.0).
#: (file, backbone, projector/predictor hidden, buffer)
TABLE_24 = [
    ("video/k200_r3d18_sce.yaml", "resnet3d_18", 1024, 32768),
    ("video/k400_r3d18_sce.yaml", "resnet3d_18", 1024, 65536),
    ("video/k400_r3d50_sce.yaml", "resnet3d_50", 4096, 65536),
]


@pytest.mark.parametrize("row", TABLE_24, ids=[r[0] for r in TABLE_24])
def test_sce_video_configs_match_table_24(row):
    name, backbone, hidden, queue = row
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method = model.method
    assert method.backbone_spec.name == backbone
    proj = [m for m in method.projector.layers if m.__class__.__name__ == "Linear"]
    pred = [m for m in method.predictor.layers if m.__class__.__name__ == "Linear"]
    assert [m.out_features for m in proj] == [hidden, hidden, 256]
    assert [m.out_features for m in pred] == [hidden, 256]
    assert method.queue.size == queue and method.symmetric
    assert method.base_momentum == pytest.approx(0.99)
    assert (method.coeff, method.temperature, method.target_temperature) == (0.5, 0.1, 0.05)
    opt = model.optimizer_spec
    assert opt.name == "lars" and opt.weight_decay == pytest.approx(1e-6) and opt.scale_lr
    devices = config.trainer.devices
    global_batch = data.batch_size * devices
    assert global_batch == 512
    assert opt.base_lr * global_batch / 256 == pytest.approx(2.4)
    assert config.trainer.max_epochs == 200
    views = model.views_spec
    assert (views.online, views.target, views.jitter_strength) == ("strong_alpha", "strong_beta",
                                                                  1.0)
    assert views.video.rgb_difference_p == 0.2 and views.size == 224
    assert data.video.frames == 8 and data.video.duration_s == pytest.approx(2.56)
    assert data.video.num_clips == 2


def _linears(head) -> list[int]:
    return [m.out_features for m in head.modules() if m.__class__.__name__ == "Linear"]


def _optimizer(model) -> tuple:
    spec = model.optimizer_spec
    return (spec.name, spec.base_lr, spec.weight_decay, spec.warmup_epochs, spec.scale_lr,
            spec.exclude_bias_and_norm, spec.clip_grad_per_parameter)


def _batch(config, data) -> int:
    devices = config.trainer.devices if isinstance(config.trainer.devices, int) else 1
    return data.batch_size * devices * (config.trainer.num_nodes or 1)


#: The SwAV recipes (config headers): file -> (K, projector widths, queue rows per global crop,
#: queue start epoch, prototypes' freeze, optimizer (name, lr, wd, warm-up epochs, lr scaled,
#: biases and norms excluded, per-parameter clip), global batch, epochs, local crops)
SWAV = {
    "baselines/cifar10_swav_sololearn.yaml":
        (3000, [2048, 128], 3840, 50, (2, "epoch"),
         ("lars", 0.6, 1e-6, 10, True, True, None), 256, 1000, 0),
    "baselines/cifar10_swav_lightly.yaml":
        (512, [512, 128], None, 15, (0, "step"),
         ("adam", 1e-3, 1e-6, 0, False, False, None), 128, 200, 0),
    "baselines/imagenet100_swav.yaml":
        (3000, [2048, 128], 3840, 15, (1, "epoch"),
         ("lars", 0.6, 1e-6, 0, False, False, None), 256, 200, 6),
}


@pytest.mark.parametrize("name", sorted(SWAV))
def test_swav_configs_keep_their_recipe(name):
    k, widths, queue, start, freeze, optimizer, batch, epochs, local = SWAV[name]
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method = model.method
    assert method.prototypes.weight.shape == (k, 128) and method.prototypes.bias is None
    assert _linears(method.projector) == widths
    assert (method.temperature, method.sinkhorn_epsilon, method.sinkhorn_iterations) == (
        0.1, 0.05, 3)
    assert (method.queues[0].size if method.queues else None) == queue
    assert method.queue_start_epoch == start
    freeze_ = method.gradient_freezes["prototypes"]
    assert (freeze_.until, freeze_.unit) == freeze
    assert _optimizer(model) == pytest.approx(optimizer)
    assert _batch(config, data) == batch and config.trainer.max_epochs == epochs
    multicrop = model.views_spec.multicrop
    assert (len(multicrop.local_sizes) if multicrop else 0) == local
    assert model.views_spec.online == model.views_spec.target
    assert model.views_spec.online.startswith("simclr")


#: file -> (K, MLP widths, teacher temperature(s), EMA momentum, its schedule, last layer's
#: freeze, optimizer, global batch, epochs, local crops)
DINO_RECIPES = {
    "baselines/cifar10_dino_sololearn.yaml":
        (4096, [2048, 2048, 256], 0.07, 0.9995, "cosine", (1, "epoch"),
         ("lars", 0.3, 1e-6, 10, True, True, None), 256, 1000, 0),
    "baselines/cifar10_dino_lightly.yaml":
        (2048, [2048, 256], 0.04, 0.99, "constant", (0, "epoch"),
         ("sgd", 0.06, 5e-4, 0, False, False, None), 128, 200, 0),
    "dystress/cifar10_dino.yaml":
        (2048, [2048, 256], 0.04, 0.99, "constant", (0, "epoch"),
         ("sgd", 0.06, 5e-4, 0, False, False, None), 256, 200, 0),
    "dystress/cifar100_dino.yaml":
        (2048, [2048, 256], 0.04, 0.99, "constant", (0, "epoch"),
         ("sgd", 0.06, 5e-4, 0, False, False, None), 256, 200, 0),
    "baselines/imagenet100_dino.yaml":
        (65536, [2048, 2048, 256], 0.04, 0.996, "cosine", (1, "epoch"),
         ("sgd", 0.03, 1e-4, 10, True, True, 3.0), 512, 100, 8),
}


@pytest.mark.parametrize("name", sorted(DINO_RECIPES))
def test_dino_configs_keep_their_recipe(name):
    k, widths, teacher, ema, schedule, freeze, optimizer, batch, epochs, local = \
        DINO_RECIPES[name]
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method = model.method
    head = method.projector
    assert head.out_dim == k and head.last_layer.gain is None  # norm_last_layer
    assert _linears(head.mlp) == widths
    assert (method.temperature, method.teacher_temperature, method.center_momentum) == (
        0.1, teacher, 0.9)
    assert (method.base_momentum, method.momentum_schedule) == (ema, schedule)
    freeze_ = method.gradient_freezes["projector.last_layer"]
    assert (freeze_.until, freeze_.unit) == freeze
    assert _optimizer(model) == pytest.approx(optimizer)
    assert _batch(config, data) == batch and config.trainer.max_epochs == epochs
    multicrop = model.views_spec.multicrop
    assert (len(multicrop.local_sizes) if multicrop else 0) == local
    assert (model.views_spec.online, model.views_spec.target) in (
        ("strong_alpha", "strong_beta"), ("strong_alpha_cifar", "strong_beta_cifar"))


#: file -> (projector widths, predictor widths, support set rows, tau, form, optimizer, global
#: batch, epochs)
NNCLR_RECIPES = {
    "baselines/cifar10_nnclr_sololearn.yaml":
        ([2048, 2048, 256], [4096, 256], 65536, 0.2, "info_nce",
         ("lars", 0.4, 1e-5, 10, True, True, None), 256, 1000),
    "baselines/cifar10_nnclr_lightly.yaml":
        ([2048, 256], [4096, 256], 4096, 0.5, "nt_xent",
         ("sgd", 0.06, 5e-4, 0, False, False, None), 128, 200),
    "baselines/imagenet100_nnclr.yaml":
        ([2048, 2048, 256], [4096, 256], 65536, 0.2, "info_nce",
         ("lars", 0.4, 1e-5, 10, True, True, None), 256, 400),
}


@pytest.mark.parametrize("name", sorted(NNCLR_RECIPES))
def test_nnclr_configs_keep_their_recipe(name):
    proj, pred, rows, tau, form, optimizer, batch, epochs = NNCLR_RECIPES[name]
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    method = model.method
    assert _linears(method.projector) == proj and _linears(method.predictor) == pred
    norms = [m for m in method.projector.layers if "BatchNorm" in type(m).__name__]
    assert len(norms) == len(proj)  # the projector ends in BN
    assert method.queue.size == rows and method.queue.num_valid == rows  # random at the start
    assert (method.temperature, method.form) == (tau, form)
    assert _optimizer(model) == pytest.approx(optimizer)
    assert _batch(config, data) == batch and config.trainer.max_epochs == epochs


def test_every_swav_dino_nnclr_config_is_checked():
    """The recipe tables above name every baselines/ and dystress/ config of the three."""
    names = {n for n in _ids(CONFIGS) if n.startswith(("baselines/", "dystress/"))
             and any(m in n for m in ("swav", "dino", "nnclr"))}
    assert names == set(SWAV) | set(DINO_RECIPES) | set(NNCLR_RECIPES) | {
        f"baselines/cifar100_{m}_sololearn.yaml" for m in ("swav", "dino", "nnclr")}


#: LARS as each source computes it (the headers; docs/configs.md, "LARS"): (eta, clip_lr, trust
#: ratio, biases and norms excluded, their learning rate's ratio). solo-learn (solo/utils/lars.py,
#: each yaml's kwargs): eta 0.02, clip_lr, ||g|| + wd ||w||, 1-D tensors excluded; deepmind BYOL
#: (byol/utils/optimizers.py), moco-v3 (moco/optimizer.py), Barlow Twins and VICReg (main*.py):
#: eta 0.001, ||g + wd w||, 1-D tensors excluded; SwAV (apex LARC, clip=False, over SGD on every
#: parameter): eta 0.001 unclipped, ||g|| + wd ||w||.
SOLO_LEARN_LARS = (0.02, True, "paper", True, 1.0)
UPDATE_NORM_LARS = (0.001, False, "update", True, 1.0)
LARS_RECIPES = {
    **{f"baselines/{d}_{m}_sololearn.yaml": SOLO_LEARN_LARS for d in ("cifar10", "cifar100")
       for m in ("byol", "mocov3", "swav", "dino", "nnclr", "barlow_twins", "vicreg")},
    "baselines/imagenet100_nnclr.yaml": SOLO_LEARN_LARS,
    "baselines/imagenet100_byol.yaml": UPDATE_NORM_LARS,
    "baselines/imagenet100_mocov3.yaml": UPDATE_NORM_LARS,
    "baselines/imagenet100_vicreg.yaml": UPDATE_NORM_LARS,
    "baselines/imagenet100_barlow_twins.yaml": (0.001, False, "update", True, 0.024),
    "baselines/imagenet100_swav.yaml": (0.001, False, "paper", False, 1.0),
}


@pytest.mark.parametrize("name", sorted(LARS_RECIPES))
def test_baseline_lars_configs_keep_their_sources_lars(name):
    _, model, _ = _parse_and_build(REPO / "configs" / name, *SMALL)
    spec = model.optimizer_spec
    assert spec.name == "lars" and spec.momentum == 0.9
    assert (spec.eta, spec.clip_lr, spec.trust_ratio, spec.exclude_bias_and_norm,
            spec.excluded_lr_ratio) == pytest.approx(LARS_RECIPES[name])


def test_every_lars_baseline_is_in_the_lars_table():
    lars = {n for n, p in zip(_ids(CONFIGS), CONFIGS, strict=True) if n.startswith("baselines/")
            and ((yaml.safe_load(p.read_text())["model"].get("optimizer") or {}).get("name")
                 == "lars")}
    assert lars == set(LARS_RECIPES)


#: The baselines' recipes (configs/baselines/, their headers), checked on the built objects:
#: (file, projector (hidden, out, layers, last bias), loss settings, optimiser settings,
#: (global batch, epochs), (online view, target view, crop scale)).
SOLO_LARS = {"name": "lars", "base_lr": 0.3, "weight_decay": 1e-4, "eta": 0.02, "clip_lr": True,
             "trust_ratio": "paper", "excluded_lr_ratio": 1.0, "warmup_epochs": 10,
             "warmup_start_ratio": 1e-4, "final_lr_ratio": 0.0, "scale_lr": True}
OFFICIAL_LARS = {"name": "lars", "base_lr": 0.2, "weight_decay": 1e-6, "eta": 0.001,
                 "clip_lr": False, "trust_ratio": "update", "warmup_epochs": 10,
                 "warmup_start_ratio": 0.0, "final_lr_ratio": 0.001, "scale_lr": True}
BYOL_CIFAR_VIEWS = ("strong_alpha_cifar", "strong_beta_cifar", (0.08, 1.0))
BARLOW_VICREG = [
    *[(f"baselines/{d}_barlow_twins_sololearn.yaml", (2048, 2048, 3, True),
       {"lambd": 0.0051, "scale_loss": 0.1}, SOLO_LARS, (256, 1000), BYOL_CIFAR_VIEWS)
      for d in ("cifar10", "cifar100")],
    *[(f"baselines/{d}_vicreg_sololearn.yaml", (2048, 2048, 3, True),
       {"coeffs": {"invariance": 25.0, "variance": 25.0, "covariance": 1.0},
        "halve_variance": False}, SOLO_LARS, (256, 1000), ("vicreg_cifar", "vicreg_cifar", None))
      for d in ("cifar10", "cifar100")],
    ("baselines/cifar10_barlow_twins_lightly.yaml", (2048, 2048, 2, True),
     {"lambd": 0.005, "scale_loss": 1.0},
     {"name": "sgd", "base_lr": 0.06, "scale_lr": False, "weight_decay": 5e-4,
      "warmup_epochs": 0, "final_lr_ratio": 0.0, "exclude_bias_and_norm": False},
     (128, 200), BYOL_CIFAR_VIEWS),
    ("baselines/imagenet100_barlow_twins.yaml", (8192, 8192, 3, False),
     {"lambd": 0.0051, "scale_loss": 1.0}, {**OFFICIAL_LARS, "excluded_lr_ratio": 0.024},
     (2048, 400), ("strong_alpha", "strong_beta", (0.08, 1.0))),
    ("baselines/imagenet100_vicreg.yaml", (8192, 8192, 3, False),
     {"coeffs": {"invariance": 25.0, "variance": 25.0, "covariance": 1.0},
      "halve_variance": True}, {**OFFICIAL_LARS, "excluded_lr_ratio": 1.0},
     (2048, 400), ("strong_alpha", "strong_beta", (0.08, 1.0))),
]


@pytest.mark.parametrize("row", BARLOW_VICREG, ids=[r[0] for r in BARLOW_VICREG])
def test_baseline_configs_match_their_recipes(row):
    name, head, loss, optimizer, (batch, epochs), (online, target, crop) = row
    config, model, data = _parse_and_build(REPO / "configs" / name, *SMALL)
    linears = [m for m in model.method.projector.layers if m.__class__.__name__ == "Linear"]
    assert (linears[0].out_features, linears[-1].out_features, len(linears),
            linears[-1].bias is not None) == head
    for key, value in loss.items():
        assert getattr(model.method, key) == value, key
    for key, value in optimizer.items():
        assert getattr(model.optimizer_spec, key) == pytest.approx(value), key
    assert model.optimizer_spec.momentum == 0.9
    devices = config.trainer.devices if isinstance(config.trainer.devices, int) else 1
    assert data.batch_size * devices * (config.trainer.num_nodes or 1) == batch
    assert config.trainer.max_epochs == epochs
    views = model.views_spec
    assert (views.online, views.target) == (online, target)
    assert (tuple(views.crop_scale) if views.crop_scale else None) == crop
    assert model.method.backbone_spec.cifar_stem is ("cifar" in name)


#: Study 6's configs (configs/repro/cpu, issue 53; their headers): the SimCLR rows' data,
#: backbone, batch, 30 epochs and SGD (configs/repro/cpu/simclr_t0.2.yaml), each reference's
#: heads at half their hidden widths (outputs kept), loss settings and views. stem -> (head
#: widths by module, method settings, optimiser (name, lr, wd, warm-up epochs, lr scaled,
#: biases and norms excluded, per-parameter clip), (online view, target view, crop scale), d
#: of the online embedding)
STUDY_SGD = ("sgd", 0.06, 5e-4, 0, False, True, None)
BYOL_VIEWS = ("strong_alpha_cifar", "strong_beta_cifar", None)
REPRO_BASELINES = {
    "byol": ({"projector": [512, 256], "predictor": [512, 256]},
             {"base_momentum": 0.99, "momentum_schedule": "constant"},
             ("sgd", 0.015, 2e-3, 0, False, True, None), BYOL_VIEWS, 256),
    "mocov3": ({"projector": [2048, 256], "predictor": [2048, 256]},
               {"temperature": 0.2, "base_momentum": 0.99, "momentum_schedule": "cosine"},
               STUDY_SGD, BYOL_VIEWS, 256),
    "wmse": ({"projector": [512, 64]},
             {"w_size": 128, "w_iter": 1, "eps": 0.0, "detach_second": False},
             STUDY_SGD, ("simclr_cifar", "simclr_cifar", (0.2, 1.0)), 64),
    "swav": ({"projector": [256, 128]},
             {"prototypes.out_features": 512, "temperature": 0.1, "sinkhorn_epsilon": 0.05,
              "sinkhorn_iterations": 3, "queues": None,
              "gradient_freezes": {"prototypes": GradientFreeze(0, "step")}},
             ("adam", 1e-3, 1e-6, 0, False, True, None),
             ("simclr_cifar", "simclr_cifar", (0.14, 1.0)), 128),
    "dino": ({"projector.mlp": [1024, 256]},
             {"projector.out_dim": 2048, "temperature": 0.1, "teacher_temperature": 0.04,
              "center_momentum": 0.9, "base_momentum": 0.99, "momentum_schedule": "constant",
              "gradient_freezes": {"projector.last_layer": GradientFreeze(0, "epoch")}},
             STUDY_SGD, ("strong_alpha_cifar", "strong_beta_cifar", (0.4, 1.0)), 2048),
    "nnclr": ({"projector": [1024, 256], "predictor": [2048, 256]},
              {"queue.size": 4096, "temperature": 0.5, "form": "nt_xent"},
              STUDY_SGD, ("simclr_cifar", "simclr_cifar", None), 256),
    "barlow_twins": ({"projector": [1024, 2048]}, {"lambd": 0.005, "scale_loss": 1.0},
                     STUDY_SGD, ("strong_alpha_cifar", "strong_beta_cifar", (0.08, 1.0)), 2048),
    "vicreg": ({"projector": [1024, 1024, 2048]},
               {"coeffs": {"invariance": 25.0, "variance": 25.0, "covariance": 1.0},
                "halve_variance": True},  # a quarter of the rate: NaN at 0.06 (its header)
               ("sgd", 0.015, 5e-4, 0, False, True, None), ("vicreg_cifar", "vicreg_cifar", None),
               2048),
    "dclw": ({"projector": [256, 128]}, {"loss_name": "dclw", "temperature": 0.1, "sigma": 0.5},
             STUDY_SGD, ("simclr_cifar", "simclr_cifar", None), 128),
}


@pytest.mark.parametrize("stem", sorted(REPRO_BASELINES))
def test_study_6_configs_are_the_simclr_rows_setting_with_each_methods_recipe(stem):
    heads, settings, optimizer, (online, target, crop), dim = REPRO_BASELINES[stem]
    path = REPO / "configs" / "repro" / "cpu" / f"{stem}.yaml"
    raw, simclr = (yaml.safe_load(p.read_text()) for p in (
        path, REPO / "configs" / "repro" / "cpu" / "simclr_t0.2.yaml"))
    for section in ("data", "trainer"):  # the same images, batch, epochs and monitor
        assert raw[section] == simclr[section], section
    assert raw["model"]["online_eval"] == simclr["model"]["online_eval"]
    config, model, data = _parse_and_build(path)  # width 16: no shrinking needed
    method = model.method
    spec = method.backbone_spec
    assert (spec.name, spec.cifar_stem, spec.width) == ("resnet18", True, 16)
    for module, widths in heads.items():
        assert _linears(functools.reduce(getattr, module.split("."), method)) == widths, module
    for key, value in settings.items():
        assert functools.reduce(getattr, key.split("."), method) == value, key
    assert _optimizer(model) == pytest.approx(optimizer)
    assert model.optimizer_spec.momentum == 0.9 and model.optimizer_spec.final_lr_ratio == 0.0
    assert _batch(config, data) == 256 and config.trainer.max_epochs == 30
    views = model.views_spec
    assert (views.online, views.target, views.normalize) == (online, target, "cifar10")
    assert (tuple(views.crop_scale) if views.crop_scale else None) == crop
    assert method.embed_dim == dim == EMBEDDING_DIMS[stem]  # what the page scales z_std by


@pytest.mark.parametrize("name", ["sce/cifar10_sce.yaml", "sce/imagenet_sce_multicrop.yaml"])
def test_full_size_networks_build(name):
    """No shrinking: ResNet-18 (CIFAR stem) and the largest config (ResNet-50, MoCo v3 heads,
    65,536-row queue, multi-crop)."""
    _, model, _ = _parse_and_build(REPO / "configs" / name)
    assert model.method.backbone.out_dim == (512 if "cifar" in name else 2048)
    assert model.method.queue.size == (4096 if "cifar" in name else 65536)


def test_unknown_data_key_is_rejected_with_allowed_keys(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  method: {class_path: contrastkit.methods.SCE}\n"
                   "data:\n  dataset: digits\n  batchsize: 32\n")
    with pytest.raises(SystemExit):
        _cli(bad)
    err = capsys.readouterr().err
    assert "data.batchsize is not an option" in err
    assert "did you mean data.batch_size" in err  # the closest key the data group accepts
    assert len(err.strip().splitlines()) == 1  # one line, no usage


def test_unknown_method_key_is_rejected(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  method:\n    class_path: contrastkit.methods.SCE\n"
                   "    init_args: {tempreature: 0.1}\n")
    with pytest.raises(SystemExit):
        _cli(bad)
    assert "tempreature" in capsys.readouterr().err


def test_unknown_method_key_error_lists_allowed_keys(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  method:\n    class_path: contrastkit.methods.SCE\n"
                   "    init_args: {tempreature: 0.1}\n")
    with pytest.raises(SystemExit):
        _cli(bad)
    err = capsys.readouterr().err
    assert "target_temperature" in err and "queue_size" in err


def test_wrong_type_is_rejected(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  method:\n    class_path: contrastkit.methods.SCE\n"
                   "    init_args: {temperature: hot}\n"
                   "  views: {size: 32}\n")
    with pytest.raises(SystemExit):
        _cli(bad)
    err = capsys.readouterr().err
    assert "temperature" in err and "float" in err


def test_unknown_nested_spec_key_is_rejected(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  method:\n    class_path: contrastkit.methods.SCE\n"
                   "    init_args: {projector: {hiden_dim: 64}}\n")
    with pytest.raises(SystemExit):
        _cli(bad)
    assert "hiden_dim" in capsys.readouterr().err


def test_command_line_overrides_config(tmp_path):
    path = REPO / "configs" / "sce" / "cifar10_sce.yaml"
    config, model, data = _parse_and_build(
        path, "--data.batch_size", "128", "--model.method.init_args.temperature", "0.15",
        "--trainer.max_epochs", "3")
    assert data.batch_size == 128
    assert model.method.temperature == pytest.approx(0.15)
    assert config.trainer.max_epochs == 3


def test_cpu_digits_config_trains_one_epoch(tmp_path):
    """The real CPU config, 1 epoch on 256 images (a few seconds on 2 cores)."""
    import torch

    cli = cli_module.pretrain([
        "--config", str(REPO / "configs" / "cpu" / "digits_simclr.yaml"),
        "--data.subset", "256", "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false", "--output", str(tmp_path / "run"),
    ])
    assert torch.isfinite(cli.trainer.callback_metrics["train/loss"])
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()


def _method_config(tmp_path: Path, name: str, init_args: str) -> Path:
    path = tmp_path / "method.yaml"
    path.write_text(f"# test\nmodel:\n  method:\n    class_path: contrastkit.methods.{name}\n"
                    f"    init_args:\n{init_args}data:\n  dataset: digits\n")
    return path


@pytest.mark.parametrize("key", ["dynamic_temperature", "temperature_schedule"])
def test_a_removed_key_is_refused_naming_it_and_the_accepted_ones(tmp_path, capsys, key):
    path = _method_config(tmp_path, "SimCLR", f"      temperature: 0.2\n      {key}: null\n")
    with pytest.raises(SystemExit):
        _cli(path)
    err = capsys.readouterr().err
    assert f"model.method.{key} is not an option of SimCLR" in err
    accepted = err.partition("SimCLR accepts: ")[2].splitlines()[0].rstrip(")").split(", ")
    assert "temperature" in accepted and key not in accepted


@pytest.mark.parametrize("temperature", [
    "{class_path: contrastkit.losses.LinearTemperature, init_args: {t_min: 0.05, t_max: 0.3}}",
    "{class_path: contrastkit.losses.ExponentialTemperature, init_args: {rate: 2.0}}",
    "{class_path: contrastkit.losses.KuklevaCosineTemperature, init_args: {period: 10}}",
    "{class_path: contrastkit.losses.PairTemperature, init_args: {positive: 0.1, negative: "
    "{class_path: contrastkit.losses.MonotonicCosineTemperature}}}",
])
def test_a_saved_config_keeps_the_temperature_it_was_given(tmp_path, temperature):
    """The run's ``config.yaml`` (the parser's dump) names the temperature's class, so resuming
    from it rebuilds the same temperature, not the first class whose fields fit."""
    path = _method_config(tmp_path, "SimCLR", f"      temperature: {temperature}\n")
    _, model, _ = _parse_and_build(path)
    cli = _cli(path)
    saved = tmp_path / "config.yaml"
    saved.write_text(cli.parser.dump(cli.config, skip_none=False))
    _, resumed, _ = _parse_and_build(saved)
    assert resumed.method.temperature == model.method.temperature
    assert type(resumed.method.temperature) is type(model.method.temperature)


def test_per_pair_temperature_on_sce_names_the_key(tmp_path):
    path = _method_config(tmp_path, "SCE", "      temperature:\n        class_path: "
                          "contrastkit.losses.DySTreSSTemperature\n")
    with pytest.raises(ValueError, match="SCE: temperature is a per-pair temperature"):
        _parse_and_build(path)


@pytest.mark.parametrize("class_path", ["contrastkit.schedules.KuklevaCosineTemperature",
                                        "contrastkit.losses.dystress.DySTreSSTemperature"])
def test_temperature_class_paths_at_their_homes_parse(tmp_path, class_path):
    path = _method_config(tmp_path, "SimCLR", f"      temperature: {{class_path: {class_path}}}\n")
    _, model, _ = _parse_and_build(path)
    assert type(model.method.temperature).__name__ == class_path.rpartition(".")[2]


#: Configs meant for GPUs: the Part B runs and the paper recipes of SCE's D.1-D.3.
GPU_CONFIGS = [p for p in CONFIGS if _ids([p])[0].startswith(("repro/gpu/", "sce/"))]


@pytest.mark.parametrize("path", GPU_CONFIGS, ids=_ids(GPU_CONFIGS))
def test_gpu_configs_autotune_cudnn_and_load_in_workers(path):
    raw = yaml.safe_load(path.read_text())
    assert raw["trainer"].get("benchmark") is True, path
    workers = raw["data"].get("num_workers", 0)
    assert workers == "auto" or workers >= 1, path
