# One place for warning flags: -Wall -Wextra clean on our code; Torch/Boost headers are SYSTEM includes.
function(aobench_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()
