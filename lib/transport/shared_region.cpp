#include "transport/shared_region.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <zring/error.hpp>

#include "transport/staging_board.hpp"

namespace zring::transport {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(ErrorCode::connection_failed,
              "shared buffer " + path + ": " + what + ": " + std::strerror(errno));
}

// The mapping's length: the board, then the values.
std::size_t mapped(std::size_t size) { return kBoardBytes + size; }

std::uint8_t* map(int fd, std::size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, mapped(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    fail("mmap", path);
  }
  ::close(fd);  // the mapping keeps the file
  return static_cast<std::uint8_t*>(p);
}

}  // namespace

std::shared_ptr<SharedRegion> SharedRegion::create(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
  if (fd < 0) fail("create", path);
  if (::fchmod(fd, 0660) != 0 || ::ftruncate(fd, static_cast<off_t>(mapped(size))) != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    fail("size", path);
  }
  std::uint8_t* data = nullptr;
  try {
    data = map(fd, size, path);
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  return std::shared_ptr<SharedRegion>(new SharedRegion(path, data, size, true));
}

std::shared_ptr<SharedRegion> SharedRegion::open(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < mapped(size)) {
    ::close(fd);
    errno = EINVAL;
    fail("smaller than announced", path);
  }
  return std::shared_ptr<SharedRegion>(new SharedRegion(path, map(fd, size, path), size, false));
}

SharedRegion::SharedRegion(std::string path, std::uint8_t* base, std::size_t size, bool owner)
    : path_(std::move(path)), base_(base), data_(base + kBoardBytes), size_(size), owner_(owner) {}

void SharedRegion::make_private(std::size_t keep) {
  const std::size_t length = mapped(size_);
  void* fresh = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) fail("private copy", path_);
  std::memcpy(static_cast<std::uint8_t*>(fresh) + kBoardBytes, data_, std::min(keep, size_));
  // Moves the new pages over the old mapping in one step: the addresses are
  // never unmapped in between.
  if (::mremap(fresh, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, base_) == MAP_FAILED) {
    const int saved = errno;
    ::munmap(fresh, length);
    errno = saved;
    fail("private copy (mremap)", path_);
  }
}

SharedRegion::~SharedRegion() {
  ::munmap(base_, mapped(size_));
  if (owner_) ::unlink(path_.c_str());
}

}  // namespace zring::transport
