"""Video datasets: real annotation formats, clip items, eval views, looping, bad files."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from video_fixtures import (
    DIRECTIONS,
    default_codec,
    frame_numbers,
    ramp_video,
    red_centroid,
    squares_folder,
)

from contrastkit.data.decode import video as video_decode
from contrastkit.data.sources import video


def _link_tree(root: Path, layout: dict[str, Path]) -> Path:
    """Copy videos to ``root/<relative path>`` (layout: relative path -> source video)."""
    for rel, source in layout.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / rel)
    return root


def _source(direction: str, k: int = 0) -> Path:
    return squares_folder() / direction / f"clip{k}.{default_codec()[1]}"


def test_video_folder_items_move_in_the_class_direction() -> None:
    ds = video.VideoFolder(squares_folder(), frames=8, duration_s=1.0, jitter=None,
                           short_side=None)
    assert ds.classes == list(DIRECTIONS) and len(ds) == 8
    expected = {"down": (0, 1), "left": (-1, 0), "right": (1, 0), "up": (0, -1)}
    for i in range(len(ds)):
        clip, label = ds[i]
        assert clip.dtype == torch.uint8 and tuple(clip.shape) == (8, 3, 48, 64)
        centre = red_centroid(clip.numpy())
        motion = np.sign(np.round(centre[-1] - centre[0]))  # 25 frames -> ~21 pixels
        assert tuple(motion) == expected[ds.classes[label]]


def test_two_views_and_crop(tmp_path: Path) -> None:
    torch.manual_seed(0)
    ds = video.VideoFolder(squares_folder(), frames=4, num_clips=2, short_side=32, crop_size=28,
                           duration_s=0.4)
    views, _ = ds[3]
    assert isinstance(views, list) and len(views) == 2
    assert all(tuple(v.shape) == (4, 3, 28, 28) and v.dtype == torch.uint8 for v in views)
    batch = torch.utils.data.default_collate([ds[i] for i in range(4)])
    assert tuple(batch[0][0].shape) == (4, 4, 3, 28, 28) and batch[1].tolist() == [0, 0, 1, 1]
    # the two clips of an item are sampled independently (48-frame ramp, 10-frame clips)
    _link_tree(tmp_path, {f"a/ramp.{default_codec()[1]}": ramp_video(48, 25)})
    ramp = video.VideoFolder(tmp_path, frames=4, num_clips=2, duration_s=0.4, short_side=16)
    pairs = []
    for _ in range(10):
        a, b = ramp[0][0]
        first_a, first_b = (frame_numbers(c.permute(0, 2, 3, 1).numpy()) for c in (a, b))
        assert first_a[1:] == [first_a[0] + d for d in (2, 5, 7)]  # floor(k * 10 / 4)
        pairs.append((first_a[0], first_b[0]))
    assert any(x != y for x, y in pairs) and all(0 <= x <= 38 for p in pairs for x in p)


def test_eval_mode_gives_30_views() -> None:
    ds = video.VideoFolder(squares_folder(), frames=4, mode="eval", short_side=32)
    views, _ = ds[0]
    assert tuple(views.shape) == (30, 4, 3, 32, 32) and views.dtype == torch.uint8
    features = views.float().flatten(1)
    assert tuple(video.average_views(features, 30).shape) == (1, features.shape[1])


def test_eval_views_are_uniform_clips_times_three_crops() -> None:
    # "right" video 0: 40 frames, square x0 = t; clips of 0.4 s = 10 frames at 25 fps
    ds = video.VideoFolder(squares_folder(), frames=4, mode="eval", duration_s=0.4,
                           short_side=None)
    views, label = ds[4]
    assert ds.classes[label] == "right" and tuple(views.shape) == (30, 4, 3, 48, 48)
    starts = video.eval_clip_starts(40, 10, 10)
    assert starts == [0, 3, 7, 10, 13, 17, 20, 23, 27, 30]
    for j, start in enumerate(starts):
        left, centre, right = views[3 * j], views[3 * j + 1], views[3 * j + 2]
        x_first = red_centroid(left.numpy())[0, 0]
        assert abs(x_first - (4.5 + start)) < 0.6  # crop 0 is the left one, clip j starts at s_j
        # left crop = columns 0..47, centre = 8..55, right = 16..63 of the 64-wide frame
        assert torch.equal(left[..., 16:], right[..., :32])
        assert torch.equal(left[..., 8:], centre[..., :40])


def test_short_video_loops_through_dataset(tmp_path: Path) -> None:
    # 12 frames at 25 fps < 2.56 s: indices wrap, 0 8 16 24 ... mod 12
    _link_tree(tmp_path, {f"a/short.{default_codec()[1]}": ramp_video(12, 25)})
    ds = video.VideoFolder(tmp_path, frames=8, short_side=None, jitter=None)
    clip, _ = ds[0]
    assert frame_numbers(clip.permute(0, 2, 3, 1).numpy()) == [0, 8, 4, 0, 8, 4, 0, 8]


def test_ucf101_reader_and_dataset(tmp_path: Path) -> None:
    ann = tmp_path / "ucfTrainTestlist"
    ann.mkdir()
    (ann / "classInd.txt").write_text("1 ApplyEyeMakeup\r\n2 HandstandPushups\r\n")
    videos = {"ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi": _source("right"),
              "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi": _source("right", 1),
              "HandstandPushups/v_HandStandPushups_g08_c01.avi": _source("up"),
              "HandstandPushups/v_HandStandPushups_g01_c02.avi": _source("up", 1)}
    root = _link_tree(tmp_path / "UCF-101", videos)
    for fold in (1, 2, 3):
        (ann / f"trainlist0{fold}.txt").write_text(
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\n"
            "HandstandPushups/v_HandStandPushups_g08_c01.avi 2\n")
        (ann / f"testlist0{fold}.txt").write_text(
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\n"
            "HandstandPushups/v_HandStandPushups_g01_c02.avi\n")
    samples, classes = video.read_ucf101(root, ann, "test", fold=2)
    assert classes == ["ApplyEyeMakeup", "HandstandPushups"]
    assert [(p.relative_to(root).as_posix(), y) for p, y in samples] == [
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi", 0),
        ("HandstandPushups/v_HandStandPushups_g01_c02.avi", 1)]
    ds = video.UCF101(root, ann, split="train", fold=3, frames=4, short_side=24)
    assert [y for _, y in ds.samples] == [0, 1] and tuple(ds[1][0].shape) == (4, 3, 24, 32)
    with pytest.raises(ValueError, match="fold"):
        video.read_ucf101(root, ann, "train", fold=4)
    (ann / "trainlist01.txt").write_text("ApplyEyeMakeup/v_gone.avi 1\n")
    with pytest.raises(FileNotFoundError, match=r"v_gone\.avi"):
        video.UCF101(root, ann, "train", 1)
    (ann / "trainlist01.txt").write_text("ApplyEyeMakeup/v_gone.avi 1\n"
                                        "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\n")
    with pytest.warns(RuntimeWarning, match="1 of 2 videos are missing"):
        ds = video.UCF101(root, ann, "train", 1, skip_corrupt=True)
    assert len(ds) == 1 and [p.name for p in ds.missing] == ["v_gone.avi"]


def test_hmdb51_reader(tmp_path: Path) -> None:
    ann = tmp_path / "testTrainMulti_7030_splits"
    ann.mkdir()
    for fold in (1, 2, 3):
        (ann / f"brush_hair_test_split{fold}.txt").write_text(
            "a_brush.avi 1 \nb_brush.avi 2 \nc_brush.avi 0 \n")
        (ann / f"shoot_ball_test_split{fold}.txt").write_text(
            "d_shoot.avi 2 \ne_shoot.avi 1 \n")
    root = _link_tree(tmp_path / "hmdb51", {
        "brush_hair/a_brush.avi": _source("left"), "brush_hair/b_brush.avi": _source("left", 1),
        "shoot_ball/d_shoot.avi": _source("down"), "shoot_ball/e_shoot.avi": _source("down", 1),
    })
    train, classes = video.read_hmdb51(root, ann, "train", fold=1)
    assert classes == ["brush_hair", "shoot_ball"]
    assert [(p.name, y) for p, y in train] == [("a_brush.avi", 0), ("e_shoot.avi", 1)]
    test, _ = video.read_hmdb51(root, ann, "test", fold=3)
    assert [(p.name, y) for p, y in test] == [("b_brush.avi", 0), ("d_shoot.avi", 1)]
    ds = video.HMDB51(root, ann, split="test", fold=1, frames=2, short_side=16)
    assert len(ds) == 2 and ds[1][1] == 1
    (ann / "shoot_ball_test_split1.txt").write_text("d_shoot.avi 7\n")
    with pytest.raises(ValueError, match=r"shoot_ball_test_split1\.txt:1"):
        video.read_hmdb51(root, ann, "train", 1)


@pytest.mark.parametrize("layout", ["flat", "label_folders"])
def test_kinetics_csv_layouts_and_missing(tmp_path: Path, layout: str) -> None:
    rows = [("abseiling", "AAAAAAAAAAA", 14, 24, "train", 0),
            ("air drumming", "BBBBBBBBBBB", 0, 10, "train", 1),
            ("abseiling", "CCCCCCCCCCC", 100, 110, "train", 0),  # file absent
            ("zumba", "DDDDDDDDDDD", 5, 15, "val", 0)]
    csv = tmp_path / "train.csv"
    csv.write_text("label,youtube_id,time_start,time_end,split,is_cc\n" + "".join(
        f'"{r[0]}",{r[1]},{r[2]},{r[3]},{r[4]},{r[5]}\n' for r in rows))
    names = {r[1]: f"{r[1]}_{r[2]:06d}_{r[3]:06d}.mp4" for r in rows}
    present = {"AAAAAAAAAAA": "right", "BBBBBBBBBBB": "left", "DDDDDDDDDDD": "up"}
    label = {r[1]: r[0] for r in rows}
    root = _link_tree(tmp_path / "k400", {
        (names[y] if layout == "flat" else f"{label[y].replace(' ', '_')}/{names[y]}"):
        _source(d) for y, d in present.items()})
    with pytest.warns(RuntimeWarning, match="1 of 3 videos are missing"):
        ds = video.Kinetics(root, csv, split="train", frames=4, short_side=24)
    assert ds.classes == ["abseiling", "air drumming", "zumba"]
    assert [(p.name, y) for p, y in ds.samples] == [(names["AAAAAAAAAAA"], 0),
                                                    (names["BBBBBBBBBBB"], 1)]
    assert [p.name for p in ds.missing] == [names["CCCCCCCCCCC"]]
    assert tuple(ds[0][0].shape) == (4, 3, 24, 32)
    samples, _, missing = video.read_kinetics(root, csv)
    assert len(samples) == 3 and len(missing) == 1


def _corrupt_folder(tmp_path: Path) -> Path:
    ext = default_codec()[1]
    root = _link_tree(tmp_path / "bad", {f"a/good0.{ext}": _source("right"),
                                         f"a/good1.{ext}": _source("left")})
    (root / "a" / f"garbage.{ext}").write_bytes(np.random.default_rng(0).bytes(4000))
    full = _source("up").read_bytes()
    (root / "a" / f"half.{ext}").write_bytes(full[: len(full) // 3])
    return root


def test_corrupt_videos_raise_naming_the_file(tmp_path: Path) -> None:
    ds = video.VideoFolder(_corrupt_folder(tmp_path), frames=2, short_side=16)
    names = [p.name for p, _ in ds.samples]
    with pytest.raises(video_decode.VideoDecodeError, match=names[0]):
        ds[0]  # garbage.* sorts first


def test_skip_corrupt_warns_with_a_count(tmp_path: Path) -> None:
    ds = video.VideoFolder(_corrupt_folder(tmp_path), frames=2, short_side=16,
                           skip_corrupt=True)
    assert [p.name.split(".")[0] for p, _ in ds.samples] == ["garbage", "good0", "good1", "half"]
    with pytest.warns(RuntimeWarning) as record:
        items = [ds[i] for i in range(len(ds))]
    messages = [str(w.message) for w in record if "skip_corrupt" in str(w.message)]
    assert len(messages) == 2
    assert "garbage" in messages[0] and "(1 skipped so far" in messages[0]
    assert "half" in messages[1] and "(2 skipped so far" in messages[1]
    assert sorted(p.name.split(".")[0] for p in ds.corrupt) == ["garbage", "half"]
    assert all(tuple(clip.shape) == (2, 3, 16, 21) for clip, _ in items)
    centres = [red_centroid(clip.numpy()) for clip, _ in items]
    assert all(np.isfinite(c).all() for c in centres)  # every item is a real (good) video
