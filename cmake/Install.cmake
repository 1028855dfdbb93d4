# `cmake --install`: headers, libspectrasift.a (+ .so), the CLI and its sample data, a CMake package
# (find_package(spectrasift) -> spectrasift::spectrasift, the static library, and spectrasift::spectrasift_shared)
# and a pkg-config file. The package's config finds the static library's private dependencies itself
# (spectrasiftConfig.cmake.in), so a user links one target and lists no transitive library.
include(CMakePackageConfigHelpers)

set(SPECTRASIFT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/spectrasift)
set(_targets spectrasift)
if(TARGET spectrasift_shared)
  list(APPEND _targets spectrasift_shared)
endif()
install(TARGETS ${_targets} EXPORT spectrasiftTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/spectrasift DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS spectrasift_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The demo looks for BIN/../share/spectrasift/data (apps/spectrasift/demo.cpp).
foreach(f IN LISTS SPECTRASIFT_DATA_FILES)
  install(FILES ${PROJECT_SOURCE_DIR}/data/${f} DESTINATION ${CMAKE_INSTALL_DATADIR}/spectrasift/data)
endforeach()

install(EXPORT spectrasiftTargets NAMESPACE spectrasift:: DESTINATION ${SPECTRASIFT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/spectrasiftConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/spectrasiftConfig.cmake INSTALL_DESTINATION ${SPECTRASIFT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/spectrasiftConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/spectrasiftConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/spectrasiftConfigVersion.cmake
  DESTINATION ${SPECTRASIFT_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs spectrasift` (the shared library) or `--static` (the archive and
# every dependency). The prefix is found from the .pc file's own place, so an installed tree can move.
set(_pc_requires "libpng libjpeg")
set(_pc_libs_private "")
if(SPECTRASIFT_HAVE_TIFF)
  string(APPEND _pc_requires " libtiff-4")
endif()
if(SPECTRASIFT_HAVE_OPENCL)
  string(APPEND _pc_requires " OpenCL")
endif()
if(SPECTRASIFT_HAVE_CUDA)
  string(APPEND _pc_libs_private " -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart")
endif()
if(SPECTRASIFT_HAVE_GDAL)
  string(APPEND _pc_requires " gdal")
endif()
set(SPECTRASIFT_PC_REQUIRES_PRIVATE ${_pc_requires})
set(SPECTRASIFT_PC_LIBS_PRIVATE ${_pc_libs_private})
configure_file(${PROJECT_SOURCE_DIR}/cmake/spectrasift.pc.in ${CMAKE_CURRENT_BINARY_DIR}/spectrasift.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/spectrasift.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
