# The installed package works for a user outside the tree: `cmake --install` into a fresh prefix,
# then the C example built against it with find_package(pdist) and again with pkg-config, both
# run; libpdist.so exports only pdist_* symbols.
#   cmake -DBUILD_DIR=… -DSOURCE_DIR=… -DWORK_DIR=… -DLIBDIR=lib -DGENERATOR=Ninja -P install_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "`${cmd}` failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/pdist/c_api.h ${LIBDIR}/libpdist.so ${LIBDIR}/libpdist.so.0 ${LIBDIR}/cmake/pdist/pdistConfig.cmake
          ${LIBDIR}/pkgconfig/pdist.pc bin/pdist-train bin/pdist-export bin/pdist-plan)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

# Only the C API is exported.
run(nm -D --defined-only ${prefix}/${LIBDIR}/libpdist.so)
string(REGEX MATCHALL "[^\n]+" symbols "${out}")
set(exported 0)
foreach(line ${symbols})
  if(line MATCHES " ([A-Za-z_][A-Za-z0-9_@.]*)$")
    set(name ${CMAKE_MATCH_1})
    if(name STREQUAL "PDIST_0")
      continue()  # the version node
    endif()
    if(NOT name MATCHES "^pdist_")
      message(FATAL_ERROR "libpdist.so exports '${name}', which is not part of the C API")
    endif()
    math(EXPR exported "${exported} + 1")
  endif()
endforeach()
if(exported LESS 10)
  message(FATAL_ERROR "libpdist.so exports only ${exported} pdist_* symbols:\n${out}")
endif()

run(${prefix}/bin/pdist-export gpt --layers 1 --hidden 32 --heads 2 --vocab 256 --seq 16 --batch 4
    -o ${WORK_DIR}/model.pb)

# find_package(pdist), out of the tree.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/c_api -B ${WORK_DIR}/example -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/example)
run(${WORK_DIR}/example/train_gpt_c ${WORK_DIR}/model.pb ${SOURCE_DIR}/data/essay.txt 3)
if(NOT out MATCHES "eval loss [0-9.]+ after 3 steps")
  message(FATAL_ERROR "the example built with find_package(pdist) printed:\n${out}")
endif()

# pkg-config, with a plain compiler line.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(pkg-config --cflags --libs pdist)
separate_arguments(flags UNIX_COMMAND "${out}")
run(cc -std=c99 ${SOURCE_DIR}/examples/c_api/train_gpt.c ${flags} -o ${WORK_DIR}/train_gpt_pc)
set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
run(${WORK_DIR}/train_gpt_pc ${WORK_DIR}/model.pb ${SOURCE_DIR}/data/essay.txt 3)
if(NOT out MATCHES "eval loss [0-9.]+ after 3 steps")
  message(FATAL_ERROR "the example built with pkg-config printed:\n${out}")
endif()
# The Python package finds the installed library by itself.
if(EXISTS /usr/bin/python3)
  set(ENV{PYTHONPATH} ${prefix}/${LIBDIR}/python3/dist-packages)
  unset(ENV{LD_LIBRARY_PATH})
  unset(ENV{PDIST_LIBRARY})
  file(WRITE ${WORK_DIR}/use_pdist.py "import pdist\nprint(pdist.__version__, pdist.load('${WORK_DIR}/model.pb') is not None)\n")
  run(/usr/bin/python3 ${WORK_DIR}/use_pdist.py)
  if(NOT out MATCHES "^0\\.1\\.0 True")
    message(FATAL_ERROR "the installed Python package printed: ${out}")
  endif()
endif()
message(STATUS "installed package OK: ${exported} C API symbols; find_package and pkg-config builds ran")
