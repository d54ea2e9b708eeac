# The engine's pass pipeline replays in pdist-opt: pdist-export --strategy prints the pipeline
# that made a rank's program; pdist-opt runs that text on the exported model with the same
# strategy and must print the very same program.
#
#   cmake -DEXPORT=pdist-export -DOPT=pdist-opt -DSTRATEGY=s.json -DRANK=1 -DWORK=dir -P replay_pipeline.cmake
foreach(var EXPORT OPT STRATEGY RANK WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "replay_pipeline.cmake needs -D${var}=...")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK}")
set(model gpt --layers 2 --hidden 32 --heads 2 --vocab 256 --seq 16 --batch 4)
execute_process(COMMAND "${EXPORT}" ${model} -o "${WORK}/model.pb" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pdist-export of the model failed (${rc}):\n${err}")
endif()
execute_process(COMMAND "${EXPORT}" ${model} --strategy "${STRATEGY}" --rank ${RANK} --emit text
                RESULT_VARIABLE rc OUTPUT_VARIABLE exported ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pdist-export --rank ${RANK} failed (${rc}):\n${err}")
endif()
if(NOT err MATCHES "passes: ([^\n]+)")
  message(FATAL_ERROR "pdist-export printed no pipeline:\n${err}")
endif()
set(pipeline "${CMAKE_MATCH_1}")
execute_process(COMMAND "${OPT}" "${WORK}/model.pb" --strategy "${STRATEGY}" "--passes=${pipeline}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE replayed ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pdist-opt --passes=${pipeline} failed (${rc}):\n${err}")
endif()
if(NOT exported STREQUAL replayed)
  file(WRITE "${WORK}/exported.pdir" "${exported}")
  file(WRITE "${WORK}/replayed.pdir" "${replayed}")
  message(FATAL_ERROR "pdist-opt --passes=${pipeline} prints another program than pdist-export --rank ${RANK}: "
                      "compare ${WORK}/exported.pdir and ${WORK}/replayed.pdir")
endif()
string(LENGTH "${replayed}" chars)
message(STATUS "replayed ${pipeline}: the same ${chars} characters")
