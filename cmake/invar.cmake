# invar_library(NAME DIR DEPS...): a static library from every .cpp in DIR.
# Files named *_avx2.cpp / *_avx512.cpp get their ISA flags; dispatch happens at run time.
function(invar_library name)
  # SOURCES: these files instead of every *.cpp of the directory; EXCLUDE: files left out;
  # PCH: headers precompiled once for the library's files (invar_pch).
  cmake_parse_arguments(A "" "" "DEPS;INCLUDES;SOURCES;EXCLUDE;PCH" ${ARGN})
  if(A_SOURCES)
    list(TRANSFORM A_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ OUTPUT_VARIABLE srcs)
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  endif()
  foreach(x ${A_EXCLUDE})
    list(REMOVE_ITEM srcs ${CMAKE_CURRENT_SOURCE_DIR}/${x})
  endforeach()
  if(NOT srcs)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${A_DEPS})
    target_include_directories(${name} INTERFACE ${A_INCLUDES})
    return()
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${INVAR_WARNINGS})
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  target_include_directories(${name} SYSTEM PUBLIC ${A_INCLUDES})
  invar_isa_flags("${srcs}")
  if(A_PCH)
    invar_pch(${name} ${A_PCH})
  endif()
endfunction()

set(INVAR_AVX2_FLAGS -mavx2 -mfma -mf16c -mprfchw)
set(INVAR_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mavx2 -mfma -mf16c -mprfchw)

function(invar_isa_flags srcs)
  foreach(f ${srcs})
    if(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${INVAR_AVX512_FLAGS}")
    elseif(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${INVAR_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()

# Sanitizer builds run several times slower: their tests get proportionally longer timeouts.
if(INVAR_SANITIZE)
  set(INVAR_TIMEOUT_SCALE 4)
else()
  set(INVAR_TIMEOUT_SCALE 1)
endif()

# Test code (not the libraries it tests, which keep the build type's flags) is compiled with -Og:
# a third less compile time than -O2 for GoogleTest/JSON-heavy files, and the tests' own loops
# are small next to the library calls they make. Files built for one ISA (*_avx2.cpp,
# *_avx512.cpp) instantiate numerics code and keep the build's optimisation (GCC 12 also warns
# about its own intrinsics headers at -Og): their -O comes after the target's -Og and wins.
if(INVAR_SANITIZE)
  set(INVAR_ISA_TEST_OPT -O1)
else()
  set(INVAR_ISA_TEST_OPT -O2)
endif()

# Precompiled headers (CI time, issue 20): the third-party headers that dominate compile time
# (CLI11 ~7 s per file, Boost.Beast ~4.5 s, GoogleTest and nlohmann/json ~2.3 s each, measured
# on 2 cores) are parsed once per target instead of once per file. Files built for one ISA keep
# their own flags, which a precompiled header must match, so they parse the headers themselves.
function(invar_pch target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
  invar_pch_skip_isa(${target})
endfunction()

function(invar_pch_skip_isa target)
  get_target_property(srcs ${target} SOURCES)
  foreach(f ${srcs})
    if(f MATCHES "_avx(2|512)\\.cpp$")
      set_source_files_properties(${f} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()

# Every test executable compiles with the same flags, so they share one precompiled header
# (invar_test_pch, tests/CMakeLists.txt): GoogleTest, nlohmann/json and the cpp-httplib client,
# whose feature defines every test therefore carries.
function(invar_test_target name)
  cmake_parse_arguments(A "" "" "SOURCES" ${ARGN})
  target_compile_options(${name} PRIVATE ${INVAR_WARNINGS} -Og)
  foreach(f ${A_SOURCES})
    if(f MATCHES "_avx(2|512)\\.cpp$")
      set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS ${INVAR_ISA_TEST_OPT})
    endif()
  endforeach()
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main nlohmann_json::nlohmann_json
                        PkgConfig::INVAR_TEST_HTTPLIB)
  target_compile_definitions(${name} PRIVATE
    INVAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    INVAR_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    INVAR_BINARY_DIR="${PROJECT_BINARY_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_precompile_headers(${name} REUSE_FROM invar_test_pch)
  invar_pch_skip_isa(${name})
endfunction()

# invar_test(NAME SOURCES... LIBS ... [LABELS ...]): a GoogleTest executable registered with CTest.
function(invar_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_LIBS})
  invar_isa_flags("${A_SOURCES}")
  invar_test_target(${name} SOURCES ${A_SOURCES})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  math(EXPR timeout "${A_TIMEOUT} * ${INVAR_TIMEOUT_SCALE}")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout})
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
  foreach(label ${A_LABELS})
    invar_label_target(${label} ${name})
  endforeach()
endfunction()

# invar_label_target(LABEL TARGET): TARGET is built by `tests-LABEL`, the target that builds every
# executable the tests labelled LABEL run (a sanitizer run builds only those; tests/CMakeLists.txt).
function(invar_label_target label target)
  set_property(GLOBAL APPEND PROPERTY INVAR_TEST_LABELS ${label})
  set_property(GLOBAL APPEND PROPERTY INVAR_TEST_TARGETS_${label} ${target})
endfunction()
