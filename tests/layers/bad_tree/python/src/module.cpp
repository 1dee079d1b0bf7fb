// Forbidden: python may include client only.
#include "collective/link.hpp"
