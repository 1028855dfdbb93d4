# Sanitizer and fuzzing builds (issue 5).
#
#   SPECTRASIFT_SANITIZE  "" (default), "address;undefined" or "thread": instruments every target of the
#                         project (library, CLI, tests, benchmarks). UBSan does not recover: the first
#                         undefined behaviour aborts the test that hit it.
#   SPECTRASIFT_FUZZ      ON: builds the libFuzzer targets of fuzz/ (clang only). The library is compiled
#                         with -fsanitize=fuzzer-no-link plus ASan+UBSan unless SPECTRASIFT_SANITIZE says
#                         otherwise; each fuzz target links -fsanitize=fuzzer.
#
# The presets "asan", "tsan" and "fuzz" (CMakePresets.json) set these; see fuzz/README.md.
set(SPECTRASIFT_SANITIZE "" CACHE STRING "Sanitizers: empty, \"address;undefined\" or \"thread\"")
option(SPECTRASIFT_FUZZ "Build the libFuzzer targets in fuzz/ (clang)" OFF)

if(SPECTRASIFT_FUZZ AND NOT SPECTRASIFT_SANITIZE)
  set(SPECTRASIFT_SANITIZE "address;undefined")
endif()

if(SPECTRASIFT_SANITIZE)
  list(FIND SPECTRASIFT_SANITIZE thread _tsan)
  list(FIND SPECTRASIFT_SANITIZE address _asan)
  if(_tsan GREATER -1 AND _asan GREATER -1)
    message(FATAL_ERROR "SPECTRASIFT_SANITIZE: thread cannot be combined with address")
  endif()
  string(REPLACE ";" "," _san "${SPECTRASIFT_SANITIZE}")
  set(_san_flags -fsanitize=${_san} -fno-omit-frame-pointer)
  list(FIND SPECTRASIFT_SANITIZE undefined _ubsan)
  if(_ubsan GREATER -1)
    # Abort on the first report so that ctest sees a failure; keep float division by zero legal
    # (NaN/Inf are documented results of the spectral metrics, and -fsanitize=undefined does not
    # include float-divide-by-zero anyway).
    list(APPEND _san_flags -fno-sanitize-recover=undefined)
  endif()
  foreach(_f IN LISTS _san_flags)  # one generator expression per flag (a list would split it)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${_f}>)
  endforeach()
  add_link_options(${_san_flags})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12's -Wmaybe-uninitialized gives false positives inside libstdc++ (std::regex's std::function
    # moves) once the sanitizers' instrumentation is inlined; GCC's manual warns that -fsanitize changes
    # these warnings. It stays on in the normal builds.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
    if(_tsan GREATER -1)
      # The same for -Wstringop-overflow under -fsanitize=thread (std::vector::insert of an initializer
      # list in features.cpp, "writing into a region of size 0"; GCC bug 107852 family).
      add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-stringop-overflow>)
    endif()
  endif()
  message(STATUS "Sanitizers: ${_san} (${_san_flags})")
endif()

if(SPECTRASIFT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SPECTRASIFT_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "-DCMAKE_C_COMPILER=clang (Debian: clang-14 and libclang-rt-14-dev)")
  endif()
  # Coverage instrumentation for everything; only the fuzz targets link libFuzzer's main().
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
  # Targets are resolved at generation time, so fuzz/ may name the library before src/ defines it.
  add_subdirectory(${PROJECT_SOURCE_DIR}/fuzz ${PROJECT_BINARY_DIR}/fuzz)
endif()
