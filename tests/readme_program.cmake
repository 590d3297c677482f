# Fails unless DOC (README.md or a docs/ page) shows PROGRAM's text verbatim as one ```cpp block,
# so the program a reader copies from the documentation is the one ctest builds and runs.
file(READ "${DOC}" doc)
file(READ "${PROGRAM}" program)
string(FIND "${doc}" "```cpp\n${program}```\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} does not show ${PROGRAM} verbatim as a ```cpp block; copy the file into it")
endif()
