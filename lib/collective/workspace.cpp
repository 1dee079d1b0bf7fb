#include "collective/workspace.hpp"

namespace zring::collective {

std::shared_ptr<float[]> Workspace::result(std::size_t n) {
  if (!result_ || result_.use_count() > 1 || result_size_ < n) {
    result_size_ = n == 0 ? 1 : n;
    result_ = std::shared_ptr<float[]>(new float[result_size_]);
  }
  return result_;
}

}  // namespace zring::collective
