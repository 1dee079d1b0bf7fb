// The staging board: a client's StagedTransfer and zringd's RegionStaging
// over two mappings of one shared buffer, as in two processes.
#define BOOST_TEST_MODULE transport
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <zring/error.hpp>

#include "client/staged_transfer.hpp"
#include "transport/shared_region.hpp"
#include "transport/staging_board.hpp"

using namespace zring;
using namespace zring::transport;
using zring::client::StagedTransfer;
using zring::client::TensorIo;

namespace {

struct TwoSides {
  std::string dir;
  std::shared_ptr<SharedRegion> daemon, client;
  explicit TwoSides(std::size_t bytes) {
    char tmpl[] = "/tmp/zring-board-XXXXXX";
    dir = ::mkdtemp(tmpl);
    daemon = SharedRegion::create(dir + "/buffer", bytes);
    client = SharedRegion::open(dir + "/buffer", bytes);
  }
  ~TwoSides() {
    client.reset();
    daemon.reset();
    std::filesystem::remove_all(dir);
  }
  float* daemon_values() const { return reinterpret_cast<float*>(daemon->data()); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_client_that_stops_staging_fails_the_op_with_a_timeout_naming_it) {
  TwoSides sides(1000 * sizeof(float));
  board_of(*sides.client).reset();
  board_of(*sides.client).stage(5);
  RegionStaging staging({sides.daemon}, {"rank 5 (local rank 0 of node 'x')"},
                        collective::StagingOrder(1000, 2, 0), std::chrono::milliseconds(200), 2, 0);
  staging.wait_staged(0, 5);  // there already
  try {
    staging.wait_staged(0, 10);
    BOOST_FAIL("wait_staged returned for values never staged");
  } catch (const Error& e) {
    BOOST_TEST(e.code() == ErrorCode::timeout);
    const std::string what = e.what();
    BOOST_TEST(what.find("rank 5 (local rank 0 of node 'x') stopped handing over its values") == 0,
               what);
    BOOST_TEST(what.find("(5 of 1000 in place)") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(staged_values_arrive_in_order_and_only_published_averages_come_out) {
  const std::size_t n = 1000;
  TwoSides sides(n * sizeof(float));
  std::vector<float> a(700), b(300), out_a(700, -1.0f), out_b(300, -1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1000.0f + static_cast<float>(i);
  std::vector<TensorIo> ios = {{a.data(), out_a.data(), 700, 0},
                               {b.data(), out_b.data(), 300, 700}};
  const collective::StagingOrder order(n, 2, 1);  // node 1 of 2: segment 1 first
  StagingBoard& client_board = board_of(*sides.client);
  client_board.reset();
  StagedTransfer transfer(ios, reinterpret_cast<float*>(sides.client->data()), client_board, order);
  transfer.stage();
  BOOST_TEST(board_of(*sides.daemon).staged.load() == n);
  {
    RegionStaging staging({sides.daemon}, {"rank 1"}, order, std::chrono::milliseconds(1000),
                          order.segments(), order.node());
    staging.wait_all();
    float* v = sides.daemon_values();
    for (std::size_t i = 0; i < n; ++i) {
      BOOST_REQUIRE_EQUAL(v[i], i < 700 ? a[i] : b[i - 700]);
      v[i] *= 2;  // "the averages"
    }
    // Segment 1 is [500, 1000): its first 250 are final.
    staging.publish(1, 250);
    transfer.take_published();
    BOOST_TEST(!transfer.complete());
    BOOST_TEST(transfer.copied_any());
    BOOST_TEST(!transfer.finished());
    for (std::size_t i = 0; i < 700; ++i)
      BOOST_REQUIRE_EQUAL(out_a[i], i >= 500 ? 2 * a[i] : -1.0f);
    for (std::size_t i = 0; i < 300; ++i) BOOST_REQUIRE_EQUAL(out_b[i], i < 50 ? 2 * b[i] : -1.0f);
  }  // zringd is done with the op
  BOOST_TEST(transfer.finished());
  transfer.take_rest();
  BOOST_TEST(transfer.complete());
  for (std::size_t i = 0; i < 700; ++i) BOOST_REQUIRE_EQUAL(out_a[i], 2 * a[i]);
  for (std::size_t i = 0; i < 300; ++i) BOOST_REQUIRE_EQUAL(out_b[i], 2 * b[i]);
}

// The copy form: each result holds the averages up to the furthest
// published, in its reserved memory, whatever order the segments come in;
// a gap below a segment published early is zero until its averages come.
BOOST_AUTO_TEST_CASE(copy_form_results_grow_as_segments_are_published_in_any_order) {
  const std::size_t n = 1000;
  TwoSides sides(n * sizeof(float));
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i) + 0.5f;
  std::vector<std::vector<float>> results(3);
  const std::size_t numel[3] = {400, 350, 250};
  std::vector<TensorIo> ios;
  std::vector<const float*> memory;
  for (std::size_t t = 0, at = 0; t < 3; at += numel[t++]) {
    results[t] = {-1.0f, -2.0f};  // emptied by the transfer
    results[t].reserve(numel[t]);
    memory.push_back(results[t].data());
    ios.push_back({in.data() + at, nullptr, numel[t], at, &results[t]});
  }
  const collective::StagingOrder order(n, 3, 1);  // [0, 333), [333, 666), [666, 1000)
  StagingBoard& client_board = board_of(*sides.client);
  client_board.reset();
  StagedTransfer transfer(ios, reinterpret_cast<float*>(sides.client->data()), client_board, order);
  for (const auto& r : results) BOOST_TEST(r.empty());
  transfer.stage();
  auto sizes = [&] {
    return std::vector<std::size_t>{results[0].size(), results[1].size(), results[2].size()};
  };
  const std::vector<float>& first = results[0];
  {
    RegionStaging staging({sides.daemon}, {"rank 1"}, order, std::chrono::milliseconds(1000),
                          order.segments(), order.node());
    staging.wait_all();
    float* v = sides.daemon_values();
    for (std::size_t i = 0; i < n; ++i) v[i] *= 2;
    staging.publish(1, 333);  // all of segment 1: the first tensor's end, the second's start
    transfer.take_published();
    BOOST_TEST(sizes() == (std::vector<std::size_t>{400, 266, 0}),
               boost::test_tools::per_element());
    BOOST_TEST(first[0] == 0.0f);
    BOOST_TEST(first[332] == 0.0f);
    BOOST_TEST(first[333] == 2 * in[333]);
    BOOST_TEST(results[1][265] == 2 * in[665]);
    staging.publish(0, 200);  // into the gap
    transfer.take_published();
    BOOST_TEST(sizes() == (std::vector<std::size_t>{400, 266, 0}),
               boost::test_tools::per_element());
    BOOST_TEST(first[199] == 2 * in[199]);
    BOOST_TEST(first[200] == 0.0f);
  }
  transfer.take_rest();
  BOOST_TEST(transfer.complete());
  for (std::size_t t = 0, at = 0; t < 3; at += numel[t++]) {
    BOOST_TEST(results[t].data() == memory[t]);  // never moved
    BOOST_REQUIRE_EQUAL(results[t].size(), numel[t]);
    for (std::size_t i = 0; i < numel[t]; ++i) BOOST_REQUIRE_EQUAL(results[t][i], 2 * in[at + i]);
  }
}

BOOST_AUTO_TEST_CASE(a_reset_board_holds_nothing_of_the_last_op) {
  TwoSides sides(64 * sizeof(float));
  StagingBoard& board = board_of(*sides.client);
  board.stage(64);
  board.published[0].store(32);
  board.finished.store(1);
  board.reset();
  const StagingBoard& seen = board_of(*sides.daemon);
  BOOST_TEST(seen.staged.load() == 0u);
  BOOST_TEST(seen.published[0].load() == 0u);
  BOOST_TEST(seen.finished.load() == 0u);
}

// zringd's answer on the board reaches the client's mapping whole, for the
// request it answers only, and wakes a client asleep on the board.
BOOST_AUTO_TEST_CASE(an_answer_on_the_board_is_for_its_request_alone) {
  TwoSides sides(64 * sizeof(float));
  const StagingBoard& client = board_of(*sides.client);
  BOOST_TEST(!client.answer_to(1).has_value());  // a new buffer answers nothing
  zring::wire::Result result;
  result.request = 7;
  result.op = 41;
  result.wire_bytes = 1u << 20;
  result.dense_bytes = 4u << 20;
  result.world_size = 8;
  result.rank = 5;
  result.in_shared_buffer = true;
  const std::uint32_t seen = client.published_seq.load();
  std::thread daemon([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    board_of(*sides.daemon).answer(result);
  });
  while (!client.answer_to(7))
    StagingBoard::sleep_while(client.published_seq, client.published_seq.load(),
                              std::chrono::seconds(10));
  daemon.join();
  BOOST_TEST(client.published_seq.load() != seen);
  BOOST_TEST((*client.answer_to(7) == result));
  BOOST_TEST(!client.answer_to(6).has_value());
  BOOST_TEST(!client.answer_to(8).has_value());
  BOOST_TEST(!client.answer_to(0).has_value());
}
