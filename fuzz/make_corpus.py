#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/). Run with Debian's /usr/bin/python3
(numpy, cv2). Seeds are tiny on purpose: libFuzzer mutates faster on small inputs. Real files come from
tests/data (see tests/data/README.md for their sources); the rest is generated here."""
import json, os, shutil, struct
import numpy as np
import cv2

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
SEP = b"\n%%DATA%%\n"


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


# ---- images ----
for n in ["io_gray_1bit.png", "io_palette_trns.png", "io_miniswhite_u8.tif", "io_planar_separate_u16.tif",
          "io_tiled_u8.tif", "HappyFish.jpg"]:
    out("image", n, read(n))
rng = np.random.default_rng(5)
g8 = rng.integers(0, 256, (6, 5), dtype=np.uint8)
c8 = rng.integers(0, 256, (4, 3, 3), dtype=np.uint8)
out("image", "gray8.png", cv2.imencode(".png", g8)[1].tobytes())
out("image", "rgba16.png", cv2.imencode(".png", rng.integers(0, 65536, (3, 4, 4), dtype=np.uint16))[1].tobytes())
out("image", "gray.jpg", cv2.imencode(".jpg", np.tile(g8, (2, 2)))[1].tobytes())
out("image", "colour_progressive.jpg",
    cv2.imencode(".jpg", np.tile(c8, (3, 3, 1)), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes())
out("image", "p5.pgm", b"P5\n5 6\n255\n" + g8.tobytes())
out("image", "p5_16.pgm", b"P5\n# comment\n2 2\n65535\n" + struct.pack(">4H", 0, 1, 65535, 300))
out("image", "p6.ppm", b"P6 3 4 255\n" + c8.tobytes())
out("image", "p2.pgm", b"P2\n3 2\n15\n0 1 2\n3 4 15\n")
out("image", "p3.ppm", b"P3\n2 1\n255\n255 0 0  0 255 0\n")

# ---- ENVI headers and cubes ----
hydice = read("hydice_data.hdr")
targets = read("hydice_data_targets.hdr")
out("envi_header", "hydice.hdr", hydice)
out("envi_header", "targets.hdr", targets)
full = b"""ENVI
description = {A header with
  every key we read}
samples = 3
lines = 2
bands = 4
header offset = 16
file type = ENVI Standard
data type = 4
interleave = bil
byte order = 1
wavelength units = Nanometers
wavelength = { 400.5, 500, 600, 7.0e2 }
fwhm = {10, 10, 10, 10}
bbl = {1, 0, 1, 1}
data ignore value = -9999
reflectance scale factor = 10000
band names = {Band 1, Band 2, Band 3, Band 4}
map info = {UTM, 1.000, 1.000, 0.0, 0.0, 1.0, 1.0, 33, North, WGS-84, units=Meters}
; a comment
"""
out("envi_header", "full.hdr", full)
out("envi_header", "crlf_bom.hdr", b"\xef\xbb\xbfENVI\r\nsamples = 1\r\nlines = 1\r\nbands = 1\r\ndata type = 1\r\n")

def cube(name, hdr, arr_bytes):
    out("envi_cube", name, hdr + SEP + arr_bytes)

small = rng.integers(-300, 300, (2, 3, 4), dtype=np.int16)
for il in ["bsq", "bil", "bip"]:
    for bo, dt in [(0, "<i2"), (1, ">i2")]:
        h = (f"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\ninterleave = {il}\n"
             f"byte order = {bo}\n").encode()
        cube(f"i16_{il}_{bo}", h, small.astype(dt).tobytes())
for code, dt in [(1, "u1"), (3, "<i4"), (4, "<f4"), (5, "<f8"), (12, "<u2"), (13, "<u4"), (14, "<i8"), (15, "<u8")]:
    h = f"ENVI\nsamples = 2\nlines = 2\nbands = 2\ndata type = {code}\ninterleave = bsq\n".encode()
    cube(f"type{code}", h, np.arange(8).astype(dt).tobytes())
cube("offset", full, bytes(16) + np.arange(24, dtype=">f4").tobytes())
cube("targets_head", targets, read("hydice_data_targets.img")[:8000])

# ---- spectral libraries ----
lib_hdr = (b"ENVI\nsamples = 4\nlines = 2\nbands = 1\ndata type = 4\nfile type = ENVI Spectral Library\n"
           b"interleave = bsq\nwavelength = {400, 500, 600, 700}\nspectra names = {grass, soil}\n")
out("library", "envi_f32", b"\x01" + lib_hdr + SEP + np.arange(8, dtype="<f4").tobytes())
out("library", "envi_scaled_i16", b"\x01" + lib_hdr.replace(b"data type = 4", b"data type = 2") +
    b"reflectance scale factor = 10000\n" + SEP + np.arange(8, dtype="<i2").tobytes())
out("library", "csv_wl", b"\x00wavelength (nm),grass,\"soil, dry\"\n400,0.1,0.2\n500,0.3,0.4\n# c\n600,1e-1,NaN\n")
out("library", "csv_plain", b"\x00a,b\n1,2\n3,4\n")

# ---- feature files ----
desc = rng.integers(0, 256, (2, 128))
key = "2 128\n"
for i, (y, x, s, o) in enumerate([(10.5, 20.25, 1.6, 0.5), (3.0, 4.0, 2.5, -3.14159)]):
    key += f"{y} {x} {s} {o}\n"
    for r in range(0, 128, 20):
        key += " " + " ".join(str(v) for v in desc[i, r:r + 20]) + "\n"
out("features", "two.key", key.encode())
out("features", "empty.key", b"0 128\n")
kps = [{"x": 20.25, "y": 10.5, "size": 3.2, "angle": 331.4, "response": 0.02, "octave": 0, "layer": 1},
       {"x": 4.0, "y": 3.0, "size": 5.0, "angle": 0.0, "response": 0.01, "octave": -1, "layer": 2}]
js = {"format": "spectrasift-features", "version": 1, "image": {"width": 64, "height": 48},
      "keypoints": kps, "descriptors": [[float(v) for v in d] for d in desc]}
out("features", "two.json", json.dumps(js).encode())
b = b"SSFT" + struct.pack("<5I", 1, 2, 128, 64, 48)
for k in kps:
    b += struct.pack("<5f2i", k["x"], k["y"], k["size"], k["angle"], k["response"], k["octave"], k["layer"])
b += desc.astype("<f4").tobytes()
out("features", "two.bin", b)
# u8 descriptors: JSON names the type; binary version 2 carries it at offset 24, then one byte a value.
out("features", "two_u8.json", json.dumps(dict(js, descriptor_type="u8", descriptors=desc.tolist())).encode())
b2 = b"SSFT" + struct.pack("<6I", 2, 2, 128, 64, 48, 1)
for k in kps:
    b2 += struct.pack("<5f2i", k["x"], k["y"], k["size"], k["angle"], k["response"], k["octave"], k["layer"])
b2 += desc.astype(np.uint8).tobytes()
out("features", "two_u8.bin", b2)

# ---- CLI arguments (NUL-separated argv words) ----
def argv(name, words):
    out("cli_args", name, b"\x00".join(w.encode() for w in words))

argv("sift", ["spectrasift", "sift", "in.png", "-o", "out.key", "--threads", "2", "--backend", "cpu"])
argv("match", ["spectrasift", "match", "a.key", "b.key", "--ratio", "0.8", "-o", "m.json"])
argv("register", ["spectrasift", "register", "a.png", "b.png", "--model", "homography", "--threshold", "2.5e0",
                  "-o", "h.json"])
argv("spectral", ["spectrasift", "spectral", "cube.hdr", "--ref-pixel", "12,40", "--metric", "sam", "--top", "3",
                  "--threshold", "0.1", "-o", "out.hdr"])
argv("devices", ["spectrasift", "devices", "--json"])
argv("demo", ["spectrasift", "demo", "--help"])
