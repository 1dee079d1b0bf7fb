# cmake/Packaging.cmake - what a node needs besides the binaries, the library
# and its headers (installed by their own folders): the systemd units, the
# sysusers.d and tmpfiles.d files, the example /etc/zring/zring.yaml, the
# manual pages and the docs; then the Debian packages CPack builds from all of
# it (cmake/DebianPackages.cmake):
#
#   cmake -S . -B build-deb -G Ninja -DCMAKE_INSTALL_PREFIX=/usr \
#         -DZRING_BUILD_TESTS=OFF -DZRING_BUILD_BENCH=OFF
#   cmake --build build-deb && cpack --config build-deb/CPackConfig.cmake
#
# Every install() rule names the component, and so the package, it belongs
# to: daemon (zringd), library (libzring0), development (libzring-dev) and
# python (python3-zring).
#
# The units name /usr/sbin/zringd and /etc/zring: a node's install uses
# the /usr prefix (as the packages do). Paths below are relative to the prefix
# so that `cmake --install --prefix DIR` stays inside DIR; /etc is the one
# exception, taken when the prefix is /usr (as GNUInstallDirs does).

set(ZRING_UNIT_DIR "lib/systemd/system" CACHE STRING "systemd units, relative to the install prefix")
install(FILES systemd/zringd.service systemd/zringd@.service DESTINATION ${ZRING_UNIT_DIR}
        COMPONENT daemon)
install(FILES systemd/sysusers.d/zring.conf DESTINATION lib/sysusers.d COMPONENT daemon)
install(FILES systemd/tmpfiles.d/zring.conf DESTINATION lib/tmpfiles.d COMPONENT daemon)
install(FILES README.md docs/operations.md docs/configuration.md docs/errors.md docs/aggregation.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemon)
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT daemon
        FILES_MATCHING PATTERN "*.yaml")

# /etc/zring/zring.yaml (PREFIX/etc/zring/zring.yaml for other prefixes);
# an existing file is an operator's configuration and is never overwritten.
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(_zring_etc \"/etc/zring\")
  else()
    set(_zring_etc \"\${CMAKE_INSTALL_PREFIX}/etc/zring\")
  endif()
  if(EXISTS \"\$ENV{DESTDIR}\${_zring_etc}/zring.yaml\")
    message(STATUS \"Kept: \$ENV{DESTDIR}\${_zring_etc}/zring.yaml (an existing configuration)\")
  else()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/configs/zring.yaml\" DESTINATION \"\${_zring_etc}\"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
" COMPONENT daemon)

# --- manual pages ----------------------------------------------------------------
# packaging/man/NAME.SECTION.in, with the version filled in, gzipped as Debian
# wants them (-9, no name or time stamp: the same bytes on every build). Made
# when CMake configures, so that any build of any targets can install them;
# editing a page reconfigures.
find_program(ZRING_GZIP gzip REQUIRED)
function(zring_gzip source output)
  if(NOT EXISTS "${output}" OR "${source}" IS_NEWER_THAN "${output}")
    execute_process(COMMAND "${ZRING_GZIP}" -9 -n -c "${source}" OUTPUT_FILE "${output}"
                    RESULT_VARIABLE _zring_gzip_result)
    if(NOT _zring_gzip_result EQUAL 0)
      file(REMOVE "${output}")
      message(FATAL_ERROR "gzip ${source}: ${_zring_gzip_result}")
    endif()
  endif()
endfunction()
set(ZRING_PACKAGING_BINARY_DIR "${PROJECT_BINARY_DIR}/packaging")
foreach(_zring_page IN ITEMS zringd.8 zringctl.1)
  configure_file(packaging/man/${_zring_page}.in ${ZRING_PACKAGING_BINARY_DIR}/man/${_zring_page} @ONLY)
  zring_gzip(${ZRING_PACKAGING_BINARY_DIR}/man/${_zring_page} ${ZRING_PACKAGING_BINARY_DIR}/man/${_zring_page}.gz)
  string(REGEX MATCH "[0-9]$" _zring_section "${_zring_page}")
  install(FILES ${ZRING_PACKAGING_BINARY_DIR}/man/${_zring_page}.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_zring_section} COMPONENT daemon)
endforeach()

include(cmake/DebianPackages.cmake)
