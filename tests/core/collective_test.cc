// LocalCollective and ThreadCollective: each collective delivers every
// rank's message where DCP's protocol needs it.

#include "rocksdcp/collective.h"

#include <thread>

#include "test_util.h"

namespace rocksdcp::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(LocalCollectiveTest, IsTheIdentityOnOneRank) {
  LocalCollective c;
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_TRUE(c.is_coordinator());
  ASSERT_OK_AND_ASSIGN(auto gathered, c.Gather("a"));
  EXPECT_THAT(gathered, ElementsAre("a"));
  ASSERT_OK_AND_ASSIGN(std::string mine, c.Scatter({"b"}));
  EXPECT_EQ(mine, "b");
  EXPECT_THAT(c.Scatter({"x", "y"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exactly 1")));
}

TEST(ThreadCollectiveTest, GatherScatterBroadcastAllGather) {
  constexpr int kRanks = 4;
  constexpr int kCoordinator = 2;  // Not rank 0, on purpose.
  std::vector<std::vector<std::string>> gathered(kRanks);
  std::vector<std::string> scattered(kRanks), broadcast(kRanks);
  std::vector<std::vector<std::string>> all(kRanks);
  RunRanks(kRanks, kCoordinator, [&](int r, Collective& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.coordinator_rank(), kCoordinator);
    auto g = c.Gather("from" + std::to_string(r));
    ASSERT_OK(g);
    gathered[r] = *g;
    std::vector<std::string> to;
    if (c.is_coordinator()) {
      for (int i = 0; i < kRanks; ++i) to.push_back("to" + std::to_string(i));
    }
    auto s = c.Scatter(to);
    ASSERT_OK(s);
    scattered[r] = *s;
    auto b = c.Broadcast(c.is_coordinator() ? "hello" : "ignored");
    ASSERT_OK(b);
    broadcast[r] = *b;
    ASSERT_OK(c.Barrier());
    auto a = c.AllGather(std::string(r + 1, 'x'));
    ASSERT_OK(a);
    all[r] = *a;
  });
  for (int r = 0; r < kRanks; ++r) {
    if (r == kCoordinator) {
      EXPECT_THAT(gathered[r], ElementsAre("from0", "from1", "from2", "from3"));
    } else {
      EXPECT_THAT(gathered[r], IsEmpty());
    }
    EXPECT_EQ(scattered[r], "to" + std::to_string(r));
    EXPECT_EQ(broadcast[r], "hello");
    EXPECT_THAT(all[r], ElementsAre("x", "xx", "xxx", "xxxx"));
  }
}

TEST(ThreadCollectiveTest, ManyRoundsStayInStep) {
  constexpr int kRanks = 3;
  std::vector<int> sums(kRanks);
  RunRanks(kRanks, 0, [&](int r, Collective& c) {
    for (int round = 0; round < 500; ++round) {
      auto a = c.AllGather(std::to_string(round * 10 + r));
      ASSERT_OK(a);
      for (const auto& m : *a) sums[r] += std::stoi(m) - round * 10;
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(sums[r], 500 * (0 + 1 + 2));
}

TEST(ThreadCollectiveTest, RankLeavingAbortsTheOthers) {
  auto group = ThreadCollective::Group(3);
  Status seen[2];
  std::thread t0([&] { seen[0] = group[0]->Barrier(); });
  std::thread t1([&] { seen[1] = group[1]->Barrier(); });
  group[2].reset();  // Rank 2 exits without joining the barrier.
  t0.join();
  t1.join();
  for (const Status& s : seen) {
    EXPECT_THAT(s, StatusIs(StatusCode::kAborted, HasSubstr("rank 2 left")));
  }
}

}  // namespace
}  // namespace rocksdcp::testing
