"""Decoding: encoded bytes -> uint8 pixels, for the datasets and the loader's crops.
``images``: Pillow (and libjpeg-turbo through simplejpeg), reduced JPEG DCT scales for large
images, one-line errors naming the file; ``video``: PyAV, frames by index, short-side resize.
"""
