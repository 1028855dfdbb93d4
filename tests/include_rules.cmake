# Include rules of DESIGN.md "Layout" and "Backends and devices", run as a test:
#   cmake -DSOURCE_DIR=<repository root> -P tests/include_rules.cmake
# - a backend folder src/backend/<x>/ includes core's contract headers, src/numeric/ and its own folder,
#   never another backend's folder ("backend/<y>/...") and never core's dispatch (core/dispatch.hpp);
# - the public headers include/ include no CUDA or OpenCL header and nothing of src/.
# Fails with one line per offending include.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "include_rules.cmake: pass -DSOURCE_DIR=<repository root>")
endif()
set(_violations "")
set(_scanned 0)

# Appends to _violations every #include line of `file` that matches `regex`, with `why`.
function(check_includes file regex why)
  file(STRINGS "${file}" _lines REGEX "^[ \t]*#[ \t]*include")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "${regex}")
      file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${file}")
      string(STRIP "${_line}" _line)
      set(_violations "${_violations}\n  ${_rel}: ${_line}  (${why})" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

file(GLOB _backends LIST_DIRECTORIES true "${SOURCE_DIR}/src/backend/*")
foreach(_dir IN LISTS _backends)
  if(NOT IS_DIRECTORY "${_dir}")
    continue()
  endif()
  get_filename_component(_self "${_dir}" NAME)
  file(GLOB_RECURSE _files "${_dir}/*")
  foreach(_f IN LISTS _files)
    math(EXPR _scanned "${_scanned} + 1")
    check_includes("${_f}" "[\"<]core/dispatch\\.hpp[\">]" "a backend never includes core's dispatch")
    file(STRINGS "${_f}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]backend/[^/\">]+/")
    foreach(_line IN LISTS _lines)
      string(REGEX MATCH "backend/([^/\">]+)/" _m "${_line}")
      if(NOT CMAKE_MATCH_1 STREQUAL _self)
        file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${_f}")
        string(STRIP "${_line}" _line)
        set(_violations "${_violations}\n  ${_rel}: ${_line}  (backend '${_self}' includes backend '${CMAKE_MATCH_1}')")
      endif()
    endforeach()
  endforeach()
endforeach()

file(GLOB_RECURSE _public "${SOURCE_DIR}/include/*")
foreach(_f IN LISTS _public)
  math(EXPR _scanned "${_scanned} + 1")
  check_includes("${_f}" "[\"<](cuda|cuda_runtime|cublas|cublas_v2|CL/|OpenCL/)"
                 "public headers include no CUDA or OpenCL header")
  check_includes("${_f}" "[\"<](backend|core|numeric|io)/" "public headers include nothing of src/")
endforeach()

if(_scanned LESS 10)
  message(FATAL_ERROR "include_rules.cmake: only ${_scanned} files found under ${SOURCE_DIR}: wrong SOURCE_DIR?")
endif()
if(_violations)
  message(FATAL_ERROR "include rules broken:${_violations}")
endif()
message(STATUS "include rules hold (${_scanned} files)")
