# pkg_check_modules (CMake 3.25, Debian 12's) gives libzmq's "-isystem DIR"
# (Debian's libzmq.pc has one) to the imported target PkgConfig::ZMQ as an
# include directory at a build tree's first configure, and as a compile
# option at every later one: the compile commands change, and everything is
# compiled again (a tree that scripts/demo.sh configured, then
# scripts/test.sh, or the fuzz build that scripts/test.sh builds and then
# scripts/fuzz.sh configures again). One form, from the flags themselves,
# which are the same every time: each -I and -isystem directory an include
# directory of the target (an imported target's are system ones), anything
# else a compile option.
set(_zmq_dirs "")
set(_zmq_options "")
set(_zmq_next_is_dir FALSE)
foreach(_zmq_flag IN LISTS ZMQ_CFLAGS)
  if(_zmq_next_is_dir)
    list(APPEND _zmq_dirs "${_zmq_flag}")
    set(_zmq_next_is_dir FALSE)
  elseif(_zmq_flag STREQUAL "-isystem" OR _zmq_flag STREQUAL "-I")
    set(_zmq_next_is_dir TRUE)
  elseif(_zmq_flag MATCHES "^-(I|isystem)(.+)$")
    list(APPEND _zmq_dirs "${CMAKE_MATCH_2}")
  else()
    list(APPEND _zmq_options "${_zmq_flag}")
  endif()
endforeach()
set_target_properties(PkgConfig::ZMQ PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_zmq_dirs}"
                      INTERFACE_COMPILE_OPTIONS "${_zmq_options}")
