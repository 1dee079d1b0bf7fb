#include <zring/version.hpp>

namespace zring {
const char* version() noexcept { return ZRING_VERSION_STRING; }
}  // namespace zring
