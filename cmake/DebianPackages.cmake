# cmake/DebianPackages.cmake - the Debian packages CPack builds, one per
# install component (cmake/Packaging.cmake):
#
#   component    package        what
#   daemon       zringd         zringd, zringctl, units, sysusers/tmpfiles, /etc/zring, manuals, docs
#   library      libzring0      libzring.so.0 (the ldconfig trigger, a shlibs file)
#   development  libzring-dev   headers, the libzring.so link, the CMake package
#   python       python3-zring  the Python module zring with zring.torch (byte-compiled on install)
#
# Each package carries /usr/share/doc/PACKAGE/copyright and
# changelog.Debian.gz from packaging/debian/ (installed only into packages,
# not by a plain `cmake --install`). The binaries are stripped; their debug
# information stays in the build tree.

set(ZRING_DEBIAN_DIR "${PROJECT_SOURCE_DIR}/packaging/debian")

# The packages' version is the latest entry of packaging/debian/changelog:
# its Debian revision is used here; that its upstream part is this project's
# version is checked when the packages are built (cmake/CPackProjectConfig.cmake).
file(STRINGS "${ZRING_DEBIAN_DIR}/changelog" _zring_changelog_top LIMIT_COUNT 1)
if(NOT _zring_changelog_top MATCHES "^zring \\(([0-9][A-Za-z0-9.+~]*)-([A-Za-z0-9.+~]+)\\) ")
  message(FATAL_ERROR "packaging/debian/changelog: the first line does not read "
                      "'zring (VERSION-REVISION) ...': ${_zring_changelog_top}")
endif()
set(ZRING_DEBIAN_UPSTREAM_VERSION "${CMAKE_MATCH_1}")
set(ZRING_DEBIAN_REVISION "${CMAKE_MATCH_2}")
set(_zring_version "${PROJECT_VERSION}-${ZRING_DEBIAN_REVISION}")
set(_zring_library_package "libzring${PROJECT_VERSION_MAJOR}")

# --- copyright and changelog.Debian.gz of every package --------------------------
zring_gzip("${ZRING_DEBIAN_DIR}/changelog" "${ZRING_PACKAGING_BINARY_DIR}/changelog.Debian.gz")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ZRING_DEBIAN_DIR}/changelog")
set(_zring_components daemon library development)
set(_zring_packages zringd ${_zring_library_package} libzring-dev)
if(TARGET zring_python)
  list(APPEND _zring_components python)
  list(APPEND _zring_packages python3-zring)
endif()
foreach(_zring_component _zring_package IN ZIP_LISTS _zring_components _zring_packages)
  string(TOUPPER "${_zring_component}" _zring_upper)
  set(CPACK_DEBIAN_${_zring_upper}_PACKAGE_NAME "${_zring_package}")
  install(FILES "${ZRING_DEBIAN_DIR}/copyright" "${ZRING_PACKAGING_BINARY_DIR}/changelog.Debian.gz"
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_zring_package}
          COMPONENT ${_zring_component} EXCLUDE_FROM_ALL)
endforeach()

# --- common fields --------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_PACKAGE_NAME "zring")
set(CPACK_PACKAGE_VENDOR "zring authors")
# zring has no public mail address yet: .invalid (RFC 2606) says so, and no
# mail can reach a stranger. See docs/operations.md (Build the packages).
set(CPACK_PACKAGE_CONTACT "zring maintainers <maintainers@zring.invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SOURCE "zring")
set(CPACK_DEBIAN_PACKAGE_RELEASE "${ZRING_DEBIAN_REVISION}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
# CPack prepends CPACK_PACKAGE_DESCRIPTION_SUMMARY to every package's
# description unless it is CPack's own default; each package below brings
# its own first line (the synopsis) instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
# dpkg-shlibdeps finds the build tree's libzring but no package for it: the
# packages that link it depend on libzring0 of their own version instead.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}/lib")
# CPack's shlibs files would come with maintainer scripts that run ldconfig;
# libzring0 brings its own shlibs file and the ldconfig trigger instead.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
# At cpack time: the version check, and libzring0's Depends.
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/CPackProjectConfig.cmake")
set(CPACK_ZRING_CHANGELOG_VERSION "${ZRING_DEBIAN_UPSTREAM_VERSION}")
set(CPACK_ZRING_LIBRARY_INFO "${ZRING_PACKAGING_BINARY_DIR}/library-file.cmake")
file(GENERATE OUTPUT "${CPACK_ZRING_LIBRARY_INFO}"
     CONTENT "set(ZRING_LIBRARY_FILE \"$<TARGET_FILE:zring>\")\n")

# Every package's description: its synopsis, this paragraph, then its own.
# (One string each: a CMake list's ';' would end up in the field.)
string(CONCAT _zring_about
    "zring averages the gradients of distributed training processes through a\n"
    "ring of daemons, one per node, connected over ZeroMQ TCP sockets. The\n"
    "gradients travel compressed (fp16, 8-bit or 4-bit quantization, top-k,\n"
    "sign and more), with optional error feedback, and every rank receives the\n"
    "same bits.\n"
    "\n")

# --- zringd -----------------------------------------------------------------------
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)
# adduser: the user where systemd-sysusers is missing; procps: /bin/kill,
# which `systemctl reload` runs.
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "${_zring_library_package} (= ${_zring_version}), adduser, procps")
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    "${ZRING_DEBIAN_DIR}/zringd/conffiles;${ZRING_DEBIAN_DIR}/zringd/postinst;${ZRING_DEBIAN_DIR}/zringd/prerm;${ZRING_DEBIAN_DIR}/zringd/postrm")
string(CONCAT CPACK_DEBIAN_DAEMON_DESCRIPTION
    "compressed ring all-reduce daemon for distributed training\n"
    "${_zring_about}"
    "This package holds the daemon zringd, the zringctl tool (status, trace,\n"
    "configuration check, CurveZMQ keys), the systemd units and an example\n"
    "ring file in /etc/zring.")

# --- libzring0 --------------------------------------------------------------------
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION "libs")
# Its Depends come from dpkg-shlibdeps at cpack time (CPackProjectConfig.cmake):
# CPack's own run would again bring the maintainer scripts.
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SHLIBDEPS OFF)
# Programs built against libzring 0.1 need a libzring0 of the same minor
# version (the CMake package says SameMinorVersion too).
math(EXPR _zring_next_minor "${PROJECT_VERSION_MINOR} + 1")
file(WRITE "${ZRING_PACKAGING_BINARY_DIR}/${_zring_library_package}/shlibs"
     "libzring ${PROJECT_VERSION_MAJOR} ${_zring_library_package} (>= ${PROJECT_VERSION}), "
     "${_zring_library_package} (<< ${PROJECT_VERSION_MAJOR}.${_zring_next_minor}~)\n")
set(CPACK_DEBIAN_LIBRARY_PACKAGE_CONTROL_EXTRA
    "${ZRING_PACKAGING_BINARY_DIR}/${_zring_library_package}/shlibs;${ZRING_DEBIAN_DIR}/libzring0/triggers")
string(CONCAT CPACK_DEBIAN_LIBRARY_DESCRIPTION
    "compressed ring all-reduce client library\n"
    "${_zring_about}"
    "This package holds the shared library libzring, through which C++\n"
    "training processes hand their gradients to the zringd of their node.")

# --- libzring-dev ------------------------------------------------------------------
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "${_zring_library_package} (= ${_zring_version})")
string(CONCAT CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
    "compressed ring all-reduce client library (development files)\n"
    "${_zring_about}"
    "This package holds the C++ headers, the libzring.so link and the CMake\n"
    "package (find_package(zring CONFIG), target zring::zring) to build\n"
    "training code against libzring.")

# --- python3-zring -----------------------------------------------------------------
if(TARGET zring_python)
  # The interpreter the module was built for, from its file name
  # (_zring.cpython-311-x86_64-linux-gnu.so: Python 3.11 only).
  get_target_property(_zring_py_suffix zring_python SUFFIX)
  if(NOT _zring_py_suffix MATCHES "^\\.cpython-3([0-9]+)-")
    message(FATAL_ERROR "python3-zring: cannot tell the Python version from the module suffix '${_zring_py_suffix}'")
  endif()
  math(EXPR _zring_py_next "${CMAKE_MATCH_1} + 1")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION "python")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "${_zring_library_package} (= ${_zring_version}), python3 (>= 3.${CMAKE_MATCH_1}~), python3 (<< 3.${_zring_py_next}), python3-numpy")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "zringd")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch")
  # py3compile and py3clean: the byte code is made on install and removed
  # with the package, as Debian's Python packages do.
  set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA
      "${ZRING_DEBIAN_DIR}/python3-zring/postinst;${ZRING_DEBIAN_DIR}/python3-zring/prerm")
  string(CONCAT CPACK_DEBIAN_PYTHON_DESCRIPTION
      "compressed ring all-reduce client for Python 3 and PyTorch\n"
      "${_zring_about}"
      "This package holds the Python 3 module zring, which reduces numpy arrays\n"
      "and torch tensors through the zringd of their node, and zring.torch: a\n"
      "communication hook for DistributedDataParallel and a distributed\n"
      "optimizer.")
endif()

include(CPack)
