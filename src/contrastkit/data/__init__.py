"""Data, by stage of the flow ``dataset (uint8) -> decode -> crop -> augment``:

* ``sources``: what a dataset is, per format: the registry that pretraining and evaluation
  share (a name and a split -> a dataset), image datasets in their real on-disk formats
  (``sources.images``), videos (``sources.video``), text, STS, VOC07, the DySTreSS transfer
  sets, packed shards (random access and streamed) and dataset wrappers;
* ``decode``: bytes -> uint8 pixels (``decode.images``: Pillow / libjpeg-turbo, reduced DCT
  scales; ``decode.video``: PyAV);
* ``loading``: what the loader does beyond reading a sample: the views' random resized crops
  cut in its workers (``loading.crops``) and the packing of a folder into a store or shards
  (``loading.pack``);
* ``augment``: batched augmentations on the batch's device and the views of a method
  (``augment.views``: a uint8 batch -> its augmented views; ``augment.video``: clip
  augmentations);

and ``specs``, the configuration records of clip sampling and views. Import each by its name
(``from contrastkit.data.sources import registry``, ``from contrastkit.data.augment import
views``).
"""
