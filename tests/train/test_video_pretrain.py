"""Video pretraining through the image engine (SCE 4.2, D.3): clip pairs, views, data module."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
pytest.importorskip("av")
from video_fixtures import squares_folder

from contrastkit.data.augment.views import ClipView, VideoTwoViews, build_train_views
from contrastkit.data.specs import VideoDataSpec, VideoViewsSpec, ViewsSpec
from contrastkit.train.datamodule import PretrainDataModule

TINY_VIDEO = VideoDataSpec(frames=4, duration_s=0.64, short_side=32, crop_size=32)


pytestmark = pytest.mark.usefixtures("one_thread")


def _views(**video: float) -> VideoTwoViews:
    spec = ViewsSpec(size=16, online="strong_alpha", target="strong_beta",
                     video=VideoViewsSpec(**video))
    return build_train_views(spec, ("strong", "weak"))


def test_view_i_is_made_from_clip_i_in_backbone_layout():
    """A batch [clips_0, clips_1]: view 0 comes from clips_0 and view 1 from clips_1."""
    views = VideoTwoViews(ClipView("weak", 16), ClipView("weak", 16))  # crop + flip only
    dark = torch.full((3, 4, 3, 20, 20), 40, dtype=torch.uint8)
    bright = torch.full((3, 4, 3, 20, 20), 200, dtype=torch.uint8)
    v0, v1 = views([dark, bright])
    assert v0.shape == v1.shape == (3, 3, 4, 16, 16)  # (B, C, T, H, W) for the R3D backbone
    torch.testing.assert_close(v0, torch.full_like(v0, 40 / 255))
    torch.testing.assert_close(v1, torch.full_like(v1, 200 / 255))


def test_spatial_and_colour_parameters_are_shared_by_the_frames_of_a_clip():
    """A static clip stays static under strong-alpha / strong-beta (crop, flip, jitter, blur,
    solarize drawn once per clip), while different clips of the batch get different draws."""
    torch.manual_seed(0)
    frame = torch.randint(0, 256, (6, 1, 3, 24, 24), dtype=torch.uint8)
    static = frame.expand(6, 5, 3, 24, 24).contiguous()
    for view in _views(rgb_difference_p=0.0)([static, static]):
        for t in range(1, 5):
            torch.testing.assert_close(view[:, :, t], view[:, :, 0], rtol=0, atol=1e-6)
        assert not torch.allclose(view[0, :, 0], view[1, :, 0])  # per-clip parameters
    # the two views of the same clip differ (independent draws, different presets)
    v0, v1 = _views(rgb_difference_p=0.0)([static, static])
    assert not torch.allclose(v0, v1)


def test_rgb_difference_and_reverse_probabilities():
    ramp = torch.arange(4, dtype=torch.float32).mul(40).add(20).to(torch.uint8)
    clips = ramp.view(1, 4, 1, 1, 1).expand(2, 4, 3, 16, 16).contiguous()
    # p = 1: every view is the RGB difference of its (static-per-frame-content) ramp: +40/255
    diff = ClipView("weak", 16, rgb_difference_p=1.0)(clips)
    torch.testing.assert_close(diff, torch.full_like(diff, 40 / 255), rtol=0, atol=1e-5)
    # p = 1 reverse: frame t holds level of frame T-1-t
    rev = ClipView("weak", 16, reverse_p=1.0)(clips)
    levels = rev.mean(dim=(0, 1, 3, 4)) * 255
    torch.testing.assert_close(levels, torch.tensor([140.0, 100.0, 60.0, 20.0]), atol=1e-3,
                               rtol=0)
    # p = 0: untouched order, RGB frames
    plain = ClipView("weak", 16)(clips).mean(dim=(0, 1, 3, 4)) * 255
    torch.testing.assert_close(plain, torch.tensor([20.0, 60.0, 100.0, 140.0]), atol=1e-3,
                               rtol=0)
    with pytest.raises(ValueError, match="rgb_difference_p"):
        ClipView("weak", 16, rgb_difference_p=1.5)
    with pytest.raises(ValueError, match="2 clips"):
        _views()([clips, clips, clips])


def test_datamodule_yields_clip_pairs_and_centre_clips_for_the_monitor():
    root = squares_folder()
    dm = PretrainDataModule(dataset="video_folder", root=str(root), batch_size=4,
                            val_split="train", video=TINY_VIDEO)
    assert dm.num_classes == 4
    clips, labels = next(iter(dm.train_dataloader()))
    assert isinstance(clips, list) and len(clips) == 2
    for c in clips:
        assert c.dtype == torch.uint8 and c.shape == (4, 4, 3, 32, 32)
    assert labels.shape == (4,)
    bank, query = dm.val_dataloader()
    a, ya = next(iter(query))
    b, yb = next(iter(query))
    assert a.shape == (4, 4, 3, 32, 32)
    assert torch.equal(a, b) and torch.equal(ya, yb)  # the centre clip: deterministic
    assert len(bank.dataset) == len(query.dataset) == 8


def test_bad_video_options_are_rejected():
    with pytest.raises(ValueError, match=r"data\.video"):
        PretrainDataModule(dataset="digits", video=TINY_VIDEO)
    with pytest.raises(ValueError, match=r"data\.load_size"):
        PretrainDataModule(dataset="video_folder", root="x", load_size=64)
    with pytest.raises(ValueError, match="annotations"):
        PretrainDataModule(dataset="ucf101", root=str(squares_folder()), batch_size=2).setup()
    from contrastkit.data.specs import MultiCropSpec
    from contrastkit.methods import SCE
    from contrastkit.models.factory import BackboneSpec
    from contrastkit.train.module import PretrainModule

    method = SCE(backbone=BackboneSpec(name="resnet3d_18", width=4), queue_size=0)
    with pytest.raises(ValueError, match="multicrop"):
        PretrainModule(method, views=ViewsSpec(video=VideoViewsSpec(), multicrop=MultiCropSpec()))
    module = PretrainModule(method, views=ViewsSpec(size=16))  # image views
    clips = torch.zeros(2, 4, 3, 16, 16, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"views\.video"):
        module.training_step(([clips, clips], torch.zeros(2, dtype=torch.long)), 0)


def test_pretrain_cli_trains_sce_on_clip_pairs(tmp_path):
    """`contrastkit pretrain` on synthetic videos: SCE (symmetric, queue) on R3D-18 width 8."""
    from contrastkit.cli.pretrain import pretrain

    out = tmp_path / "run"
    cli = pretrain([
        "--data.dataset", "video_folder", "--data.root", str(squares_folder()),
        "--data.batch_size", "4", "--data.val_split", "train",
        "--data.video", '{"frames": 4, "duration_s": 0.64, "short_side": 32, "crop_size": 32}',
        "--model.method", "contrastkit.methods.SCE",
        "--model.method.backbone", '{"name": "resnet3d_18", "width": 8}',
        "--model.method.projector", '{"hidden_dim": 32, "out_dim": 16}',
        "--model.method.queue_size", "8", "--model.method.symmetric", "true",
        "--model.views", '{"size": 32, "online": "strong_alpha", "target": "strong_beta", '
                         '"video": {"rgb_difference_p": 0.2}}',
        "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu", "--trainer.devices", "1",
        "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
        "--output", str(out),
    ])
    metrics = cli.trainer.callback_metrics
    assert torch.isfinite(metrics["train/loss"])
    assert 0.0 <= float(metrics["val/knn_top1"]) <= 1.0
    assert cli.trainer.global_step == 2  # 8 videos / batch 4
    state = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert state["contrastkit"]["backbone"]["name"] == "resnet3d_18"
    assert int(state["state_dict"]["method.queue.ptr"]) == 16 % 8  # 2 keys x 4 clips x 2 steps
