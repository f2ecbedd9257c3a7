"""Video evaluation pieces (SCE, Denize et al. 2023, appendix D.3): 30-view features and the
linear protocol.

* :class:`MultiViewEncoder`: a frozen R3D backbone applied to the ``V`` views of each video
  (10 temporal clips x 3 spatial crops, :func:`contrastkit.data.sources.video.average_views`) and
  averaged, so that ``extract_features`` / ``retrieval_recall`` / ``linear_probe`` see one
  feature vector per video. Averaging the features before a linear classifier equals averaging
  its logits over the views (SCE D.3: "the final prediction is the mean average of the
  predictions of the 30 clips"; our choice: logits, not softmax probabilities).
* :data:`SCE_D3`: the linear evaluation protocol of D.3 (60 epochs, 35 warm-up, cosine, SGD
  momentum 0.9, no weight decay, lr 2 for a batch of 512 under the linear scaling rule).
* :class:`SharedFrameTransform`: an image :class:`~contrastkit.data.augment.Pipeline` applied
  with the same random parameters on every frame of each clip (used by fine-tuning and the
  D.3 linear protocol's training views).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.data.augment.views import to_backbone_layout
from contrastkit.eval.linear import LinearProtocol

__all__ = ["SCE_D3", "MultiViewEncoder", "SharedFrameTransform", "flip_only_transform"]

#: Denize et al. 2023, appendix D.3 (after Feichtenhofer et al. 2021): linear classifier on the
#: frozen encoder, 60 epochs, batch 512, SGD momentum 0.9, no weight decay, lr 2 following the
#: linear scaling rule with reference batch 512, linear warm-up of 35 epochs then cosine
#: annealing.
SCE_D3 = LinearProtocol(
    epochs=60, lr=2.0, momentum=0.9, weight_decay=0.0, batch_size=512, schedule="cosine",
    milestones=(), warmup_epochs=35.0, lr_reference_batch=512,
)


class MultiViewEncoder(nn.Module):
    """Frozen clip backbone for evaluation batches of one or several views per video.

    * uint8 ``(B, V, T, C, H, W)`` (the ``mode="eval"`` datasets): every view goes through
      ``view`` (e.g. :class:`~contrastkit.data.augment.views.VideoEvalView`) and the backbone, in
      chunks of ``chunk`` views, and the ``V`` features of each video are averaged
      (:func:`~contrastkit.data.sources.video.average_views`): ``(B, D)``.
    * uint8 ``(B, T, C, H, W)``: one view per video, ``(B, D)``.
    * float ``(B, C, T, H, W)`` (already-made views, e.g. training views): the backbone only.

    Args:
        backbone: maps ``(N, 3, T, H, W)`` floats to ``(N, D)``.
        view: maps uint8 ``(N, T, C, H, W)`` to floats ``(N, 3, T, H, W)``.
        chunk: views per backbone call.
    """

    def __init__(self, backbone: nn.Module, view: nn.Module, chunk: int = 30) -> None:
        super().__init__()
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.backbone, self.view, self.chunk = backbone, view, chunk
        self.out_dim = getattr(backbone, "out_dim", None)

    def forward(self, x: Tensor) -> Tensor:
        from contrastkit.data.sources.video import average_views

        if x.is_floating_point() and x.dim() == 5:
            return self.backbone(x)
        if x.dim() == 5:
            return self.backbone(self.view(x))
        if x.dim() != 6:
            raise ValueError(f"expected (B, V, T, C, H, W) or (B, T, C, H, W) clips, got "
                             f"{tuple(x.shape)}")
        views = x.shape[1]
        flat = x.flatten(0, 1)
        feats = torch.cat([self.backbone(self.view(flat[i:i + self.chunk]))
                           for i in range(0, flat.shape[0], self.chunk)])
        return average_views(feats, views)  # rows are video-major: (videos * V, D)


class SharedFrameTransform(nn.Module):
    """Apply ``pipeline`` to every frame of each clip with the same random parameters
    (:meth:`~contrastkit.data.augment.Pipeline.forward_clips`).

    Input uint8 ``(B, T, C, H, W)``; output ``(B, 3, T, S, S)`` floats (backbone layout).
    """

    def __init__(self, pipeline: nn.Module) -> None:
        super().__init__()
        self.pipeline = pipeline

    def forward(self, clips: Tensor) -> Tensor:
        return to_backbone_layout(self.pipeline.forward_clips(clips))


def flip_only_transform(size: int, normalize: str | None = None,
                        jitter_strength: float = 0.0) -> SharedFrameTransform:
    """Horizontal flip (p 0.5) [+ SCE *strong* colour jitter] shared by a clip's frames.

    The training views of Denize et al. 2023, appendix D.3, after the loader's random ``size`` crop:
    the linear protocol uses the flip only (``jitter_strength=0``); fine-tuning adds "colour
    jittering with the *strong* augmentation parameters" of SCE Table 1 (``jitter_strength=0.5``:
    brightness, contrast, saturation 0.4, hue 0.1, probability 0.8; no grayscale, blur or crop).
    """
    from dataclasses import replace

    from contrastkit.data import augment

    spec = replace(augment.PRESETS["strong"], crop_scale=(1.0, 1.0), gray_p=0.0, blur_p=0.0,
                   solarize_p=0.0)
    steps = augment.pretrain_steps(spec, size, jitter_strength, (1.0, 1.0))
    # the crop box of scale 1 must keep the whole (square) frame: fix its aspect ratio at 1
    steps[0].ratio = (1.0, 1.0)
    return SharedFrameTransform(augment.Pipeline(steps, size, normalize))
