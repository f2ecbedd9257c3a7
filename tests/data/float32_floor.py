"""The float32 rounding floor of the augmentation presets, which the CUDA-only tests' tolerance
rests on.

A float32 run of a preset differs from the float64 run of the same parameters by its rounding
floor: measured on the CPU up to 1.7e-5 on these inputs (normalised images: the division by
the CIFAR std, about 0.25, scales the rounding of [0, 1] pixels by 4), and 1-3.6e-5 in
issue 21's measurement. A CUDA float32 run has a floor of the same order (other kernels, other
summation orders), so a CPU and a CUDA run of the same parameters differ by up to about twice
it: :data:`CUDA_ATOL` leaves a margin of about 1.4 over twice the largest figure measured.
``test_augment_device.py`` checks on the CPU that the floor stays below half of it.
"""

from __future__ import annotations

import torch

from contrastkit.data import augment as A

#: Absolute tolerance between CPU and CUDA views of the same parameters.
CUDA_ATOL = 1e-4


def float32_floor(name: str, x: torch.Tensor) -> float:
    """Largest difference between preset ``name``'s float32 and float64 views of ``x`` (uint8)
    for the same parameters, drawn once."""
    pipe = A.preset(name, 32, normalize="cifar10")
    params = pipe.draw(x.shape[0], x.shape[2], x.shape[3], torch.device("cpu"))
    single = pipe.apply_params(x, params)
    wide = [{k: v.double() if v.is_floating_point() else v for k, v in p.items()} for p in params]
    double = pipe.double().apply_params(x.double() / 255, wide)
    return (single.double() - double).abs().max().item()
