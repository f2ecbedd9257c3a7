"""Applications that use both pretraining and evaluation (they sit above both; nothing in the
library imports them):

* :mod:`contrastkit.demos.pretrain` (``make demo``): pretrain SCE, then compare the pretrained
  features with random initialisation and raw pixels with few labels and on shifted test images
  (protocol: :mod:`contrastkit.demos.protocol`);
* :mod:`contrastkit.demos.losses` (``make demo-losses``): every contrastive loss on random
  embeddings, with its value and wall time.
"""
