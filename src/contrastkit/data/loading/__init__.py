"""Loading: what the data loader does beyond reading a sample. ``crops``: the views' random
resized crops cut in the loader's workers from the full image (the crop stage before the
device's augmentations); ``pack``: a folder written once into a store or tar shards that load
fast (``contrastkit data pack``).
"""
