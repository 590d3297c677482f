# docs/tour.md's "Run it elsewhere": char_gpt --onnx writes its trained model, and
# examples/serve_char_gpt.js serves it in ONNX Runtime, which must print the very text that
# char_gpt --sample printed (float64: logits within 1e-15, hence the same draws of the same
# generator). Skipped ("SKIPPED:") without Node.js or onnxruntime-node.
# -DCHAR_GPT=... -DSOURCE_DIR=... -DWORK_DIR=...
include(${CMAKE_CURRENT_LIST_DIR}/node_script.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${CHAR_GPT} --layers 2 --heads 2 --d-model 32 --block 16 --batch 4 --steps 20
                        --eval-every 20 --eval-batches 2 --dtype float64 --sample 120 --onnx ${WORK_DIR}/served.onnx
                WORKING_DIRECTORY ${WORK_DIR} OUTPUT_VARIABLE trained ERROR_VARIABLE trained_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "char_gpt exited ${rc}:\n${trained}${trained_err}")
endif()
node_script(${SOURCE_DIR}/examples/serve_char_gpt.js ${WORK_DIR}/served.onnx --chars 120)
set(served "${node_out}")
if(NOT node_rc EQUAL 0 OR served STREQUAL "")
  message(FATAL_ERROR "serve_char_gpt.js exited ${node_rc}:\n${served}${node_err}")
endif()
string(FIND "${trained}" "${served}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "ONNX Runtime served other text than char_gpt sampled:\nchar_gpt:\n${trained}\nserved:\n${served}")
endif()
message("char_gpt and ONNX Runtime sampled the same 120 characters:\n${served}")
