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

// No room (a full /dev/shm or /run, no memory to map) is a limit the
// operator can raise; anything else the system refused says what.
[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  const bool room = error == ENOSPC || error == ENOMEM || error == EFBIG;
  throw Error(room ? ErrorCode::resource_limit : ErrorCode::system_error,
              "shared buffer " + path + ": " + what + ": " + std::strerror(error));
}

// The mapping's length: the board, then the values.
std::size_t mapped(std::size_t size) { return kBoardBytes + size; }

std::uint8_t* map(int fd, std::size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, mapped(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    fail("mmap", path, error);
  }
  ::close(fd);  // the mapping keeps the file
  return static_cast<std::uint8_t*>(p);
}

}  // namespace

std::shared_ptr<SharedRegion> SharedRegion::create(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
  if (fd < 0) fail("create", path, errno);
  // Its pages are taken now: on a tmpfs that is full (or too small) the
  // buffer is refused here, where the error can say so, instead of killing
  // the first process that writes into a page with no room behind it.
  int error =
      ::fchmod(fd, 0660) != 0 ? errno : ::posix_fallocate(fd, 0, static_cast<off_t>(mapped(size)));
  if (error == EOPNOTSUPP || error == EINVAL)  // a file system without fallocate
    error = ::ftruncate(fd, static_cast<off_t>(mapped(size))) != 0 ? errno : 0;
  if (error != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    fail("size", path, error);
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
  if (fd < 0) fail("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < mapped(size)) {
    ::close(fd);
    fail("smaller than announced", path, EINVAL);
  }
  return std::shared_ptr<SharedRegion>(new SharedRegion(path, map(fd, size, path), size, false));
}

SharedRegion::SharedRegion(std::string path, std::uint8_t* base, std::size_t size, bool owner)
    : path_(std::move(path)), base_(base), data_(base + kBoardBytes), size_(size), owner_(owner) {}

void SharedRegion::make_private(std::size_t keep) {
  const std::size_t length = mapped(size_);
  void* fresh = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) fail("private copy", path_, errno);
  std::memcpy(static_cast<std::uint8_t*>(fresh) + kBoardBytes, data_, std::min(keep, size_));
  // Moves the new pages over the old mapping in one step: the addresses are
  // never unmapped in between.
  if (::mremap(fresh, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, base_) == MAP_FAILED) {
    const int saved = errno;
    ::munmap(fresh, length);
    fail("private copy (mremap)", path_, saved);
  }
}

void SharedRegion::remove_file() noexcept {
  if (owner_) ::unlink(path_.c_str());
  owner_ = false;
}

SharedRegion::~SharedRegion() {
  ::munmap(base_, mapped(size_));
  remove_file();
}

}  // namespace zring::transport
