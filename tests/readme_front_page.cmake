# Fails unless README.md (DOC) stays a front page: at most MAX_BYTES bytes, its "## Quick start"
# heading within the first 30 lines with the two set-up commands after it, and every page of the
# repository it links to present (SOURCE_DIR is the repository).
file(READ "${DOC}" doc)
string(REPLACE ";" "," doc "${doc}")  # a CMake list separator: none in what is searched below
string(LENGTH "${doc}" bytes)
if(bytes GREATER MAX_BYTES)
  message(FATAL_ERROR "${DOC} is ${bytes} bytes, more than ${MAX_BYTES}: move the details to a docs/ page and link it")
endif()
string(FIND "${doc}" "\n## Quick start\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC}: no \"## Quick start\" heading")
endif()
string(SUBSTRING "${doc}" 0 ${at} before)
string(REGEX REPLACE "[^\n]" "" newlines "${before}")
string(LENGTH "${newlines}" line)
math(EXPR line "${line} + 2")  # the heading's line, counted from 1
if(line GREATER 30)
  message(FATAL_ERROR "${DOC}: \"## Quick start\" is on line ${line}, not within the first 30")
endif()
foreach(command "./tools/setup run" "./tools/setup test")
  string(FIND "${doc}" "\n${command}" found)
  if(found EQUAL -1 OR found LESS at)
    message(FATAL_ERROR "${DOC}: the Quick start lacks the command `${command}`")
  endif()
endforeach()
# Markdown links "](path)" and "](path#part)" to files here (no scheme); matched from the "(": a
# "]" in a CMake list element would group elements.
string(REGEX MATCHALL "\\]\\([^):#]+[)#]" matches "${doc}")
string(REPLACE "](" "(" links "${matches}")
foreach(link IN LISTS links)
  string(REGEX REPLACE "^\\(([^):#]+)[)#]$" "\\1" path "${link}")
  if(NOT EXISTS "${SOURCE_DIR}/${path}")
    message(FATAL_ERROR "${DOC} links to ${path}, which is not there")
  endif()
endforeach()
list(LENGTH links count)
message(STATUS "${DOC}: ${bytes} bytes (at most ${MAX_BYTES}), Quick start on line ${line}, ${count} links to files here, all present")
