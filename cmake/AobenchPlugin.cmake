# aobench_add_plugin(<name> SOURCES ... [CUDA_SOURCES ...])
# Builds libaobench_<name>.so next to the aobench binary. Plugins export only the four C symbols of
# core/plugin_api.h (AOBENCH_PLUGIN: API version, build fingerprint, factory, default config); everything else
# is hidden. The project's CUDA kernels live in plugins/common; CUDA_SOURCES is for a plugin's own.
function(aobench_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;CUDA_SOURCES" ${ARGN})
  set(srcs ${P_SOURCES})
  if(AOBENCH_WITH_CUDA AND P_CUDA_SOURCES)
    list(APPEND srcs ${P_CUDA_SOURCES})
  endif()
  # default.json (flavours) is compiled in: aobench_plugin_default_json() returns its text.
  aobench_embed_json(default_src ${CMAKE_CURRENT_SOURCE_DIR}/default.json aobench_plugin_default_json)
  # The sources are compiled once, for the module and for its test executable.
  add_library(aobench_${name}_objects OBJECT ${srcs} ${default_src})
  set_target_properties(aobench_${name}_objects PROPERTIES POSITION_INDEPENDENT_CODE ON DEFINE_SYMBOL ""
                        CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(aobench_${name}_objects PRIVATE aobench_core aobench_plugin_common)
  # AOBENCH_PLUGIN_CUDA: the plugin's CUDA kernels are compiled in (its .cpp dispatches to them).
  if(AOBENCH_WITH_CUDA AND P_CUDA_SOURCES)
    target_compile_definitions(aobench_${name}_objects PRIVATE AOBENCH_PLUGIN_CUDA=1)
  endif()
  target_precompile_headers(aobench_${name}_objects REUSE_FROM aobench_core)
  aobench_warnings(aobench_${name}_objects)
  add_library(aobench_${name} MODULE $<TARGET_OBJECTS:aobench_${name}_objects>)
  set_target_properties(aobench_${name} PROPERTIES PREFIX "lib")
  # Core and plugins/common only: anything above (trainer, metrics, registry) is a link error.
  target_link_libraries(aobench_${name} PRIVATE aobench_core aobench_plugin_common)
  target_link_options(aobench_${name} PRIVATE -Wl,--no-undefined)
  set_property(GLOBAL APPEND PROPERTY AOBENCH_PLUGINS aobench_${name})

  # Plugin-specific tests: <folder>/*_test.cpp compiled with the plugin's own sources.
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  if(AOBENCH_BUILD_TESTS AND tests)
    find_package(GTest REQUIRED)
    include(GoogleTest)
    add_executable(test_plugin_${name} ${tests} $<TARGET_OBJECTS:aobench_${name}_objects>)
    target_link_libraries(test_plugin_${name} PRIVATE aobench_test_main aobench_core aobench_plugin_common GTest::gtest)
    target_include_directories(test_plugin_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_definitions(test_plugin_${name} PRIVATE AOBENCH_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data"
                               AOBENCH_PLUGIN_DIR="${CMAKE_CURRENT_SOURCE_DIR}" AOBENCH_BINARY="$<TARGET_FILE:aobench>")
    if(AOBENCH_WITH_CUDA AND P_CUDA_SOURCES)
      target_compile_definitions(test_plugin_${name} PRIVATE AOBENCH_PLUGIN_CUDA=1)
    endif()
    target_precompile_headers(test_plugin_${name} REUSE_FROM aobench_core)
    aobench_warnings(test_plugin_${name})
    gtest_discover_tests(test_plugin_${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                         PROPERTIES ENVIRONMENT "AOBENCH_PLUGIN_PATH=${CMAKE_BINARY_DIR}")
  endif()
endfunction()
