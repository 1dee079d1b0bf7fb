#include "collective/ring_allgather.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace zring::collective {
namespace {

// The hop of a message sent straight from its origin (RingLink::send_to);
// round the ring, hops count from 1.
constexpr std::uint32_t kDirect = 0;

// One all-gather, driven message by message, so that two can share a
// receive loop. Each origin's contribution is expected either as one
// message of any size, as a known number of bytes in chunks, or as a known
// number of frames (ring_allgather.hpp); what is expected of an origin may
// be learned while the gather runs.
class RingAllgather {
 public:
  // piece(size): the bytes per message of a contribution of `size` bytes
  // (a function of the size alone, so every node cuts it the same way).
  using Piece = std::function<std::size_t(std::size_t size)>;

  RingAllgather(RingLink& link, Phase phase, RingStats& stats, const Arrived& arrived, Piece piece)
      : link_(link),
        phase_(phase),
        stats_(stats),
        arrived_(arrived),
        piece_(std::move(piece)),
        nodes_(link.nodes()),
        self_(link.node()),
        size_(nodes_),
        chunk_(nodes_, 1),
        known_(nodes_, false),
        parts_(nodes_),
        received_(nodes_),
        out_(nodes_),
        still_(nodes_, 0),
        frames_(nodes_, 0),
        next_(nodes_, 0),
        direct_(nodes_, true) {}

  // Framed data: what origin sends is `frames` frames of `bytes` in all
  // (ring_allgather.hpp), each handed to frame_arrived as it comes, and
  // this node's own made by make(f) as the window lets them go (pump).
  void frame_hooks(const FrameArrived* frame_arrived, std::function<Bytes(std::size_t)> make) {
    frame_arrived_ = frame_arrived;
    make_ = std::move(make);
  }

  // What origin sends: one message of any size (nullopt), `bytes` bytes
  // in pieces (none when 0), or `frames` frames of `bytes` in all. Once per
  // origin, before its messages count.
  void expect(std::size_t origin, std::optional<std::size_t> bytes, std::size_t frames = 0) {
    std::size_t messages = frames;
    direct_[origin] = frames <= kFrameWindow;
    if (frames > 0) {
      frames_[origin] = frames;
    } else {
      chunk_[origin] = bytes ? std::max<std::size_t>(piece_(*bytes), 1) : 1;
      messages = bytes ? (*bytes + chunk_[origin] - 1) / chunk_[origin] : 1;
      received_[origin].assign(messages, false);
      parts_[origin].resize(messages);
    }
    size_[origin] = bytes;
    known_[origin] = true;
    still_[origin] = origin == self_ ? 0 : messages;
    missing_ += still_[origin];
    ++known_count_;
  }

  // Keeps this node's contribution (expect(self) first); framed data is
  // sent as the window lets it go, the rest by send_own.
  void keep_own(Bytes mine) {
    started_ = true;
    if (frames_[self_] > 0) {
      pump();
      return;
    }
    out_[self_] = std::move(mine);
  }

  // Hands this node's (unframed) contribution to the arrived hook.
  void own_arrived() {
    if (frames_[self_] == 0 && arrived_) arrived_(self_, out_[self_]);
  }

  // Sends this node's contribution (unframed, kept first): straight to
  // every node, or round the ring.
  void send_own(bool direct) {
    if (frames_[self_] > 0) return;
    const Bytes& mine = out_[self_];
    const std::size_t pieces = parts_[self_].size();
    for (std::size_t c = 0; c < pieces; ++c) {
      const std::size_t chunk = chunk_[self_];
      const std::size_t begin = size_[self_] ? c * chunk : 0;
      const std::size_t end = size_[self_] ? std::min(mine.size(), begin + chunk) : mine.size();
      send_own_message(direct, c, Bytes(mine.data() + begin, end - begin, mine.owner()));
    }
  }

  // How this node's data goes: straight to every node, unless it is more
  // frames than the window holds (ring_allgather.hpp). expect(self) first.
  [[nodiscard]] bool direct(std::size_t origin) const noexcept { return direct_[origin]; }

  // An origin whose messages are still awaited (the first after this
  // node, round the ring), if any.
  [[nodiscard]] std::optional<std::size_t> awaited() const noexcept {
    for (std::size_t hop = 1; hop < nodes_; ++hop) {
      const std::size_t origin = (self_ + hop) % nodes_;
      if (!known_[origin] || still_[origin] > 0) return origin;
    }
    return std::nullopt;
  }

  [[nodiscard]] bool done() const noexcept {
    return known_count_ == nodes_ && missing_ == 0 && next_[self_] == frames_[self_];
  }

  // Sends this node's next frames while the window lets them go, all of
  // them before any is worked on here.
  void pump() {
    const std::size_t first = next_[self_];
    std::vector<Bytes> sent;
    while (started_ && next_[self_] < frames_[self_] && may_send(next_[self_])) {
      const std::size_t f = next_[self_]++;
      sent.push_back(make_(f));
      send_own_message(direct_[self_], f, sent.back());
    }
    for (std::size_t i = 0; i < sent.size(); ++i)
      if (*frame_arrived_) (*frame_arrived_)(self_, first + i, sent[i]);
  }

  // Takes a message of this gather's phase: stores it, or drops it
  // (counted) when it is not one that is expected.
  void accept(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    const std::size_t origin = tag.segment;
    if (tag.phase != phase_ || origin >= nodes_ || origin == self_ ||
        (tag.hop != kDirect && tag.hop != (self_ + nodes_ - origin) % nodes_)) {
      drop(tag, "unexpected message");
      return;
    }
    if (!known_[origin]) {
      drop(tag, "message ahead of what its node announced");
      return;
    }
    if (frames_[origin] > 0) {
      accept_frame(msg);
      return;
    }
    if (tag.chunk >= parts_[origin].size() || received_[origin][tag.chunk]) {
      drop(tag, "unexpected or duplicate message");
      return;
    }
    if (size_[origin] && msg.payload.size() != expected_size(origin, tag.chunk)) {
      stats_.drop("chunk of " + std::to_string(msg.payload.size()) + " bytes where " +
                  std::to_string(expected_size(origin, tag.chunk)) + " were announced");
      return;
    }
    received_[origin][tag.chunk] = true;
    parts_[origin][tag.chunk] = msg.payload;
    forward(msg);
    --missing_;
    if (--still_[origin] == 0) {
      out_[origin] = assemble(origin);
      if (arrived_) arrived_(origin, out_[origin]);
    }
  }

  std::vector<Bytes> take() { return std::move(out_); }

 private:
  void drop(const ChunkTag& tag, const char* what) {
    stats_.drop(std::string(what) + " (phase " + std::to_string(static_cast<int>(tag.phase)) +
                ", origin " + std::to_string(tag.segment) + ", chunk " + std::to_string(tag.chunk) +
                ", hop " + std::to_string(tag.hop) + ") during an all-gather");
  }

  // Every node's frame `frame` is here, or it has no such frame.
  bool may_send(std::size_t frame) const noexcept {
    if (frame < kFrameWindow) return true;
    const std::size_t before = frame - kFrameWindow;
    for (std::size_t o = 0; o < nodes_; ++o)
      if (!known_[o] || (next_[o] <= before && frames_[o] > before)) return false;
    return true;
  }

  void accept_frame(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    const std::size_t origin = tag.segment;
    if (tag.chunk != next_[origin] || next_[origin] >= frames_[origin]) {
      drop(tag, "frame out of order or duplicate");
      return;
    }
    if (msg.payload.size() > *size_[origin]) {
      stats_.drop("frame of " + std::to_string(msg.payload.size()) + " bytes where " +
                  std::to_string(*size_[origin]) + " were left of those announced");
      return;
    }
    *size_[origin] -= msg.payload.size();
    ++next_[origin];
    forward(msg);
    --missing_;
    --still_[origin];
    pump();  // what the window now lets go leaves before the frame is worked on
    if (*frame_arrived_) (*frame_arrived_)(origin, tag.chunk, msg.payload);
  }

  std::size_t expected_size(std::size_t origin, std::size_t chunk) const {
    const std::size_t size = *size_[origin];
    const std::size_t piece = chunk_[origin];
    return std::min(piece, size - std::min(size, chunk * piece));
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

  // Message `index` of this node's contribution: straight to every other
  // node (hop kDirect), or to the successor (hop 1), which passes it on.
  void send_own_message(bool direct, std::size_t index, const Bytes& payload) {
    const ChunkTag tag{phase_, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(index),
                       direct ? kDirect : 1u};
    for (std::size_t hop = 1; hop < nodes_; ++hop) {
      count(payload);
      if (!direct) {
        link_.send(tag, payload);
        return;
      }
      link_.send_to((self_ + hop) % nodes_, tag, payload);
    }
  }

  // A message that came round the ring goes on until it is back before its origin.
  void forward(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    if (tag.hop == kDirect || tag.hop + 1 >= nodes_) return;
    count(msg.payload);
    link_.send({tag.phase, tag.segment, tag.chunk, tag.hop + 1}, msg.payload);
  }

  void count(const Bytes& payload) {
    stats_.bytes_sent += payload.size();
    ++stats_.messages_sent;
  }

  RingLink& link_;
  Phase phase_;
  RingStats& stats_;
  const Arrived& arrived_;
  Piece piece_;
  std::size_t nodes_;
  std::size_t self_;
  std::vector<std::optional<std::size_t>> size_;  // per origin; nullopt: one message
  std::vector<std::size_t> chunk_;                // per origin: bytes per message
  std::vector<bool> known_;                       // per origin: expect() was called
  std::vector<std::vector<Bytes>> parts_;
  std::vector<std::vector<bool>> received_;
  std::vector<Bytes> out_;
  std::vector<std::size_t> still_;  // messages per origin not yet here
  std::size_t missing_ = 0;         // messages not yet here, over the origins known
  std::size_t known_count_ = 0;
  bool started_ = false;
  // Framed data, per origin: frames announced, and how many arrived (this
  // node's own: sent); size_ then counts down the bytes still announced.
  std::vector<std::size_t> frames_, next_;
  std::vector<bool> direct_;  // per origin: data sent straight to every node (expect())
  const FrameArrived* frame_arrived_ = nullptr;
  std::function<Bytes(std::size_t)> make_;
};

}  // namespace

WithData ring_allgather_with_data(RingLink& link, const Mine& mine, const DataSize& data_size,
                                  const RingOptions& options, RingStats& stats,
                                  const Arrived& data_arrived, const FrameArrived& frame_arrived) {
  // About an eighth of the data per piece, so that it moves in a pipeline,
  // in whole 4 KiB, from 64 KiB to chunk_bytes.
  const std::size_t most = std::max<std::size_t>(options.chunk_bytes, 1);
  const auto piece = [most](std::size_t size) {
    const std::size_t eighth = (size / 8 + 4095) / 4096 * 4096;
    return std::min(most, std::max<std::size_t>(eighth, 64 * 1024));
  };
  RingAllgather data(link, Phase::blobs, stats, data_arrived, piece);
  data.frame_hooks(&frame_arrived, mine.frame);
  // A summary, as it arrives, says what data to expect from its node.
  const Arrived announce = [&](std::size_t node, const Bytes& bytes) {
    const DataSpec spec = data_size(node, bytes).value_or(DataSpec{});
    data.expect(node, spec.bytes, spec.frames);
  };
  RingAllgather summaries(link, Phase::manifest, stats, announce,
                          [](std::size_t size) { return size; });
  for (std::size_t n = 0; n < link.nodes(); ++n) summaries.expect(n, std::nullopt);
  bool started = false;
  const auto start_when_ready = [&] {
    if (started || !mine.ready()) return;
    auto [summary, payload] = mine.take();
    const SendBatch together(link);  // the summary, its data and what goes ahead
    summaries.keep_own(std::move(summary));
    summaries.own_arrived();  // announces this node's own data
    // A node's summary goes the way its data goes, so that it comes first.
    const bool direct = data.direct(link.node());
    summaries.send_own(direct);
    data.keep_own(std::move(payload));
    data.send_own(direct);
    data.own_arrived();
    started = true;
    if (mine.sent) mine.sent();
  };
  start_when_ready();
  // While this node's own are being made, the thread that makes them wakes
  // this one when they are (RingLink::wake; a slice bounds the wait all the
  // same); the timeout counts only once they are on their way (until then
  // the others wait for this node, not the other way round).
  constexpr auto kSlice = std::chrono::milliseconds(10);
  std::vector<Message> later;  // the predecessor may already be in the next phase
  while (!started || !summaries.done() || !data.done()) {
    const Deadline deadline = Clock::now() + (started ? options.timeout : kSlice);
    const std::optional<Message> msg = link.recv_until(deadline);
    if (!msg && started && Clock::now() >= deadline)  // not a wake
      link.timed_out(summaries.awaited().value_or(data.awaited().value_or(link.node())));
    if (msg) {
      if (msg->tag.phase == Phase::blobs)
        data.accept(*msg);
      else if (msg->tag.phase == Phase::manifest)
        summaries.accept(*msg);
      else
        later.push_back(std::move(*msg));
    }
    start_when_ready();
    data.pump();
  }
  link.put_back(std::move(later));
  return {summaries.take(), data.take()};
}

}  // namespace zring::collective
