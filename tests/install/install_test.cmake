# `cmake --install` into a temporary prefix, then the README example (tests/install/app) built against it
# with find_package(spectrasift) (static and shared targets) and with pkg-config, and run on the sample data.
# -DBUILD_DIR (the build tree) -DSOURCE_DIR (the repository) -DWORK_DIR (scratch, emptied first)
# -DCXX (the C++ compiler) -DGENERATOR
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok\n${out}")
endfunction()

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/spectrasift/context.hpp lib/libspectrasift.a lib/libspectrasift.so bin/spectrasift
          share/spectrasift/data/box.png lib/cmake/spectrasift/spectrasiftConfig.cmake lib/pkgconfig/spectrasift.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

set(data ${SOURCE_DIR}/data)
set(args ${data}/box_in_scene.png ${data}/box.png ${data}/sandiego_plane_60.hdr)
run("configure the example" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/app -B ${WORK_DIR}/app -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
run("build the example" ${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run("run the example (static)" env SPECTRASIFT_BACKEND=cpu ${WORK_DIR}/app/example ${args})
run("run the example (shared)" env SPECTRASIFT_BACKEND=cpu ${WORK_DIR}/app/example_shared ${args})

# pkg-config, against the shared library.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs spectrasift OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs spectrasift failed")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("build the example with pkg-config" ${CXX} -O1 ${SOURCE_DIR}/tests/install/app/main.cpp ${flags}
      -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/example_pc)
  run("run the example (pkg-config)" env SPECTRASIFT_BACKEND=cpu ${WORK_DIR}/example_pc ${args})
endif()
file(REMOVE_RECURSE ${WORK_DIR})
