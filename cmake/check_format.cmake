# check_format.cmake - fails when a C++ file of the tree is not formatted as
# .clang-format says (CTest `format_check`; `scripts/format.sh` formats).
#
#   cmake -DSOURCE_DIR=<repo> -DCLANG_FORMAT=<clang-format> -P check_format.cmake
#
# The files are the tracked and new *.cpp / *.hpp of the repository, except
# tests/layers/bad_tree/ (the layer checker's test data, kept as written).
cmake_policy(VERSION 3.20)
execute_process(COMMAND git -C "${SOURCE_DIR}" ls-files --cached --others --exclude-standard
                        -- "*.cpp" "*.hpp"
                OUTPUT_VARIABLE listed RESULT_VARIABLE git_status)
if(NOT git_status EQUAL 0)
  # Not a git checkout (a source tarball): every C++ file below the tree.
  file(GLOB_RECURSE listed RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*.cpp" "${SOURCE_DIR}/*.hpp")
  list(FILTER listed EXCLUDE REGEX "^build")
else()
  string(REPLACE "\n" ";" listed "${listed}")
endif()
list(FILTER listed EXCLUDE REGEX "^tests/layers/bad_tree/")
list(FILTER listed EXCLUDE REGEX "^$")
# One clang-format for all files (a process per file took 36 s here, this
# about 1 s); only when it fails does each file get its own, to name them.
set(paths "")
foreach(file IN LISTS listed)
  list(APPEND paths "${SOURCE_DIR}/${file}")
endforeach()
list(LENGTH listed checked)
execute_process(COMMAND "${CLANG_FORMAT}" --dry-run -Werror --style=file ${paths}
                RESULT_VARIABLE all_status OUTPUT_QUIET ERROR_QUIET)
if(all_status EQUAL 0)
  message(STATUS "check_format: ${checked} files formatted as .clang-format says")
  return()
endif()
set(bad "")
foreach(file IN LISTS listed)
  execute_process(COMMAND "${CLANG_FORMAT}" --dry-run -Werror --style=file "${SOURCE_DIR}/${file}"
                  RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
  if(NOT status EQUAL 0)
    list(APPEND bad "${file}")
  endif()
endforeach()
if(bad)
  list(LENGTH bad count)
  list(JOIN bad "\n  " shown)
  message(FATAL_ERROR "check_format: ${count} of ${checked} files are not formatted as .clang-format says "
                      "(run scripts/format.sh):\n  ${shown}")
endif()
message(FATAL_ERROR "check_format: ${CLANG_FORMAT} failed on the ${checked} files together "
                    "but on none alone (status ${all_status})")
