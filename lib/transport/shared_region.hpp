// shared_region.hpp - a file mapped by the daemon and one client (internal).
//
// Large values cross between a training process and its zringd through a
// file in the daemon's runtime directory (next to its IPC socket), mapped
// by both: the client writes its gradients there and reads the average back,
// with no copy through a socket. The file has the IPC socket's permissions
// (0660): whoever may talk to the daemon may use it. The file starts with
// a page of progress counters (staging_board.hpp); the values follow it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zring::transport {

class SharedRegion {
 public:
  // Creates path (it must not exist) with room for `size` bytes of values
  // (and the board before them) and maps it.
  static std::shared_ptr<SharedRegion> create(const std::string& path, std::size_t size);
  // Maps an existing file, which must hold at least `size` bytes of values.
  static std::shared_ptr<SharedRegion> open(const std::string& path, std::size_t size);

  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  ~SharedRegion();  // unmaps; removes the file if this side created it and it is still there

  // Removes the file (the side that created it, once): the mappings stay,
  // and the memory goes when the last of them does. zringd calls it when
  // the client's first op in the buffer shows the client has mapped it;
  // from then on a zringd that dies leaves nothing behind.
  void remove_file() noexcept;

  // The values (page aligned) and how many bytes of them there are.
  [[nodiscard]] std::uint8_t* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  // Replaces the mapping by private memory at the same address holding the
  // same first `keep` bytes (the rest zero): from then on what the other
  // side writes into the file is no longer seen here, and pointers into
  // data() stay valid. Throws connection_failed when the kernel refuses.
  void make_private(std::size_t keep);

 private:
  SharedRegion(std::string path, std::uint8_t* base, std::size_t size, bool owner);
  std::string path_;
  std::uint8_t* base_;  // the mapping: the board, then the values
  std::uint8_t* data_;
  std::size_t size_;
  bool owner_;  // created here and not yet removed
};

}  // namespace zring::transport
