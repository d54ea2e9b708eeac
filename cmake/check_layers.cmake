# Fails when a file includes a header of a layer above its own (docs/design-notes.md, "Layers").
#
#   cmake -DSOURCE_DIR=<tree> -P cmake/check_layers.cmake
#
# The build runs it before compiling anything (target pdist_check_layers) and ctest runs it as
# `layers`. Every file under a layer's folder may include its own layer and those listed for it;
# includes of other project folders are violations, each reported with file, line and header.
# Third-party headers (absl/, google/, Eigen/, ...) and generated ones (program.pb.h) are not
# project folders and are not checked. tools/, tests/ and benchmarks/ sit on top and are free.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake needs -DSOURCE_DIR=<source tree>")
endif()

get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)

# layer → the layers it may include (its own is always allowed). ir/models is the layer
# `models`: model builders above the IR core.
set(allowed_ir "")
set(allowed_models "ir")
set(allowed_import "ir")
set(allowed_strategy "ir")
set(allowed_passes "ir;strategy")
set(allowed_planner "ir;models;strategy;passes")
set(allowed_executor "ir")
set(allowed_engine "ir;models;import;strategy;passes;planner;executor")
set(allowed_calibration "ir;models;import;strategy;passes;planner;executor;engine")
set(project_layers ir models import strategy passes planner executor engine calibration tools tests benchmarks)

# The layer a path relative to the tree belongs to ("" for none).
function(layer_of path out)
  if(path MATCHES "^ir/models/")
    set(${out} models PARENT_SCOPE)
  elseif(path MATCHES "^([a-z]+)/")
    if(CMAKE_MATCH_1 IN_LIST project_layers)
      set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
    else()
      set(${out} "" PARENT_SCOPE)
    endif()
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(violations "")
set(checked 0)
foreach(layer ir import strategy passes planner executor engine calibration)
  file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${layer}/*.h" "${SOURCE_DIR}/${layer}/*.cc"
       "${SOURCE_DIR}/${layer}/*.cu" "${SOURCE_DIR}/${layer}/*.cuh")
  foreach(file IN LISTS files)
    layer_of("${file}" own)
    file(STRINGS "${SOURCE_DIR}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    math(EXPR checked "${checked} + 1")
    foreach(line IN LISTS lines)
      string(REGEX MATCH "\"([^\"]+)\"" _ "${line}")
      set(header "${CMAKE_MATCH_1}")
      layer_of("${header}" target)
      if(target STREQUAL "" OR target STREQUAL own OR target IN_LIST allowed_${own})
        continue()
      endif()
      set(may ${own} ${allowed_${own}})
      list(JOIN may ", " may)
      string(APPEND violations "  ${file} (layer ${own}) includes \"${header}\" (layer ${target}); "
                               "${own} may include: ${may}\n")
    endforeach()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "check_layers: no source file found under ${SOURCE_DIR}")
endif()
if(violations)
  message(FATAL_ERROR "A layer includes a layer above it (dependencies point down: docs/design-notes.md):\n"
                      "${violations}Move the code to the layer that owns it, or pass what it needs in from above.")
endif()
message(STATUS "check_layers: ${checked} files, every include points down")
