# For the ctest scripts that run a Node.js program with ONNX Runtime (run_elsewhere.cmake,
# char_gpt_serve.cmake): node_script(SCRIPT ARGS...) runs `node SCRIPT ARGS...` in WORK_DIR and
# sets node_rc, node_out and node_err; without Node.js or onnxruntime-node it prints
# "SKIPPED: ..." (the tests' SKIP_REGULAR_EXPRESSION) and returns from the calling script.
macro(node_script script)
  find_program(NODE node)
  if(NOT NODE)
    message("SKIPPED: node (Node.js) is not installed")
    return()
  endif()
  execute_process(COMMAND ${NODE} ${script} ${ARGN} WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE node_rc OUTPUT_VARIABLE node_out ERROR_VARIABLE node_err)
  if(node_err MATCHES "onnxruntime-node is not installed")
    message("SKIPPED: ${node_err}")
    return()
  endif()
endmacro()
