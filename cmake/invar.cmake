# Sanitizer builds: the target is compiled at INVAR_SANITIZE_IO_OPT (CMakeLists.txt): the I/O
# layers and the cache's bookkeeping (docs/build.md says which layers keep -O1, and why).
function(invar_sanitize_io_layer target)
  if(INVAR_SANITIZE)
    target_compile_options(${target} PRIVATE ${INVAR_SANITIZE_IO_OPT})
  endif()
endfunction()

# invar_library(NAME DIR DEPS...): a static library from every .cpp in DIR.
# Files named *_avx2.cpp / *_avx512.cpp get their ISA flags; dispatch happens at run time.
function(invar_library name)
  # SOURCES: these files instead of every *.cpp of the directory; SUBDIRS: the *.cpp of these
  # subfolders too; EXCLUDE: files left out; PCH: headers precompiled once for the library's files
  # (invar_pch); NO_UNITY: files compiled on their own in a unity build (invar_unity).
  cmake_parse_arguments(A "" "" "DEPS;INCLUDES;SOURCES;SUBDIRS;EXCLUDE;PCH;NO_UNITY" ${ARGN})
  if(A_SOURCES)
    list(TRANSFORM A_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ OUTPUT_VARIABLE srcs)
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  endif()
  foreach(d ${A_SUBDIRS})
    file(GLOB sub CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${d}/*.cpp)
    list(APPEND srcs ${sub})
  endforeach()
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
  list(TRANSFORM A_NO_UNITY PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  invar_unity(${name} ${A_NO_UNITY})
endfunction()

# Unity builds (CI time, issue 20): a target's files are compiled in batches of
# INVAR_UNITY_BATCH, one translation unit each, so the templates and inline functions of the
# heavy headers (nlohmann/json, CLI11, the standard library) are instantiated and optimised once
# per batch instead of once per file: src/probe's 11 files took 45 s of CPU apart and 17 s as one
# unit (GCC 12, -O2). Batches of 16 rather than 8: the whole release tree 743 → 700 s of CPU
# (ISA files, which stay apart, included), two batches of server tests 46.8 s apart and 40.0 s as
# one. Files built for one ISA keep their own flags and stay apart, as do the files given (names
# in an anonymous namespace that another file of the target also defines).
option(INVAR_UNITY_BUILD "compile each library and the invar binary in unity batches" ON)
set(INVAR_UNITY_BATCH 16 CACHE STRING "files per unity translation unit")
# A unity batch #includes its .cpp files, so GCC takes each for a header and warns about a class
# whose member has a type of the file's anonymous namespace (a real ODR hazard only in headers).
if(INVAR_UNITY_BUILD)
  list(APPEND INVAR_WARNINGS -Wno-subobject-linkage)
endif()
function(invar_unity target)
  if(NOT INVAR_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${INVAR_UNITY_BATCH})
  invar_isa_sources_set(${target} SKIP_UNITY_BUILD_INCLUSION)
  foreach(f ${ARGN})
    set_source_files_properties(${f} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
endfunction()

set(INVAR_AVX2_FLAGS -mavx2 -mfma -mf16c -mprfchw)
set(INVAR_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mavx2 -mfma -mf16c -mprfchw)

function(invar_isa_flags srcs)
  foreach(f ${srcs})
    if(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${INVAR_AVX512_FLAGS};${INVAR_SANITIZE_ISA_OPT}")
    elseif(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${INVAR_AVX2_FLAGS};${INVAR_SANITIZE_ISA_OPT}")
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
# *_avx512.cpp) instantiate numerics code and keep the build's ISA optimisation (GCC 12 also warns
# about its own intrinsics headers at -Og): their -O comes after the target's -Og and wins.
# The sanitizer trees compile test code at -O0 (INVAR_TEST_OPT): their compile is CI's largest
# part, and a GoogleTest/JSON unity file of tests/server took 37.6 s at -Og and 30.0 s at -O0
# under ASan (docs/build.md).
if(INVAR_SANITIZE)
  set(INVAR_ISA_TEST_OPT ${INVAR_SANITIZE_ISA_OPT})
  set(INVAR_TEST_OPT -O0)
else()
  set(INVAR_ISA_TEST_OPT -O2)
  set(INVAR_TEST_OPT -Og)
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
  invar_isa_sources_set(${target} SKIP_PRECOMPILE_HEADERS)
endfunction()

# Sets the boolean source property PROPERTY on each of target's files built for one ISA.
function(invar_isa_sources_set target property)
  get_target_property(srcs ${target} SOURCES)
  foreach(f ${srcs})
    if(f MATCHES "_avx(2|512)\\.cpp$")
      set_source_files_properties(${f} PROPERTIES ${property} ON)
    endif()
  endforeach()
endfunction()

# Every test executable compiles with the same flags, so they share one precompiled header
# (invar_test_pch, tests/CMakeLists.txt): GoogleTest, nlohmann/json and the cpp-httplib client,
# whose feature defines every test therefore carries. An executable gets the tests' own main
# (tests/gtest_source_main.cpp, compiled once per tree as invar_test_main: a skipped test exits
# with the status CTest reports as skipped); MAIN: its sources already hold that main.
function(invar_test_target name)
  cmake_parse_arguments(A "MAIN" "" "SOURCES" ${ARGN})
  target_compile_options(${name} PRIVATE ${INVAR_WARNINGS} ${INVAR_TEST_OPT})
  invar_test_isa_sources(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE GTest::gtest nlohmann_json::nlohmann_json
                        PkgConfig::INVAR_TEST_HTTPLIB)
  get_target_property(type ${name} TYPE)
  if(type STREQUAL "EXECUTABLE" AND NOT A_MAIN)
    target_sources(${name} PRIVATE $<TARGET_OBJECTS:invar_test_main>)
  endif()
  target_compile_definitions(${name} PRIVATE _FILE_OFFSET_BITS=64
    INVAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    INVAR_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    INVAR_BINARY_DIR="${PROJECT_BINARY_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_precompile_headers(${name} REUSE_FROM invar_test_pch)
endfunction()

# A test target's files built for one ISA: their ISA flags and optimisation after the target's
# -Og, and neither the shared precompiled header (other flags) nor a unity batch.
function(invar_test_isa_sources target)
  invar_isa_flags("${ARGN}")
  foreach(f ${ARGN})
    if(f MATCHES "_avx(2|512)\\.cpp$")
      set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS ${INVAR_ISA_TEST_OPT})
      set_source_files_properties(${f} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
                                  SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()

# invar_test(NAME SOURCES... LIBS ... [TIMEOUT s] [LABELS ...] [IN EXE]): GoogleTest tests
# registered with CTest as NAME. Alone, NAME is its own executable. With IN, the sources join
# the test executable EXE of this directory (created by its first test), compiled in unity
# batches (CI time: GoogleTest, json and cpp-httplib are instantiated and optimised once a batch,
# not once a file), and NAME runs `EXE --source=FILE...`: only the tests of its own files, with
# its own timeout and labels. Target-level settings (dependencies, definitions) go on EXE.
# NO_UNITY: the files compile on their own (their file-scope `using` declarations and
# directives would clash with the other files of a batch).
function(invar_test name)
  cmake_parse_arguments(A "NO_UNITY" "TIMEOUT;IN" "SOURCES;LIBS;LABELS" ${ARGN})
  # The sanitizer trees never run soak tests (`make test-asan` / `test-tsan` exclude the label):
  # they do not compile them either.
  if(INVAR_SANITIZE AND "soak" IN_LIST A_LABELS)
    return()
  endif()
  if(A_IN)
    set(exe ${A_IN})
    if(NOT TARGET ${exe})
      add_executable(${exe} $<TARGET_OBJECTS:invar_test_main>)
      invar_test_target(${exe} MAIN)
      if(INVAR_UNITY_BUILD)
        set_target_properties(${exe} PROPERTIES UNITY_BUILD ON
                              UNITY_BUILD_BATCH_SIZE ${INVAR_UNITY_BATCH})
      endif()
    endif()
    target_sources(${exe} PRIVATE ${A_SOURCES})
    if(A_NO_UNITY)
      set_source_files_properties(${A_SOURCES} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
    target_link_libraries(${exe} PRIVATE ${A_LIBS})
    invar_test_isa_sources(${exe} ${A_SOURCES})
    set(args)
    foreach(f ${A_SOURCES})
      get_filename_component(base ${f} NAME)
      list(APPEND args --source=${base})
    endforeach()
    add_test(NAME ${name} COMMAND ${exe} ${args})
  else()
    set(exe ${name})
    add_executable(${exe} ${A_SOURCES})
    # An executable only soak tests run is built by `make soak` (target tests-soak), not by
    # `make test`, which never runs it.
    if("soak" IN_LIST A_LABELS)
      set_target_properties(${exe} PROPERTIES EXCLUDE_FROM_ALL ON)
    endif()
    target_link_libraries(${exe} PRIVATE ${A_LIBS})
    invar_test_target(${exe} SOURCES ${A_SOURCES})
    add_test(NAME ${name} COMMAND ${exe})
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  math(EXPR timeout "${A_TIMEOUT} * ${INVAR_TIMEOUT_SCALE}")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout})
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
  foreach(label ${A_LABELS})
    invar_label_target(${label} ${exe})
  endforeach()
endfunction()

# Every test of the calling directory, GoogleTest or not, reads exit status 77 as "skipped": a
# test exits 77 when it skipped something and failed nothing (tests/gtest_source_main.cpp; the
# scripts and node drivers follow the same convention), so CTest reports it as skipped instead of
# passed and `.ci/run` fails on a skip it does not expect. Called last in each tests/ directory
# (tests_skip_code checks that none is missed).
function(invar_tests_skip_code)
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(tests)
    set_tests_properties(${tests} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()

# invar_label_target(LABEL TARGET): TARGET is built by `tests-LABEL`, the target that builds every
# executable the tests labelled LABEL run (a sanitizer run builds only those; tests/CMakeLists.txt).
function(invar_label_target label target)
  set_property(GLOBAL APPEND PROPERTY INVAR_TEST_LABELS ${label})
  set_property(GLOBAL APPEND PROPERTY INVAR_TEST_TARGETS_${label} ${target})
endfunction()

# invar_clang_fuzzer(NAME CLANGXX DRIVER SOURCES...): a libFuzzer binary built by clang with ASan
# and UBSan (the main compiler is g++). The driver compiles on its own; the sources compile in
# unity batches of INVAR_UNITY_BATCH, in the order given (CI time: the chat fuzzer's 19 files,
# each parsing nlohmann/json under clang's sanitizers, took 117 s of CPU with the GGUF fuzzer's
# seven apart; the batches follow the libraries' own, which the g++ unity build already keeps
# free of name clashes). Header dependencies come from clang's depfiles, so a batch recompiles
# when any file in it changes.
function(invar_clang_fuzzer name clangxx driver)
  set(flags -std=c++20 -O1 -g -ffp-contract=off -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined -I${PROJECT_SOURCE_DIR}/src)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name}.dir)
  set(units ${driver})
  set(batch)
  set(n 0)
  foreach(src ${ARGN} "")
    if(src)
      string(APPEND batch "#include \"${src}\"\n")
      math(EXPR n "${n} + 1")
    endif()
    if(batch AND (n EQUAL INVAR_UNITY_BATCH OR NOT src))
      list(LENGTH units i)
      file(CONFIGURE OUTPUT ${dir}/unity_${i}.cpp CONTENT "${batch}")
      list(APPEND units ${dir}/unity_${i}.cpp)
      set(batch)
      set(n 0)
    endif()
  endforeach()
  set(objs)
  foreach(src ${units})
    get_filename_component(stem ${src} NAME_WE)
    set(obj ${dir}/${stem}.o)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${clangxx} ${flags} -MD -MF ${obj}.d -c ${src} -o ${obj}
      DEPENDS ${src}
      DEPFILE ${obj}.d
      COMMENT "Building ${name}: ${stem} with clang (libFuzzer, ASan, UBSan)"
      VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${name}
    COMMAND ${clangxx} ${flags} ${objs} -o ${CMAKE_CURRENT_BINARY_DIR}/${name}
    DEPENDS ${objs}
    COMMENT "Linking ${name}"
    VERBATIM)
  add_custom_target(${name}_build ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${name})
endfunction()
