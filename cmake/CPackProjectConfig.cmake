# cmake/CPackProjectConfig.cmake - read by cpack (CPACK_PROJECT_CONFIG_FILE,
# set in cmake/DebianPackages.cmake) before it builds the Debian packages:
# - the latest entry of packaging/debian/changelog must be for this version;
# - libzring0's Depends are what dpkg-shlibdeps finds for the built library.
#   CPack's own dpkg-shlibdeps run would also make it write maintainer
#   scripts that call ldconfig, which libzring0 leaves to its ldconfig trigger.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()

if(NOT CPACK_ZRING_CHANGELOG_VERSION STREQUAL CPACK_PACKAGE_VERSION)
  message(FATAL_ERROR "packaging/debian/changelog: the latest entry is for ${CPACK_ZRING_CHANGELOG_VERSION}, "
                      "the project is at ${CPACK_PACKAGE_VERSION}: add an entry for this version")
endif()

include("${CPACK_ZRING_LIBRARY_INFO}")  # ZRING_LIBRARY_FILE: the built libzring.so.N.N.N
if(NOT EXISTS "${ZRING_LIBRARY_FILE}")
  message(FATAL_ERROR "${ZRING_LIBRARY_FILE} is missing: build the project before packaging it")
endif()
# dpkg-shlibdeps wants a debian/control in its working directory, even empty.
get_filename_component(_zring_work "${CPACK_ZRING_LIBRARY_INFO}" DIRECTORY)
set(_zring_work "${_zring_work}/shlibdeps")
file(MAKE_DIRECTORY "${_zring_work}/debian")
file(TOUCH "${_zring_work}/debian/control")
execute_process(COMMAND dpkg-shlibdeps -O "${ZRING_LIBRARY_FILE}"
                WORKING_DIRECTORY "${_zring_work}"
                OUTPUT_VARIABLE _zring_shlibdeps ERROR_VARIABLE _zring_shlibdeps_error
                RESULT_VARIABLE _zring_shlibdeps_result OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _zring_shlibdeps_result EQUAL 0 OR NOT _zring_shlibdeps MATCHES "^shlibs:Depends=(.+)$")
  message(FATAL_ERROR "dpkg-shlibdeps ${ZRING_LIBRARY_FILE} failed: ${_zring_shlibdeps_error}${_zring_shlibdeps}")
endif()
set(CPACK_DEBIAN_LIBRARY_PACKAGE_DEPENDS "${CMAKE_MATCH_1}")
