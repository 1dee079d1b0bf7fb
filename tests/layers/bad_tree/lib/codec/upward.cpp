// Forbidden: codec uses no layer, so neither of these may be included.
#include "client/impl.hpp"
#include "../transport/zmq_calls.hpp"
// Allowed: lib/ itself, a system header.
#include "status.hpp"
#include <vector>
