# examples/python/char_gpt.py against examples/char_gpt: the same settings and seed give the same
# evaluation lines (step, train and val loss to the 4 decimals both print, lr), in float32 and
# float64. -DPYTHON= -DCHAR_GPT= -DSOURCE_DIR=
set(args --layers 2 --heads 2 --d-model 32 --block 16 --batch 4 --steps 40 --warmup 5 --lr 3e-3 --eval-every 10
         --eval-batches 2 --seed 5)
foreach(dtype float32 float64)
  execute_process(COMMAND ${CHAR_GPT} ${args} --dtype ${dtype} RESULT_VARIABLE rc_cpp OUTPUT_VARIABLE out_cpp ERROR_VARIABLE err_cpp)
  execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/examples/python/char_gpt.py ${args} --dtype ${dtype}
                  RESULT_VARIABLE rc_py OUTPUT_VARIABLE out_py ERROR_VARIABLE err_py)
  if(NOT rc_cpp EQUAL 0 OR NOT rc_py EQUAL 0)
    message(FATAL_ERROR "char_gpt exited ${rc_cpp}, char_gpt.py ${rc_py}:\n${out_cpp}${err_cpp}\n${out_py}${err_py}")
  endif()
  set(line "step +[0-9]+  train [0-9.]+  val [0-9.]+  lr [0-9.e+-]+")
  string(REGEX MATCHALL "${line}" steps_cpp "${out_cpp}")
  string(REGEX MATCHALL "${line}" steps_py "${out_py}")
  list(LENGTH steps_cpp n)
  if(NOT n EQUAL 5 OR NOT steps_cpp STREQUAL steps_py)
    message(FATAL_ERROR "${dtype}: the evaluations differ (C++ left, Python right):\n${out_cpp}\n${out_py}")
  endif()
  message(STATUS "${dtype}: the same ${n} evaluations:\n${out_py}")
endforeach()
