# Fails when the library archive LIB defines a symbol of the measurement hooks (namespace ...::bench:: of a
# backend, or a hook's name): they belong to spectrasift_bench_hooks, which only tests and benchmarks link.
# Run by CTest: cmake -DNM=<nm> -DLIB=<libspectrasift.a> -P no_bench_symbols.cmake
if(NOT NM OR NOT LIB)
  message(FATAL_ERROR "usage: cmake -DNM=<nm> -DLIB=<archive> -P no_bench_symbols.cmake")
endif()
execute_process(COMMAND ${NM} -C --defined-only ${LIB} OUTPUT_VARIABLE syms RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR syms STREQUAL "")
  message(FATAL_ERROR "nm could not read ${LIB}")
endif()
string(REGEX MATCHALL "[^\n]*(::bench::|set_pack_policy|resident_compute_ms|last_pack_ratio|pinned_upload_ms|device_copy_gbps)[^\n]*" hits "${syms}")
if(hits)
  list(JOIN hits "\n" text)
  message(FATAL_ERROR "bench-only symbols in ${LIB}:\n${text}")
endif()
message(STATUS "no bench-only symbol in ${LIB}")
