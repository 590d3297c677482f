# Fails unless README contains PROGRAM's text verbatim, so the README's program is the one ctest runs.
file(READ "${README}" readme)
file(READ "${PROGRAM}" program)
string(FIND "${readme}" "${program}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} does not contain ${PROGRAM} verbatim; copy the file into the README")
endif()
