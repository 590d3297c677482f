# -Wall -Wextra -Werror on every target of the project (dependencies are system headers).
function(xgrad_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Werror)
endfunction()
