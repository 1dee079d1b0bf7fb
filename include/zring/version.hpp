// zring/version.hpp - the library version.
#pragma once

#define ZRING_VERSION_MAJOR 0
#define ZRING_VERSION_MINOR 1
#define ZRING_VERSION_PATCH 0
#define ZRING_VERSION_STRING "0.1.0"

namespace zring {
// The version of the library actually linked (may differ from the header's).
const char* version() noexcept;
}  // namespace zring
