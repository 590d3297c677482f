# docs/tour.md's "Run it elsewhere", its commands as written: xgrad export and xgrad onnx print the line
# the page shows, and tools/ort_run.js runs the model in ONNX Runtime within tolerance of the
# graph file's values (exit 0). Skipped ("SKIPPED:") without Node.js or onnxruntime-node.
# -DXGRAD=... -DSOURCE_DIR=... -DWORK_DIR=...
include(${CMAKE_CURRENT_LIST_DIR}/node_script.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${XGRAD} export --shape 128,128,64,64 --seed 1 --dtype float64 -o attention.json
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "xgrad export exited ${rc}: ${err}")
endif()
execute_process(COMMAND ${XGRAD} onnx attention.json -o attention.onnx
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${SOURCE_DIR}/docs/tour.md readme)
string(FIND "${readme}" "$ xgrad onnx attention.json -o attention.onnx\n${out}" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "xgrad onnx exited ${rc} and printed, not as docs/tour.md shows:\n${out}${err}")
endif()
node_script(${SOURCE_DIR}/tools/ort_run.js attention.onnx --graph attention.json --runs 3)
if(NOT node_rc EQUAL 0 OR NOT node_out MATCHES "grad_v \\(128, 64\\): worst error [0-9.]+e-1[5-9]")
  message(FATAL_ERROR "tools/ort_run.js exited ${node_rc}:\n${node_out}${node_err}")
endif()
message("${node_out}")
