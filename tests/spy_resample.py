#!/usr/bin/python3
"""Resamples spectra with Spectral Python's BandResampler (tests/spectral_spy_test.cpp).
Input: a JSON file [{"c1": [...], "c2": [...], "f1": [...] or null, "f2": [...] or null, "spectra": [[...], ...]}, ...]
Output (stdout): JSON, per case the resampled spectra, NaN written as null."""
import json
import math
import sys

import numpy as np
from spectral.algorithms.resampling import BandResampler

cases = json.load(open(sys.argv[1]))
out = []
for c in cases:
    r = BandResampler(c["c1"], c["c2"], c.get("f1"), c.get("f2"))
    out.append([[None if math.isnan(v) else float(v) for v in r(np.array(s, dtype=np.float64))] for s in c["spectra"]])
print(json.dumps(out))
