# One place for warning flags: -Wall -Wextra clean on our code, and -Werror keeps it so (AOBENCH_WERROR=OFF
# to build with a compiler that warns about something new). Torch/Boost headers are SYSTEM includes.
option(AOBENCH_WERROR "Treat warnings in the project's own code as errors" ON)
# CUDA sources get the same host-compiler warnings through nvcc, and nvcc's own (--Werror all-warnings).
function(aobench_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
                         $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  if(AOBENCH_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                           $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Werror>)
  endif()
endfunction()
