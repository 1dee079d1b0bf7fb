// Allowed: collective uses wire.
#include "wire/messages.hpp"
