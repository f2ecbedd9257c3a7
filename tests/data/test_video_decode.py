"""PyAV decoding: frame order, colours, real frame rates, seeking, resizing, bad files."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from video_fixtures import (
    CODECS,
    can_encode,
    frame_numbers,
    ramp_frames,
    ramp_video,
    work_dir,
    write_video,
)

from contrastkit.data.decode import video as video_decode


@pytest.mark.parametrize(("codec", "ext"), CODECS)
def test_frames_decode_in_order_after_seeks(codec: str, ext: str) -> None:
    if not can_encode(codec):
        pytest.skip(f"PyAV build cannot encode {codec}")
    path = ramp_video(40, 25, codec, ext)  # key frame every 8 frames: seeks land mid-video
    info = video_decode.probe_video(path)
    assert info.num_frames == 40 and info.fps == 25
    indices = [33, 5, 17, 17, 39, 0, 26]
    clip = video_decode.decode_frames(path, indices, short_side=None)
    assert clip.dtype == np.uint8 or str(clip.dtype) == "torch.uint8"
    assert tuple(clip.shape) == (7, 48, 64, 3)
    assert frame_numbers(clip.numpy()) == indices
    with video_decode.VideoReader(path, short_side=None) as reader:  # two far clips: two seeks
        a, b = reader.read_clips([[36, 37, 38], [1, 2]])
    assert frame_numbers(a.numpy()) == [36, 37, 38] and frame_numbers(b.numpy()) == [1, 2]


@pytest.mark.parametrize("fps", [30, Fraction(30000, 1001)])
def test_real_frame_rate_and_time_base(fps: int | Fraction) -> None:
    path = ramp_video(45, fps)
    info = video_decode.probe_video(path)
    assert info.fps == fps and info.num_frames == 45
    clip = video_decode.decode_frames(path, [44, 30, 12], short_side=None)
    assert frame_numbers(clip.numpy()) == [44, 30, 12]


def test_colours_match_what_was_encoded() -> None:
    colours = np.array([[200, 40, 60], [30, 180, 90], [50, 60, 210], [230, 220, 40]], np.uint8)
    frames = np.zeros((6, 48, 64, 3), np.uint8)
    frames[:, :24, :32], frames[:, :24, 32:] = colours[0], colours[1]
    frames[:, 24:, :32], frames[:, 24:, 32:] = colours[2], colours[3]
    for codec, ext in [c for c in CODECS if can_encode(c[0])]:
        path = write_video(work_dir() / f"colours.{ext}", frames, codec=codec)
        clip = video_decode.decode_frames(path, [0, 5], short_side=None).numpy().astype(int)
        centres = [clip[:, 12, 16], clip[:, 12, 48], clip[:, 36, 16], clip[:, 36, 48]]
        for got, want in zip(centres, colours, strict=True):
            assert np.abs(got - want.astype(int)).max() <= 6, (codec, got, want)


def test_short_side_resize() -> None:
    path = ramp_video(40, 25)
    clip = video_decode.decode_frames(path, [3, 4], short_side=24)
    assert tuple(clip.shape) == (2, 24, 32, 3)
    assert frame_numbers(clip.numpy()) == [3, 4]  # flat frames survive the resize
    assert video_decode.resized_size(64, 48, 128) == (171, 128)
    assert video_decode.resized_size(48, 64, 128) == (128, 171)
    assert video_decode.resized_size(64, 48, None) == (64, 48)


def test_out_of_range_index_is_an_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        video_decode.decode_frames(ramp_video(40, 25), [40])


def test_missing_and_garbage_files_are_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.mp4"):
        video_decode.decode_frames(tmp_path / "nope.mp4", [0])
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(video_decode.VideoDecodeError, match=r"garbage\.mp4"):
        video_decode.decode_frames(garbage, [0])


def test_truncated_file_is_an_error_naming_it(tmp_path) -> None:
    codec = next((c for c, e in CODECS if e == "avi" and can_encode(c)), None)
    if codec is None:
        pytest.skip("no MPEG-4 encoder")
    good = write_video(tmp_path / "full.avi", ramp_frames(40), codec=codec)
    data = good.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: len(data) // 2])  # header still claims 40 frames
    with pytest.raises(video_decode.VideoDecodeError, match=r"cut\.avi.*truncated"):
        video_decode.decode_frames(cut, [2, 39])
    mp4 = ramp_video(40, 25)
    cut_mp4 = tmp_path / "cut.mp4"
    cut_mp4.write_bytes(mp4.read_bytes()[: mp4.stat().st_size // 2])
    with pytest.raises(video_decode.VideoDecodeError, match=r"cut\.mp4"):
        video_decode.decode_frames(cut_mp4, [0, 39])
