# cmake -DSIM_DIR=DIR -DLAYERS="core < spec < config, workload < ..." [-DFORBIDDEN="metrics: schedule/; ..."]
#       -P tools/check_layers.cmake
#
# Checks every #include "folder/..." of the .hpp and .cpp files under SIM_DIR/<folder>/ against the layer order
# LAYERS (sim/CMakeLists.txt): floors separated by " < ", the folders of one floor by ", ". A file may include its own
# folder's headers and those of lower floors only; never a folder on its own floor or above. That order also rules
# out include cycles between folders. FORBIDDEN names includes that are refused even downward
# ("folder: included-path-prefix", separated by ";"). Every folder under SIM_DIR must be on a floor.
# Prints each violation as FILE:LINE and fails (exit 1); prints "layers: ok" otherwise.

if(NOT SIM_DIR OR NOT LAYERS)
  message(FATAL_ERROR "usage: cmake -DSIM_DIR=DIR -DLAYERS=\"a < b, c < d\" [-DFORBIDDEN=...] -P check_layers.cmake")
endif()

# floor_of_<folder> = the folder's floor, counted from 0.
string(REPLACE " < " ";" floors "${LAYERS}")
set(floor 0)
set(known "")
foreach(f ${floors})
  string(REPLACE ", " ";" folders "${f}")
  foreach(folder ${folders})
    set(floor_of_${folder} ${floor})
    list(APPEND known ${folder})
  endforeach()
  math(EXPR floor "${floor} + 1")
endforeach()

set(forbidden_rules "")
if(FORBIDDEN)
  string(REPLACE ";" "\n" forbidden_lines "${FORBIDDEN}")
  string(REPLACE "\n" ";" forbidden_rules "${forbidden_lines}")
endif()

set(violations "")
file(GLOB folders RELATIVE "${SIM_DIR}" "${SIM_DIR}/*")
list(SORT folders)
foreach(folder ${folders})
  if(NOT IS_DIRECTORY "${SIM_DIR}/${folder}")
    continue()
  endif()
  file(GLOB_RECURSE sources "${SIM_DIR}/${folder}/*.hpp" "${SIM_DIR}/${folder}/*.cpp")
  if(NOT sources)
    continue()
  endif()
  if(NOT DEFINED floor_of_${folder})
    string(APPEND violations "  sim/${folder}/: a folder on no floor of the layer order (add it to LAYERS)\n")
    continue()
  endif()
  list(SORT sources)
  foreach(source ${sources})
    file(RELATIVE_PATH shown "${SIM_DIR}/.." "${source}")
    file(READ "${source}" text)
    string(REGEX MATCHALL "#include \"[a-z_]+/[^\"]*\"" includes "${text}")
    foreach(inc ${includes})
      string(REGEX REPLACE "#include \"([a-z_]+)/([^\"]*)\"" "\\1" to "${inc}")
      string(REGEX REPLACE "#include \"([^\"]*)\"" "\\1" path "${inc}")
      # The line: newlines before the include's first occurrence, plus one.
      string(FIND "${text}" "${inc}" at)
      string(SUBSTRING "${text}" 0 ${at} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines line)
      math(EXPR line "${line} + 1")
      if(to STREQUAL folder)
        continue()
      endif()
      if(NOT DEFINED floor_of_${to})
        if(IS_DIRECTORY "${SIM_DIR}/${to}")
          string(APPEND violations "  ${shown}:${line}: includes ${path}: sim/${to}/ is on no floor\n")
        endif()
        continue()
      endif()
      if(NOT floor_of_${to} LESS floor_of_${folder})
        string(APPEND violations "  ${shown}:${line}: includes ${path}: ${to} (floor ${floor_of_${to}}) is not "
                                 "below ${folder} (floor ${floor_of_${folder}})\n")
      endif()
      foreach(rule ${forbidden_rules})
        string(REGEX REPLACE "^ *([a-z_]+): *(.*[^ ]) *$" "\\1" rule_from "${rule}")
        string(REGEX REPLACE "^ *([a-z_]+): *(.*[^ ]) *$" "\\2" rule_to "${rule}")
        string(FIND "${path}" "${rule_to}" prefix_at)
        if(rule_from STREQUAL folder AND prefix_at EQUAL 0)
          string(APPEND violations "  ${shown}:${line}: includes ${path}: ${folder} may not include ${rule_to}\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(violations)
  # The list goes out as NOTICE, which CMake prints as written; FATAL_ERROR's text is wrapped at a fixed width, so a
  # long path would split a line (and the tests' expected expressions) in two.
  message(NOTICE "layers: includes against the layer order \"${LAYERS}\":\n${violations}")
  message(FATAL_ERROR "layers: includes against the layer order (listed above)")
endif()
message(STATUS "layers: ok (${LAYERS})")
