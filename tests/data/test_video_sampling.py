"""Clip sampling (SCE appendix D.3, temporal augmentations of 4.2.1): pure functions."""

from __future__ import annotations

import pytest
import torch

from contrastkit.data.sources import video


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_clip_length_uses_real_fps() -> None:
    assert video.clip_length(25, 2.56) == 64
    assert video.clip_length(30, 2.56) == 77  # 76.8 frames
    assert video.clip_length(30000 / 1001, 2.56) == 77  # 76.72
    with pytest.raises(ValueError, match="fps"):
        video.clip_length(0, 2.56)


def test_eight_frames_of_64_at_25fps_stride_8() -> None:
    idx = video.sample_clip_indices(300, 25, frames=8, jitter=None, start=10)
    assert idx == [10, 18, 26, 34, 42, 50, 58, 66]
    idx16 = video.sample_clip_indices(300, 25, frames=16, jitter=None, start=0)
    assert idx16 == list(range(0, 64, 4))


def test_30fps_covers_77_frames() -> None:
    # floor(k * 77 / 8) for k = 0..7
    assert video.sample_clip_indices(300, 30, jitter=None, start=0) == [
        0, 9, 19, 28, 38, 48, 57, 67
    ]


def test_random_start_covers_all_valid_starts() -> None:
    g = gen(1)
    starts = {video.sample_clip_indices(100, 25, jitter=None, generator=g)[0]
              for _ in range(3000)}
    assert starts == set(range(0, 100 - 64 + 1))


def test_jitter_bounds_of_clip_duration() -> None:
    g = gen(2)
    # span = floor(7 L / 8) with L = round(2.56 * s * 25), s in [0.8, 1.2] -> L in [51, 77]
    spans = [video.sample_clip_indices(500, 25, jitter=(0.8, 1.2), generator=g, start=0)[-1]
             for _ in range(2000)]
    assert min(spans) >= 7 * 51 // 8 and max(spans) <= 7 * 77 // 8
    assert min(spans) <= 7 * 52 // 8 and max(spans) >= 7 * 76 // 8
    fixed = {video.sample_clip_indices(500, 25, jitter=None, generator=g, start=0)[-1]
             for _ in range(20)}
    assert fixed == {56}


def test_reversal() -> None:
    assert video.sample_clip_indices(100, 25, jitter=None, start=0, reverse_p=1.0) == [
        56, 48, 40, 32, 24, 16, 8, 0
    ]
    g = gen(3)
    reversed_count = sum(
        video.sample_clip_indices(100, 25, jitter=None, start=0, reverse_p=0.5,
                                  generator=g)[0] == 56
        for _ in range(1000)
    )
    assert 400 < reversed_count < 600


def test_short_video_loops() -> None:
    # 20 frames < 64: start 0 and indices wrap around (i mod 20)
    assert video.sample_clip_indices(20, 25, jitter=None, generator=gen()) == [
        0, 8, 16, 4, 12, 0, 8, 16
    ]
    assert video.sample_clip_indices(1, 25, jitter=None) == [0] * 8


def test_generator_makes_it_reproducible() -> None:
    a = [video.sample_clip_indices(400, 25, generator=gen(7), reverse_p=0.3) for _ in range(3)]
    b = [video.sample_clip_indices(400, 25, generator=gen(7), reverse_p=0.3) for _ in range(3)]
    assert a == b


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"frames": 0}, "frames"), ({"jitter": (1.2, 0.8)}, "jitter"),
     ({"reverse_p": 2.0}, "reverse_p"), ({"start": -1}, "start")],
)
def test_bad_arguments_are_named(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        video.sample_clip_indices(100, 25, **kwargs)
    with pytest.raises(ValueError, match="num_frames_in_video"):
        video.sample_clip_indices(0, 25)


def test_eval_clip_starts_uniform() -> None:
    assert video.eval_clip_starts(100, 64, 10) == [0, 4, 8, 12, 16, 20, 24, 28, 32, 36]
    assert video.eval_clip_starts(64 + 9 * 7, 64, 10) == [7 * j for j in range(10)]
    assert video.eval_clip_starts(40, 64, 10) == [0] * 10  # short video: clips loop
    assert video.eval_clip_starts(100, 64, 1) == [18]
    with pytest.raises(ValueError, match="num_clips"):
        video.eval_clip_starts(100, 64, 0)


def test_average_views() -> None:
    features = torch.randn(2 * 30, 5, dtype=torch.float64)
    out = video.average_views(features, 30)
    expected = torch.stack([features[v * 30:(v + 1) * 30].sum(0) / 30 for v in range(2)])
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError, match="views_per_video"):
        video.average_views(torch.randn(31, 5), 30)
