# cmake/Packaging.cmake - what a node needs besides the binaries, the library
# and its headers (installed by their own folders): the systemd units, the
# sysusers.d and tmpfiles.d files, the example /etc/zring/zring.yaml and the
# docs; and the .deb that CPack builds from all of it:
#
#   cmake -S . -B build-deb -G Ninja -DCMAKE_INSTALL_PREFIX=/usr \
#         -DZRING_BUILD_TESTS=OFF -DZRING_BUILD_BENCH=OFF
#   cmake --build build-deb && cpack -G DEB --config build-deb/CPackConfig.cmake
#
# The units name /usr/sbin/zringd and /etc/zring: a node's install uses
# the /usr prefix (as the .deb does). Paths below are relative to the prefix
# so that `cmake --install --prefix DIR` stays inside DIR; /etc is the one
# exception, taken when the prefix is /usr (as GNUInstallDirs does).

set(ZRING_UNIT_DIR "lib/systemd/system" CACHE STRING "systemd units, relative to the install prefix")
install(FILES systemd/zringd.service systemd/zringd@.service DESTINATION ${ZRING_UNIT_DIR})
install(FILES systemd/sysusers.d/zring.conf DESTINATION lib/sysusers.d)
install(FILES systemd/tmpfiles.d/zring.conf DESTINATION lib/tmpfiles.d)
install(FILES README.md docs/operations.md docs/configuration.md docs/errors.md docs/aggregation.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples FILES_MATCHING PATTERN "*.yaml")

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
")

# --- the .deb ------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "zring")
set(CPACK_PACKAGE_VENDOR "zring")
set(CPACK_PACKAGE_CONTACT "zring maintainers <zring@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "compressed ring all-reduce daemon and client library")
# One string: several arguments to set() would make a CMake list, whose ';'
# separators would start the Description's continuation lines.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "zringd joins a ring of daemons, one per node, over ZeroMQ TCP and averages the\n"
    "gradients of the training processes on its node, compressed (fp16, 8-bit or\n"
    "4-bit quantization, top-k, sign, ...) with optional error feedback. The package\n"
    "holds zringd, zringctl, the systemd units, libzring with its headers and CMake\n"
    "package, and an example /etc/zring/zring.yaml.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The packaged binaries without their debug information (the build tree keeps
# it): 4 MB installed instead of 85.
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Library dependencies from dpkg-shlibdeps; the maintainer scripts create the
# user with systemd-sysusers, or adduser where systemd is not installed;
# the units reload with /bin/kill (procps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}/lib")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | adduser, procps")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/cmake/debian/conffiles;${PROJECT_SOURCE_DIR}/cmake/debian/postinst;${PROJECT_SOURCE_DIR}/cmake/debian/prerm;${PROJECT_SOURCE_DIR}/cmake/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
