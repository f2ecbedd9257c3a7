"""Video augmentations: RGB difference (SCE 4.2.1), ThreeCrop, clip-consistent presets."""

from __future__ import annotations

import pytest
import torch

from contrastkit.data.augment import video as clip_augment
from contrastkit.data.sources import video


def test_rgb_difference_hand_values() -> None:
    # frames: pure red, pure green, pure blue -> luma 0.299, 0.587, 0.114
    clip = torch.zeros(3, 3, 2, 2, dtype=torch.float64)
    for t in range(3):
        clip[t, t] = 1.0
    out = clip_augment.rgb_difference(clip)
    assert out.shape == clip.shape and out.dtype == clip.dtype
    expected = torch.tensor([0.587 - 0.299, 0.114 - 0.587, 0.114 - 0.587], dtype=torch.float64)
    torch.testing.assert_close(out, expected.view(3, 1, 1, 1).expand(3, 3, 2, 2))
    assert torch.equal(clip_augment.rgb_difference(clip[:1]), torch.zeros_like(clip[:1]))


def test_rgb_difference_batched_matches_per_clip() -> None:
    torch.manual_seed(0)
    batch = torch.rand(2, 4, 3, 5, 6)
    out = clip_augment.rgb_difference(batch)
    for b in range(2):
        torch.testing.assert_close(out[b], clip_augment.rgb_difference(batch[b]))
    gray = (0.299 * batch[:, :, 0] + 0.587 * batch[:, :, 1] + 0.114 * batch[:, :, 2])
    torch.testing.assert_close(out[:, 1, 2], gray[:, 2] - gray[:, 1])
    with pytest.raises(ValueError, match="float"):
        clip_augment.rgb_difference(torch.zeros(2, 3, 4, 4, dtype=torch.uint8))


def test_random_rgb_difference_is_per_clip() -> None:
    torch.manual_seed(1)
    clips = torch.rand(64, 3, 3, 4, 4)
    diff = clip_augment.rgb_difference(clips)
    assert torch.equal(clip_augment.RandomRGBDifference(0.0)(clips), clips)
    torch.testing.assert_close(clip_augment.RandomRGBDifference(1.0)(clips), diff)
    out = clip_augment.RandomRGBDifference(0.5, generator=torch.Generator().manual_seed(0))(clips)
    as_diff = [torch.equal(out[i], diff[i]) for i in range(64)]
    as_rgb = [torch.equal(out[i], clips[i]) for i in range(64)]
    assert all(a != b for a, b in zip(as_diff, as_rgb, strict=True))  # whole clips, never mixed
    assert 16 < sum(as_diff) < 48
    with pytest.raises(ValueError, match="p must be"):
        clip_augment.RandomRGBDifference(1.5)


def test_three_crop_positions() -> None:
    xs = torch.arange(10).view(1, 1, 1, 10).expand(2, 3, 4, 10)  # landscape (T, C, 4, 10)
    crops = video.ThreeCrop(4)(xs)
    assert tuple(crops.shape) == (3, 2, 3, 4, 4)
    assert [c[0, 0, 0].tolist() for c in crops] == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    ys = torch.arange(9).view(1, 1, 9, 1).expand(1, 3, 9, 5)  # portrait: top / centre / bottom
    assert [c[0, 0, :, 0].tolist() for c in video.ThreeCrop(5)(ys)] == [
        [0, 1, 2, 3, 4], [2, 3, 4, 5, 6], [4, 5, 6, 7, 8]]
    with pytest.raises(ValueError, match="size=6"):
        video.ThreeCrop(6)(ys)


def _static_clips(batch: int = 4, frames: int = 5) -> torch.Tensor:
    torch.manual_seed(2)
    image = torch.randint(0, 256, (batch, 1, 3, 40, 48), dtype=torch.uint8)
    return image.expand(-1, frames, -1, -1, -1).contiguous()


@pytest.mark.parametrize("name", ["strong_alpha", "strong_beta", "weak"])
def test_static_video_stays_static(name: str) -> None:
    pytest.importorskip("contrastkit.data.augment")
    clips = _static_clips()
    options = {} if name == "weak" else {"jitter_strength": 1.0}
    augment = clip_augment.video_preset(name, 24, generator=torch.Generator().manual_seed(0),
                                        **options)
    out = augment(clips)
    assert out.dtype == torch.float32 and tuple(out.shape) == (4, 5, 3, 24, 24)
    for t in range(1, 5):
        assert torch.equal(out[:, t], out[:, 0])
    assert not torch.equal(out[0, 0], out[1, 0])  # clips draw their own parameters


def test_frames_get_the_image_preset_with_the_same_parameters() -> None:
    augment = pytest.importorskip("contrastkit.data.augment")
    torch.manual_seed(3)
    clips = torch.randint(0, 256, (3, 4, 3, 32, 32), dtype=torch.uint8)
    aug = clip_augment.VideoAugment("strong_beta", 16, jitter_strength=1.0,
                             generator=torch.Generator().manual_seed(5))
    out = aug(clips)
    for t in range(4):  # a fresh generator with the same seed draws the clip's parameters again
        image = augment.preset("strong_beta", 16, jitter_strength=1.0,
                               generator=torch.Generator().manual_seed(5))
        torch.testing.assert_close(out[:, t], image(clips[:, t]))


def test_kornia_backend_shares_parameters_over_frames() -> None:
    pytest.importorskip("kornia")
    pytest.importorskip("contrastkit.data.augment")
    torch.manual_seed(4)
    out = clip_augment.VideoAugment("strong_alpha", 24, backend="kornia", jitter_strength=1.0)(
        _static_clips(3, 4))
    assert tuple(out.shape) == (3, 4, 3, 24, 24)
    for t in range(1, 4):
        torch.testing.assert_close(out[:, t], out[:, 0])
    with pytest.raises(ValueError, match="backend"):
        clip_augment.VideoAugment("weak", 24, backend="nope")
