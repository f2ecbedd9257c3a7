"""torchvision key layout: expected key lists, export/load round trip, clear errors."""

import pytest
import torch

from contrastkit.models import (
    load_torchvision_state_dict,
    resnet18,
    resnet50,
    to_torchvision_state_dict,
)

BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def expected_keys(block_convs: int, layers: tuple[int, ...], fc: bool) -> list[str]:
    """torchvision ResNet key list from the architecture rules (written independently)."""
    keys = ["conv1.weight"] + [f"bn1.{k}" for k in BN_KEYS]
    for stage, n_blocks in enumerate(layers, start=1):
        for b in range(n_blocks):
            prefix = f"layer{stage}.{b}."
            for c in range(1, block_convs + 1):
                keys.append(f"{prefix}conv{c}.weight")
                keys += [f"{prefix}bn{c}.{k}" for k in BN_KEYS]
            # projection shortcut when the stride or the channels change: first block of
            # stages 2-4, and of stage 1 too for bottlenecks (64 -> 256 channels).
            if b == 0 and (stage > 1 or block_convs == 3):
                keys.append(f"{prefix}downsample.0.weight")
                keys += [f"{prefix}downsample.1.{k}" for k in BN_KEYS]
    if fc:
        keys += ["fc.weight", "fc.bias"]
    return keys


def test_resnet18_keys_equal_torchvision_layout() -> None:
    exported = to_torchvision_state_dict(resnet18())
    assert list(exported) == expected_keys(2, (2, 2, 2, 2), fc=False)
    assert len(exported) == 120
    assert "layer2.0.downsample.0.weight" in exported
    assert "layer1.0.downsample.0.weight" not in exported
    assert exported["layer2.0.downsample.0.weight"].shape == (128, 64, 1, 1)
    assert exported["conv1.weight"].shape == (64, 3, 7, 7)
    assert exported["layer4.1.bn2.running_var"].shape == (512,)


def test_resnet50_key_count_with_fc() -> None:
    backbone = resnet50(width=8)  # the key list does not depend on the width
    exported = to_torchvision_state_dict(backbone, fc=torch.nn.Linear(256, 1000))
    # 6 stem + 16 bottlenecks * 18 + 4 shortcuts * 6 + 2 fc = 320 (torchvision resnet50).
    assert len(exported) == 320
    assert list(exported) == expected_keys(3, (3, 4, 6, 3), fc=True)
    assert exported["layer1.0.downsample.0.weight"].shape == (32, 8, 1, 1)


def test_round_trip_reproduces_outputs() -> None:
    torch.manual_seed(0)
    src = resnet18(cifar_stem=True, width=8)
    src.train()
    src(torch.randn(4, 3, 16, 16))  # move running stats away from their init
    src.eval()
    dst = resnet18(cifar_stem=True, width=8).eval()
    x = torch.randn(3, 3, 16, 16)
    assert not torch.equal(src(x), dst(x))
    sd = to_torchvision_state_dict(src)
    load_torchvision_state_dict(dst, sd)
    assert torch.equal(src(x), dst(x))
    # the export is a copy: changing it does not touch the source
    sd["conv1.weight"].zero_()
    assert torch.count_nonzero(src.conv1.weight) > 0


def test_fc_is_ignored_by_default_and_unexpected_otherwise() -> None:
    src = resnet18(width=8)
    sd = to_torchvision_state_dict(src, fc=torch.nn.Linear(64, 10))
    assert sd["fc.weight"].shape == (10, 64) and sd["fc.bias"].shape == (10,)
    load_torchvision_state_dict(resnet18(width=8), sd)
    with pytest.raises(ValueError, match=r"unexpected keys fc\.weight, fc\.bias"):
        load_torchvision_state_dict(resnet18(width=8), sd, ignore_fc=False)


def test_fc_with_wrong_in_features_is_rejected() -> None:
    with pytest.raises(ValueError, match="in_features=64"):
        to_torchvision_state_dict(resnet18(width=8), fc=torch.nn.Linear(32, 10))


def test_mismatched_architecture_names_keys_and_loads_nothing() -> None:
    dst = resnet18(width=8)
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    sd = to_torchvision_state_dict(resnet50(width=8))
    with pytest.raises(ValueError) as info:
        load_torchvision_state_dict(dst, sd)
    msg = str(info.value)
    assert "layer1.0.conv1.weight: checkpoint (8, 8, 1, 1) vs backbone (8, 8, 3, 3)" in msg
    assert "layer1.0.conv3.weight" in msg  # unexpected
    assert "layer3.2.conv1.weight" in msg  # unexpected (resnet18 has 2 blocks per stage)
    for k, v in dst.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_shape_mismatch_raises_even_when_not_strict() -> None:
    sd = to_torchvision_state_dict(resnet18(width=8))
    with pytest.raises(ValueError, match=r"conv1\.weight: checkpoint \(8, 3, 7, 7\)"):
        load_torchvision_state_dict(resnet18(width=8, cifar_stem=True), sd, strict=False)


def test_missing_keys_strict_and_not_strict() -> None:
    src = resnet18(width=8)
    sd = to_torchvision_state_dict(src)
    del sd["layer4.1.bn2.bias"]
    with pytest.raises(ValueError, match=r"missing keys layer4\.1\.bn2\.bias"):
        load_torchvision_state_dict(resnet18(width=8), sd)
    dst = resnet18(width=8)
    load_torchvision_state_dict(dst, sd, strict=False)
    assert torch.equal(dst.conv1.weight, src.conv1.weight)


def test_missing_num_batches_tracked_is_accepted() -> None:
    src = resnet18(width=8)
    sd = {k: v for k, v in to_torchvision_state_dict(src).items()
          if not k.endswith("num_batches_tracked")}
    dst = resnet18(width=8)
    load_torchvision_state_dict(dst, sd)
    assert torch.equal(dst.layer3[0].conv2.weight, src.layer3[0].conv2.weight)


def test_rejects_non_resnet() -> None:
    with pytest.raises(ValueError, match="backbone"):
        to_torchvision_state_dict(torch.nn.Linear(2, 2))
