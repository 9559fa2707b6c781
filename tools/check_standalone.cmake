# cmake -DROOT=DIR [-DWALK=ON] [-DSAME_LINE_ONLY=ON] [-DSECTIONS=OFF] -P tools/check_standalone.cmake
# The repository stands alone (docs/testing.md "The repository stands alone"). Over the files of sim/, tests/, docs/,
# README.md, results/ and the data folders (tracked files from `git ls-files`; every file with WALK=ON, for fixtures):
#   1. a specification cited by file name (docs/NAME.md, or one of the old outside names) is a file of the repository;
#   2. a section cited as "§N.M" is a heading of the document it cites: the docs/NAME.md named last before it on the
#      same line; else the page the file declares it cites by "§n" ("docs/fsdp.md is cited as §n"); else, in code and
#      data, the specification named last on an earlier line; else, in a Markdown page, the page itself; a heading
#      reads "## §N.M ..." or "## N.M ..." (any level, the "§" optional, the number followed by "." or a space).
#      Sections of other works are written "section N.M";
#   3. no file holds an absolute path of a machine (/work/, /tmp/, /home/, /root/, /Users/), except the documented
#      example /tmp/zerosim-first (the README's quick start).
#   4. a relative link of a Markdown page, [text](path), names a file of the repository (from the page's folder).
# Not read: binary files (only the text extensions below are), the copies of published logs (tests/data/logs/), the
# raw device logs of a measurement (results/measurements/*/run*/log.txt, kept as the machine wrote them), and the
# must-fail fixtures of this check (tests/data/standalone/).
cmake_policy(SET CMP0007 NEW) # list(FILTER) and foreach keep empty elements (lines)
set(folders sim tests docs README.md results models topologies scenarios calibration data bench)
if(WALK)
  set(files "")
  foreach(f IN LISTS folders)
    if(IS_DIRECTORY "${ROOT}/${f}")
      file(GLOB_RECURSE found RELATIVE "${ROOT}" "${ROOT}/${f}/*")
      list(APPEND files ${found})
    elseif(EXISTS "${ROOT}/${f}")
      list(APPEND files "${f}")
    endif()
  endforeach()
else()
  execute_process(COMMAND git -C "${ROOT}" ls-files -- ${folders} OUTPUT_VARIABLE listed RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "git ls-files failed in ${ROOT}: run the check from a clone")
  endif()
  string(REPLACE "\n" ";" files "${listed}")
endif()
list(SORT files)
list(FILTER files INCLUDE REGEX "(\\.(md|cpp|hpp|h|txt|yaml|yml|json|csv|cmake|py|sh|tsv)|CMakeLists\\.txt)$")
list(FILTER files EXCLUDE REGEX "^tests/data/(logs|standalone)/")
list(FILTER files EXCLUDE REGEX "^results/measurements/[^/]+/run[^/]*/log\\.txt$")

set(bad "")
set(spec_names "deepspeed-schedule|scenario-format|design|simgrid-notes|style")
set(old_names "zero-schedule|style-anchors|${spec_names}")
foreach(rel IN LISTS files)
  # One list element per line: ";" and the brackets (which would join CMake list elements) are replaced first.
  file(READ "${ROOT}/${rel}" content)
  string(REPLACE ";" "," content "${content}")
  string(REPLACE "[" "<" content "${content}")
  string(REPLACE "]" ">" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  list(FILTER lines INCLUDE REGEX "§|\\.md|>\\(|/(work|tmp|home|root|Users)/")
  # The document a bare "§N" cites (no document before it on its line): see below; by default the file itself.
  set(home "")
  if(rel MATCHES "\\.md$")
    set(home "${rel}")
  endif()
  set(n 0)
  foreach(line IN LISTS lines)
    # "docs/fsdp.md is cited as §n", "docs/deepspeed-schedule.md (§n)": the file's bare sections are that page's.
    if(line MATCHES "(docs/[a-z0-9/-]+\\.md)[^§/]*§n" AND EXISTS "${ROOT}/${CMAKE_MATCH_1}")
      set(home "${CMAKE_MATCH_1}")
    endif()
    set(current "${home}")
    if(NOT SECTIONS STREQUAL "OFF" AND SAME_LINE_ONLY)
      set(current "(another project)") # sections checked only where their document is named on the same line
    endif()
    math(EXPR n "${n} + 1")
    # 4. a Markdown page's relative links (the brackets read as "<" and ">" here) name files of the repository
    if(rel MATCHES "\\.md$")
      string(REGEX MATCHALL ">\\(([^) #]+)[^)]*\\)" links "${line}")
      foreach(link IN LISTS links)
        string(REGEX REPLACE "^>\\(([^) #]+).*" "\\1" target "${link}")
        get_filename_component(page_dir "${ROOT}/${rel}" DIRECTORY)
        if(NOT target MATCHES "^[a-z]+:" AND NOT EXISTS "${page_dir}/${target}")
          string(APPEND bad "${rel}: the link '${target}' names no file of the repository\n")
        endif()
      endforeach()
    endif()
    # 3. machine paths
    string(REGEX MATCHALL "(^|[^A-Za-z0-9_.~-])/(work|tmp|home|root|Users)/[^ `'\")]+" paths "${line}")
    foreach(p IN LISTS paths)
      string(REGEX REPLACE "^[^/]" "" p "${p}")
      if(NOT p MATCHES "^/tmp/zerosim-first")
        string(APPEND bad "${rel}: an absolute path of a machine: ${p}\n")
      endif()
    endforeach()
    # 1. specifications by file name
    string(REGEX MATCHALL "[A-Za-z0-9_./-]*(${old_names})\\.md" named "${line}")
    foreach(d IN LISTS named)
      if(NOT d MATCHES "^docs/[a-z0-9-]+\\.md$" OR NOT EXISTS "${ROOT}/${d}")
        string(APPEND bad "${rel}: '${d}' is not a document of the repository (docs/NAME.md)\n")
      endif()
    endforeach()
    # 2. sections: walk the line from left to right, docs/NAME.md setting the document, §N.M checked against it
    string(REGEX MATCHALL "(^|[^A-Za-z0-9_/.-])docs/[a-z0-9/-]+\\.md|§[0-9]+(\\.[0-9]+)*" tokens "${line}")
    foreach(t IN LISTS tokens)
      if(t MATCHES "docs/[a-z0-9/-]+\\.md$")
        string(REGEX MATCH "docs/[a-z0-9/-]+\\.md$" current "${t}")
        # A page of docs/ numbers its own sections: a bare "§N" there is its own, unless the page says which
        # specification it cites that way ("cited as §n", "(§n)"). Code and data cite the specification named last.
        if(current MATCHES "^docs/(${spec_names})\\.md$" AND NOT rel MATCHES "\\.md$")
          set(home "${current}")
        endif()
        if(NOT EXISTS "${ROOT}/${current}")
          # Another project's docs/NAME.md (a source's locator, e.g. torchtitan's docs/performance.md) is not checked,
          # nor are the sections cited after it; one of the specifications' names must exist (rule 1).
          if(current MATCHES "^docs/(${spec_names})\\.md$")
            string(APPEND bad "${rel}: cites ${current}, which is not in the repository\n")
          endif()
          set(current "(another project)")
        endif()
      elseif(NOT SECTIONS STREQUAL "OFF")
        string(REGEX REPLACE "^§" "" num "${t}")
        if(current STREQUAL "")
          string(APPEND bad "${rel}: ${t} names no document (none cited before it in the file)\n")
        elseif(NOT current STREQUAL "(another project)")
          string(MAKE_C_IDENTIFIER "${current}" key)
          if(NOT DEFINED headings_${key})
            file(STRINGS "${ROOT}/${current}" headings_${key} ENCODING UTF-8 REGEX "^#+ ")
          endif()
          string(REPLACE "." "\\." num_re "${num}")
          set(found OFF)
          foreach(h IN LISTS headings_${key})
            if(h MATCHES "^#+ +(§)?${num_re}(\\.| |$)")
              set(found ON)
              break()
            endif()
          endforeach()
          if(NOT found)
            string(APPEND bad "${rel}: ${t} is not a heading of ${current}\n")
          endif()
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(NOTICE "the repository does not stand alone (docs/testing.md \"The repository stands alone\"):\n${bad}")
  message(FATAL_ERROR "dangling citations or machine paths (listed above)")
endif()
list(LENGTH files count)
if(SECTIONS STREQUAL "OFF")
  message(STATUS "${count} files read: every specification cited by name is in the repository, no machine path")
else()
  message(STATUS "${count} files read: every citation resolves, no machine path")
endif()
