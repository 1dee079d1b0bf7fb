# check_layers.cmake - fails when a file includes a header its layer may not
# use. Run as
#   cmake -DZRING_SOURCE_DIR=<tree> -DZRING_LAYER_GRAPH=<graph> -P check_layers.cmake
# by the target zring_check_layers (every layer of lib/ depends on it) and
# by tests/layers. The graph is the one lib/CMakeLists.txt declares
# (zring_layer(...), ZRING_OUTSIDE_USES_*), written to <build>/zring_layers.cmake.
#
# Checked: every .cpp/.hpp under lib/, python/, tools/ and examples/. Each
# #include "X" (or <X> when X is a file of the tree) is found as the
# compiler finds it: next to the including file, then under include/, lib/,
# tools/ (zring_proc's include directory) and daemon/. The folder it is in
# must be the includer's own, include/zring (the public API), or one its
# layer uses: lib/<layer>/ files may include the layers they USE and the files
# of lib/ itself; those files include nothing of a layer; python/, tools/,
# tools/proc/ and examples/ only what their ZRING_OUTSIDE_USES_* list names.
# Each violation is printed as "file:line: error: ..." and the script fails.
cmake_minimum_required(VERSION 3.22)

foreach(var ZRING_SOURCE_DIR ZRING_LAYER_GRAPH)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_layers.cmake: pass -D${var}=...")
  endif()
endforeach()
include(${ZRING_LAYER_GRAPH})
set(root ${ZRING_SOURCE_DIR})

# The part of the tree a file (path relative to root) belongs to: a layer,
# "lib" (the files of lib/ itself), "public" (include/), one of
# ZRING_OUTSIDE (the longest that matches), or "" (unchecked: daemon/,
# tests/, ...). A folder of lib/ that is not a declared layer is an error.
function(part_of rel out)
  if(rel MATCHES "^include/")
    set(${out} public PARENT_SCOPE)
    return()
  endif()
  if(rel MATCHES "^lib/([^/]+)/")
    set(layer ${CMAKE_MATCH_1})
    if(NOT layer IN_LIST ZRING_LAYERS)
      message(FATAL_ERROR "${rel}: lib/${layer}/ is not a layer: declare it with zring_layer() "
                          "in lib/CMakeLists.txt")
    endif()
    set(${out} ${layer} PARENT_SCOPE)
    return()
  endif()
  if(rel MATCHES "^lib/")
    set(${out} lib PARENT_SCOPE)
    return()
  endif()
  set(best "")
  foreach(folder IN LISTS ZRING_OUTSIDE)
    string(LENGTH "${folder}" n)
    string(LENGTH "${best}" b)
    if(rel MATCHES "^${folder}/" AND n GREATER b)
      set(best ${folder})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# Where #include X of a file in folder dir lands, relative to root ("" when
# it is no file of the tree: a system or third-party header).
function(resolve dir name quoted out)
  set(bases ${root}/include ${root}/lib ${root}/tools ${root}/daemon)
  if(quoted)
    list(PREPEND bases ${dir})
  endif()
  foreach(base IN LISTS bases)
    if(EXISTS "${base}/${name}" AND NOT IS_DIRECTORY "${base}/${name}")
      get_filename_component(path "${base}/${name}" ABSOLUTE)
      file(RELATIVE_PATH rel ${root} ${path})
      if(NOT rel MATCHES "^\\.\\./")
        set(${out} ${rel} PARENT_SCOPE)
        return()
      endif()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE ${root}
     ${root}/lib/*.[ch]pp ${root}/python/*.[ch]pp ${root}/tools/*.[ch]pp
     ${root}/examples/*.[ch]pp)
list(SORT files)
set(violations 0)
foreach(rel IN LISTS files)
  part_of(${rel} from)
  if(from STREQUAL "")
    continue()
  endif()
  if(from STREQUAL "lib")
    set(allowed "")
    set(rule "the files of lib/ itself use no layer")
  elseif(from IN_LIST ZRING_LAYERS)
    set(allowed ${ZRING_LAYER_USES_${from}} lib)
    list(JOIN ZRING_LAYER_USES_${from} " " uses)
    if(uses STREQUAL "")
      set(rule "zring_layer(${from}) uses no layer")
    else()
      set(rule "it has zring_layer(${from} USES ${uses})")
    endif()
  else()
    set(allowed ${ZRING_OUTSIDE_USES_${from}})
    list(JOIN allowed " " uses)
    set(rule "ZRING_OUTSIDE_USES_${from} is '${uses}'")
  endif()
  get_filename_component(dir ${root}/${rel} DIRECTORY)
  # One list item per line, so that the index is the line number; the
  # characters that would split or escape list items go first.
  file(READ ${root}/${rel} text)
  string(REGEX REPLACE "[][;\\]" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">]")
      continue()
    endif()
    set(name ${CMAKE_MATCH_2})
    if(CMAKE_MATCH_1 STREQUAL "\"")
      resolve(${dir} ${name} TRUE target)
    else()
      resolve(${dir} ${name} FALSE target)
    endif()
    if(target STREQUAL "")
      continue()
    endif()
    part_of(${target} to)
    if(to STREQUAL "")
      string(REGEX REPLACE "/.*" "" to ${target})
    endif()
    if(to STREQUAL from OR to STREQUAL "public" OR to IN_LIST allowed)
      continue()
    endif()
    message(NOTICE "${rel}:${number}: error: #include \"${name}\" (${target}) is the edge "
                   "${from} -> ${to}, which the layer graph does not have: ${rule} "
                   "in lib/CMakeLists.txt")
    math(EXPR violations "${violations} + 1")
  endforeach()
endforeach()

if(violations GREATER 0)
  message(FATAL_ERROR "check_layers: ${violations} #include(s) outside the layer graph "
                      "(lib/CMakeLists.txt, docs/architecture.md)")
endif()
