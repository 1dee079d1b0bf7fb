#include "collective/ring_allgather.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace zring::collective {
namespace {

class RingAllgather {
 public:
  RingAllgather(RingLink& link, Phase phase, const std::vector<std::size_t>& sizes,
                const RingOptions& options, RingStats& stats, const Arrived& arrived)
      : link_(link), phase_(phase), sizes_(sizes), options_(options), stats_(stats),
        arrived_(arrived),
        nodes_(link.nodes()), self_(link.node()), parts_(nodes_), received_(nodes_),
        out_(nodes_), pieces_(nodes_, 0), still_(nodes_, 0) {}

  std::vector<Bytes> run(Bytes mine) {
    const std::size_t chunk = std::max<std::size_t>(options_.chunk_bytes, 1);
    for (std::size_t n = 0; n < nodes_; ++n) {
      pieces_[n] = sizes_.empty() ? 1 : std::max<std::size_t>((sizes_[n] + chunk - 1) / chunk, 1);
      received_[n].assign(pieces_[n], false);
      parts_[n].resize(pieces_[n]);
      still_[n] = pieces_[n];
    }
    std::size_t missing = 0;
    for (std::size_t n = 0; n < nodes_; ++n)
      if (n != self_) missing += pieces_[n];
    send_own(mine, chunk);
    out_[self_] = std::move(mine);
    if (arrived_) arrived_(self_, out_[self_]);
    while (missing > 0) {
      Message msg = link_.recv(Clock::now() + options_.timeout);
      if (accept(msg)) --missing;
    }
    return std::move(out_);
  }

 private:
  void send_own(const Bytes& mine, std::size_t chunk) {
    if (nodes_ == 1) return;
    const std::size_t pieces = pieces_[self_];
    for (std::size_t c = 0; c < pieces; ++c) {
      const std::size_t begin = sizes_.empty() ? 0 : c * chunk;
      const std::size_t end = sizes_.empty() ? mine.size() : std::min(mine.size(), begin + chunk);
      send({phase_, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(c), 1},
           Bytes(mine.data() + begin, end - begin, mine.owner()));
    }
  }

  bool accept(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    const std::size_t origin = tag.segment;
    if (tag.phase != phase_ || origin >= nodes_ || origin == self_ ||
        tag.chunk >= pieces_[origin] || tag.hop != (self_ + nodes_ - origin) % nodes_ ||
        received_[origin][tag.chunk]) {
      stats_.drop("unexpected or duplicate message (phase " +
                  std::to_string(static_cast<int>(tag.phase)) + ", origin " +
                  std::to_string(origin) + ", chunk " + std::to_string(tag.chunk) + ", hop " +
                  std::to_string(tag.hop) + ") during an all-gather");
      return false;
    }
    if (!sizes_.empty() && msg.payload.size() != expected_size(origin, tag.chunk)) {
      stats_.drop("chunk of " + std::to_string(msg.payload.size()) + " bytes where " +
                  std::to_string(expected_size(origin, tag.chunk)) + " were announced");
      return false;
    }
    received_[origin][tag.chunk] = true;
    parts_[origin][tag.chunk] = msg.payload;
    if (tag.hop + 1 < nodes_) send({tag.phase, tag.segment, tag.chunk, tag.hop + 1}, msg.payload);
    if (--still_[origin] == 0) {
      out_[origin] = assemble(origin);
      if (arrived_) arrived_(origin, out_[origin]);
    }
    return true;
  }

  std::size_t expected_size(std::size_t origin, std::size_t chunk) const {
    const std::size_t size = std::max<std::size_t>(options_.chunk_bytes, 1);
    return std::min(size, sizes_[origin] - std::min(sizes_[origin], chunk * size));
  }

  Bytes assemble(std::size_t origin) {
    std::vector<Bytes>& parts = parts_[origin];
    if (parts.size() == 1) return std::move(parts[0]);
    std::size_t total = 0;
    for (const Bytes& p : parts) total += p.size();
    OwnedBuffer whole = allocate(total);
    std::size_t at = 0;
    for (const Bytes& p : parts) {
      if (p.size() != 0) std::memcpy(whole.data.get() + at, p.data(), p.size());
      at += p.size();
    }
    parts.clear();
    return whole.bytes();
  }

  void send(const ChunkTag& tag, Bytes payload) {
    stats_.bytes_sent += payload.size();
    ++stats_.messages_sent;
    link_.send(tag, std::move(payload));
  }

  RingLink& link_;
  Phase phase_;
  const std::vector<std::size_t>& sizes_;
  const RingOptions& options_;
  RingStats& stats_;
  const Arrived& arrived_;
  std::size_t nodes_;
  std::size_t self_;
  std::vector<std::vector<Bytes>> parts_;
  std::vector<std::vector<bool>> received_;
  std::vector<Bytes> out_;
  std::vector<std::size_t> pieces_;  // messages per origin
  std::vector<std::size_t> still_;   // messages per origin not yet here
};

}  // namespace

std::vector<Bytes> ring_allgather(RingLink& link, Phase phase, Bytes mine,
                                  const std::vector<std::size_t>& sizes,
                                  const RingOptions& options, RingStats& stats,
                                  const Arrived& arrived) {
  return RingAllgather(link, phase, sizes, options, stats, arrived).run(std::move(mine));
}

}  // namespace zring::collective
