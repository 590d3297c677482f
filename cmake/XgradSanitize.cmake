# XGRAD_SANITIZE: every target of the project with ASan + UBSan, no recovery (the first report
# aborts), and xtensor's own bounds assertions. XGRAD_FUZZ adds libFuzzer's coverage
# instrumentation (clang only); the fuzz targets in tests/fuzz link libFuzzer itself.
if(XGRAD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "XGRAD_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  set(XGRAD_SANITIZE ON)
endif()
if(XGRAD_SANITIZE)
  set(xgrad_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # Debug info of line tables only (-g1): the sanitizers' reports still name file and line, and
  # the compiles take a quarter less time than with full -g (measured on a large test file: 80 s
  # -> 59 s at -O1); g++ at -Og takes 45 s. The whole sanitized build with -Og -g1: 19 min on 2
  # cores, where -O1 -g took about 45 (CI stop 42: 67 min in all); its tests 180 s against 146.
  # The fuzz targets (clang) keep -O1: a fuzzer's inputs per second are what it finds things with.
  if(XGRAD_FUZZ)
    add_compile_options(${xgrad_sanitize_flags} -O1 -g1)
  else()
    add_compile_options(${xgrad_sanitize_flags} -Og -g1)
  endif()
  add_compile_definitions(XTENSOR_ENABLE_ASSERT)
  add_link_options(${xgrad_sanitize_flags})
  if(XGRAD_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
endif()

# The installed package of a sanitized build needs the runtime in its consumers' links too.
function(xgrad_sanitize_interface target)
  if(XGRAD_SANITIZE)
    target_link_options(${target} INTERFACE ${xgrad_sanitize_flags})
  endif()
endfunction()
