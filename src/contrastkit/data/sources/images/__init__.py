"""Image data sets in their real on-disk formats, decoded to uint8 ``(C, H, W)``: CIFAR-10/100,
STL-10, SVHN, Tiny-ImageNet, ImageNet-100, image folders, the offline digits, long-tailed
subsets and the checksummed uint8 array cache (``datasets`` lists them all)."""
