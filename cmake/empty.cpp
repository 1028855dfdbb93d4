// An empty translation unit: libspectrasift.so is the static library linked whole (src/CMakeLists.txt).
