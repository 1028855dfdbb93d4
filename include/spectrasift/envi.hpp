// spectrasift/envi.hpp — ENVI cubes and spectral libraries (filled in by the spectral work).
#pragma once
