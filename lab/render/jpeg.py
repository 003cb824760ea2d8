"""JPEG encoding of rendered frames (libjpeg-turbo through simplejpeg)."""

import numpy as np
import simplejpeg


def encode_jpeg(rgb: np.ndarray, quality: int = 80) -> bytes:
    """Encode an (h, w, 3) uint8 RGB image; 4:2:0 subsampling, fast DCT."""
    return simplejpeg.encode_jpeg(
        np.ascontiguousarray(rgb), quality=quality, colorspace="RGB", colorsubsampling="420", fastdct=True
    )


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) read from a JPEG's header."""
    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    return w, h
