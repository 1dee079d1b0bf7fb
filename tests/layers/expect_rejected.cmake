# Runs the layer check over bad_tree/ and passes only when it fails naming
# exactly the forbidden includes below (file:line and edge), and no others.
execute_process(
  COMMAND ${CMAKE_COMMAND} -DZRING_SOURCE_DIR=${TREE} -DZRING_LAYER_GRAPH=${ZRING_LAYER_GRAPH}
          -P ${CHECKER}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "check_layers said:\n${out}")
if(result EQUAL 0)
  message(FATAL_ERROR "check_layers accepted a tree of forbidden includes")
endif()
set(expected
  "examples/demo/main.cpp:2: error: #include \"client/impl.hpp\" (lib/client/impl.hpp) is the edge examples -> client"
  "lib/codec/upward.cpp:2: error: #include \"client/impl.hpp\" (lib/client/impl.hpp) is the edge codec -> client"
  "lib/codec/upward.cpp:3: error: #include \"../transport/zmq_calls.hpp\" (lib/transport/zmq_calls.hpp) is the edge codec -> transport"
  "lib/wire/cycle.hpp:3: error: #include \"collective/link.hpp\" (lib/collective/link.hpp) is the edge wire -> collective"
  "python/src/module.cpp:2: error: #include \"collective/link.hpp\" (lib/collective/link.hpp) is the edge python -> collective")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_layers did not report: ${line}")
  endif()
endforeach()
string(REGEX MATCHALL ": error: " reported "${out}")
list(LENGTH reported n)
list(LENGTH expected want)
if(NOT n EQUAL want)
  message(FATAL_ERROR "check_layers reported ${n} forbidden includes, not ${want}")
endif()
