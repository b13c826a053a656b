# aobench_embed_json(<out_var> <json_file> <c_symbol>): compiles a JSON file into a C function returning
# its text, so the binary and plugins carry their defaults wherever they are copied.
function(aobench_embed_json out_var json_file symbol)
  file(READ ${json_file} EMBED_CONTENT)
  set(EMBED_SOURCE ${json_file})
  set(EMBED_SYMBOL ${symbol})
  get_filename_component(_name ${json_file} NAME_WE)
  string(MD5 _h ${json_file})
  set(out ${CMAKE_BINARY_DIR}/generated/${symbol}_${_h}.cpp)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/embed_json.cpp.in ${out} @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${json_file})
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
