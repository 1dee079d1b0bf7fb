// Forbidden: examples reach no layer of lib/.
  #  include <client/impl.hpp>
