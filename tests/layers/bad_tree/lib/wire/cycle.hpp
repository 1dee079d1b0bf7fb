// Forbidden: the old cycle (wire -> collective).
#pragma once
#include "collective/link.hpp"
