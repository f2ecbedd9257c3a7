"""Applications that use both pretraining and evaluation (they sit above both; nothing in the
library imports them):

* :mod:`examples.demos.pretrain` (``make demo``): pretrain SCE, then compare the pretrained
  features with random initialisation and raw pixels with few labels and on shifted test images
  (protocol: :mod:`examples.demos.protocol`);
* :mod:`examples.demos.losses` (``make demo-losses``): every contrastive loss on random
  embeddings, with its value and wall time.

Importing this package makes waiting OpenMP threads sleep, as the ``contrastkit`` command does
(:func:`contrastkit.threads.sleep_while_waiting`): it runs before the demos import torch.
"""

from contrastkit.threads import sleep_while_waiting

sleep_while_waiting()
