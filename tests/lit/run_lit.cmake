# Runs one lit-style test file (cmake -DTEST=file.pdir -DOPT=pdist-opt -DFILECHECK=FileCheck -P run_lit.cmake).
#
#   // RUN: pdist-opt %s --passes=autodiff                 stdout is checked: FileCheck TEST (CHECK: lines)
#   // RUN: pdist-opt %s --passes=x | FileCheck --check-prefix=X   same, with FileCheck arguments of its own
#   // RUN: pdist-opt %s --print-after-all 2>&1            stderr merged into the checked output
#   // RUN: pdist-opt %s --emit=pb -o %t                   output written to a file: nothing to check
#   // RUN-ERROR: pdist-opt %s                             must fail; stderr is checked with --check-prefix=ERR
#
# %s is the test file, %t a scratch file for this test. RUN lines run in order; the test fails
# when pdist-opt's exit status is not the expected one or when FileCheck fails.
cmake_minimum_required(VERSION 3.25)  # script mode: IN_LIST and list(POP_FRONT) need modern policies
foreach(var TEST OPT FILECHECK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_lit.cmake needs -D${var}=...")
  endif()
endforeach()

get_filename_component(name "${TEST}" NAME_WE)
set(work "${CMAKE_CURRENT_BINARY_DIR}/lit-out")
file(MAKE_DIRECTORY "${work}")
set(scratch "${work}/${name}.tmp")

# Only RUN lines: other lines may hold brackets that CMake's list handling would mangle.
file(STRINGS "${TEST}" run_lines REGEX "^[ \t]*//[ \t]*RUN(-ERROR)?:")
if(NOT run_lines)
  message(FATAL_ERROR "${TEST}: no '// RUN:' or '// RUN-ERROR:' line")
endif()

set(index 0)
foreach(line IN LISTS run_lines)
  math(EXPR index "${index} + 1")
  string(REGEX MATCH "RUN(-ERROR)?:(.*)$" _ "${line}")
  set(expect_error FALSE)
  if(CMAKE_MATCH_1)
    set(expect_error TRUE)
  endif()
  set(command "${CMAKE_MATCH_2}")

  # Split `pdist-opt ARGS | FileCheck ARGS`.
  set(check_args "")
  string(FIND "${command}" "|" bar)
  if(bar GREATER -1)
    string(SUBSTRING "${command}" 0 ${bar} opt_part)
    math(EXPR after "${bar} + 1")
    string(SUBSTRING "${command}" ${after} -1 check_part)
    separate_arguments(check_args UNIX_COMMAND "${check_part}")
    list(POP_FRONT check_args check_tool)
    if(NOT check_tool STREQUAL "FileCheck")
      message(FATAL_ERROR "${TEST}: RUN line ${index}: only '| FileCheck ...' may follow '|', got '${check_tool}'")
    endif()
    list(REMOVE_ITEM check_args "%s")
  else()
    set(opt_part "${command}")
  endif()

  separate_arguments(opt_args UNIX_COMMAND "${opt_part}")
  list(POP_FRONT opt_args tool)
  if(NOT tool STREQUAL "pdist-opt")
    message(FATAL_ERROR "${TEST}: RUN line ${index}: expected 'pdist-opt ...', got '${tool}'")
  endif()
  list(TRANSFORM opt_args REPLACE "%s" "${TEST}")
  list(TRANSFORM opt_args REPLACE "%t" "${scratch}")
  set(merge_stderr FALSE)
  if("2>&1" IN_LIST opt_args)
    set(merge_stderr TRUE)
    list(REMOVE_ITEM opt_args "2>&1")
  endif()
  set(writes_file FALSE)
  if("-o" IN_LIST opt_args)
    set(writes_file TRUE)
  endif()

  if(merge_stderr)
    execute_process(COMMAND "${OPT}" ${opt_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    set(err "${out}")
  else()
    execute_process(COMMAND "${OPT}" ${opt_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  endif()
  message(STATUS "RUN ${index}: pdist-opt ${opt_args} -> exit ${rc}")

  if(expect_error)
    if(rc EQUAL 0)
      message(FATAL_ERROR "${TEST}: RUN-ERROR line ${index}: pdist-opt succeeded but was expected to fail.\nstdout:\n${out}")
    endif()
    set(checked "${err}")
    if(NOT check_args MATCHES "--check-prefix")
      list(APPEND check_args "--check-prefix=ERR")
    endif()
  else()
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${TEST}: RUN line ${index}: pdist-opt failed (exit ${rc}):\n${err}")
    endif()
    if(writes_file AND bar EQUAL -1)
      continue()
    endif()
    set(checked "${out}")
  endif()

  set(input "${work}/${name}.${index}.out")
  file(WRITE "${input}" "${checked}")
  execute_process(COMMAND "${FILECHECK}" "${TEST}" "--input-file=${input}" ${check_args}
                  RESULT_VARIABLE check_rc OUTPUT_VARIABLE check_out ERROR_VARIABLE check_out)
  if(NOT check_rc EQUAL 0)
    message(FATAL_ERROR "${TEST}: RUN line ${index}: FileCheck failed:\n${check_out}\n--- checked output ---\n${checked}")
  endif()
endforeach()
