# cmake -DTESTS_DIR=DIR -P tools/check_test_names.cmake
# Fails when a doctest TEST_CASE name under DIR holds a ';'. doctest_discover_tests hands each name to CTest as a
# CMake list item, so a ';' splits it into two entries that match no test case: they pass without running anything.
file(GLOB_RECURSE sources "${TESTS_DIR}/*.cpp" "${TESTS_DIR}/*.hpp")
set(bad "")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" lines REGEX "TEST_CASE\\(\"[^\"]*\\;")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    string(APPEND bad "${source}: ${line}\n")
  endforeach()
endforeach()
if(bad)
  # NOTICE prints the list as written; FATAL_ERROR wraps its text at a fixed width, which split a long path from its
  # TEST_CASE line (a clone in a deep folder failed the fixture test).
  message(NOTICE "test case names with ';' (CTest would split them and run nothing; write ',' instead):\n${bad}")
  message(FATAL_ERROR "test case names with ';' (listed above)")
endif()
