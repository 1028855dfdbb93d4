#!/usr/bin/python3
"""Generates the small synthetic image files used by tests/io_test.cpp (run from tests/data with
/usr/bin/python3; needs numpy, Pillow, tifffile, cv2). Pixel values follow formulas that the test
recomputes, so every decoded sample is checked exactly."""
import numpy as np
import cv2
import tifffile
from PIL import Image

H, W = 12, 16
y, x = np.mgrid[0:H, 0:W]

# TIFF, separate planes, 16-bit RGB: value = (x*1000 + y*37 + c*5000) % 65536
rgb16 = np.stack([(x * 1000 + y * 37 + c * 5000) % 65536 for c in range(3)], axis=-1).astype(np.uint16)
tifffile.imwrite('io_planar_separate_u16.tif', np.moveaxis(rgb16, -1, 0), planarconfig='separate', photometric='rgb')
# TIFF, tiled (16x16 tiles) 8-bit grey 40x20: value = (x*7 + y*13) % 256
yy, xx = np.mgrid[0:20, 0:40]
tifffile.imwrite('io_tiled_u8.tif', ((xx * 7 + yy * 13) % 256).astype(np.uint8), tile=(16, 16),
                 photometric='minisblack')
# TIFF, MinIsWhite 8-bit: stored value s, decoded as 255 - s with s = (x*7 + y*13) % 256
tifffile.imwrite('io_miniswhite_u8.tif', ((x * 7 + y * 13) % 256).astype(np.uint8), photometric='miniswhite')

# PNG palette with transparency (palette index i = (x + y) % 4, colours below, index 3 transparent)
pal = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (10, 20, 30)]
idx = ((x + y) % 4).astype(np.uint8)
im = Image.fromarray(idx, mode='P')
im.putpalette([v for c in pal for v in c])
im.save('io_palette_trns.png', transparency=bytes([255, 255, 255, 0]))
# PNG 1-bit grey: value = 255 if (x + y) % 3 == 0 else 0
Image.fromarray(((x + y) % 3 == 0)).convert('1').save('io_gray_1bit.png', bits=1)

# JPEG reference: HappyFish.jpg (opencv-doc) as decoded by cv2, stored as RGB PNG
ref = cv2.imread('HappyFish.jpg', cv2.IMREAD_UNCHANGED)
cv2.imwrite('HappyFish_cv2_rgb.png', ref)  # imwrite takes BGR and stores RGB
