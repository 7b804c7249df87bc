# libFuzzer targets. libFuzzer ships with clang only (Debian: clang-14 and libclang-rt-14-dev),
# while the main build is GCC, so a fuzz target is compiled here by clang++ directly: one custom
# command per source (so an edit rebuilds one object), the library sources it exercises compiled
# into it, everything instrumented with -fsanitize=fuzzer,address,undefined. Without a working
# clang++ and libFuzzer runtime the targets are skipped with a message; nothing else needs them.

find_program(RF_CLANGXX NAMES clang++-14 clang++ DOC "clang++ for the libFuzzer targets")
if(RF_CLANGXX AND NOT DEFINED RF_LIBFUZZER_WORKS)
  # Link a trivial fuzz target: finding clang++ does not mean its sanitizer runtimes are installed.
  set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/rf_libfuzzer_probe)
  file(WRITE ${probe_dir}/probe.cpp
       "#include <cstddef>\n#include <cstdint>\n"
       "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${RF_CLANGXX} -fsanitize=fuzzer,address,undefined ${probe_dir}/probe.cpp -o ${probe_dir}/probe
                  RESULT_VARIABLE probe_result OUTPUT_QUIET ERROR_QUIET)
  if(probe_result EQUAL 0)
    set(RF_LIBFUZZER_WORKS ON CACHE BOOL "clang++ links -fsanitize=fuzzer,address,undefined")
  else()
    set(RF_LIBFUZZER_WORKS OFF CACHE BOOL "clang++ links -fsanitize=fuzzer,address,undefined")
  endif()
endif()
if(RF_CLANGXX AND RF_LIBFUZZER_WORKS)
  message(STATUS "Fuzz targets: built with ${RF_CLANGXX}")
else()
  message(STATUS "Fuzz targets: SKIPPED (needs clang++ with libFuzzer: apt-get install clang libclang-rt-14-dev)")
endif()

# rf_add_fuzz_test(<name> LABEL <label> SOURCES <files...> CORPUS <seed dir> [DICT <file>] [SECONDS <n>]
#                  [LIBS <link items...>])
# Builds <name> from SOURCES (absolute paths; the one defining LLVMFuzzerTestOneInput among them), linked
# with fmt and LIBS (imported targets or plain link flags such as -lpcre2-8; the libraries themselves are
# not instrumented), and adds a CTest test that fuzzes from the CORPUS seeds for SECONDS seconds (default
# 60), or $RF_FUZZ_SECONDS when set (see run_fuzz_test.sh).
function(rf_add_fuzz_test name)
  cmake_parse_arguments(F "" "LABEL;CORPUS;DICT;SECONDS" "SOURCES;LIBS" ${ARGN})
  if(NOT F_SECONDS)
    set(F_SECONDS 60)
  endif()
  if(NOT (RF_CLANGXX AND RF_LIBFUZZER_WORKS))
    return()
  endif()
  # -O0: the instrumented objects compile in 60% of -O1's time (21 -> 12 s for char_tokenizer.cpp; 290 s of the
  # build's CPU at -O1), and a target fuzzes for a fixed few seconds in the suite, so fewer executions is the
  # whole cost. Line tables are all a report's file:line needs (full -g costs a third more compile time).
  set(flags -std=c++20 -O0 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined
      -fno-sanitize-recover=all)
  set(compile_flags ${flags} -fsanitize=fuzzer-no-link -Wall -Wextra -I${PROJECT_SOURCE_DIR}/src)
  foreach(dep fmt::fmt nlohmann_json::nlohmann_json yaml-cpp)
    # Definitions can be generator expressions (nlohmann's are), so -D is added at generation time.
    get_target_property(defs ${dep} INTERFACE_COMPILE_DEFINITIONS)
    foreach(def IN LISTS defs)
      list(APPEND compile_flags "$<$<BOOL:${def}>:-D${def}>")
    endforeach()
    # The default system folder is left out: naming it with -I would reorder libstdc++'s #include_next.
    get_target_property(dirs ${dep} INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS dirs)
      if(dir AND NOT dir STREQUAL "/usr/include")
        list(APPEND compile_flags -isystem ${dir})
      endif()
    endforeach()
  endforeach()

  # Outputs go under fuzz/: a file named like the target beside it would clash in Ninja. A source several
  # targets instrument (the core files, the JSON reader) is compiled once: its object is shared, which is
  # why every target is defined from one folder (tests/fuzz_targets.cmake).
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz/objects)
  set(objects)
  foreach(src IN LISTS F_SOURCES)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    string(REPLACE "/" "_" stem ${rel})
    set(obj ${out_dir}/${stem}.o)
    get_property(built DIRECTORY PROPERTY RF_FUZZ_OBJECTS)
    if(NOT obj IN_LIST built)
      add_custom_command(OUTPUT ${obj}
        COMMAND ${RF_CLANGXX} ${compile_flags} -MD -MF ${obj}.d -c ${src} -o ${obj}
        DEPENDS ${src} DEPFILE ${obj}.d
        COMMENT "Building fuzz object ${rel} (clang++)" VERBATIM COMMAND_EXPAND_LISTS)
      set_property(DIRECTORY APPEND PROPERTY RF_FUZZ_OBJECTS ${obj})
    endif()
    list(APPEND objects ${obj})
  endforeach()
  set(exe ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name})
  set(link_items $<TARGET_LINKER_FILE:fmt::fmt>)
  foreach(lib IN LISTS F_LIBS)
    if(TARGET ${lib})
      list(APPEND link_items $<TARGET_LINKER_FILE:${lib}>)
    else()
      list(APPEND link_items ${lib})
    endif()
  endforeach()
  add_custom_command(OUTPUT ${exe}
    COMMAND ${RF_CLANGXX} ${flags} -fsanitize=fuzzer ${objects} ${link_items} -o ${exe}
    DEPENDS ${objects}
    COMMENT "Linking fuzz target ${name} (clang++)" VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${exe})

  set(extra_args)
  if(F_DICT)
    list(APPEND extra_args -dict=${F_DICT})
  endif()
  add_test(NAME ${name}
    COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/run_fuzz_test.sh
            ${exe} ${F_CORPUS} ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name}.work ${F_SECONDS} ${extra_args})
  set_tests_properties(${name} PROPERTIES LABELS ${F_LABEL})
endfunction()
