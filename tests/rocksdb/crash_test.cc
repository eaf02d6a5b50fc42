// kill -9 crash consistency: a child process (crash_child.cc) saves,
// overwrites, deletes and collects garbage on one store while this process
// SIGKILLs it, at a random moment or exactly at a phase the child reports:
// while it writes staging SST files, after it creates the column family,
// between ingest and commit (and during the commit, just after), after the
// commit batch, between a delete's catalog write and its column family
// drop, and during GC. After every kill a copy of the store is checked: it
// opens; every checkpoint the catalog lists loads bit-exact; each id holds
// what its last finished operation left, or, for the operation cut short,
// the state before or after it and nothing else; GC then removes every
// leftover, so that no staging file remains and RocksDB's column families
// are exactly the catalog's. The store itself (with its leftovers) goes on
// to the next child, whose GC then meets them.
//
// Environment:
//   ROCKSDCP_CRASH_KILLS=N  kill this many times (default 200; 40 under
//                           ASan or TSan), in episodes of 20 kills on a
//                           fresh store each.
//   ROCKSDCP_CRASH_SEED=S   replay the one episode of seed S, as a failure
//                           prints it. Kills at a phase replay exactly;
//                           kills after a delay land about where they did.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "rocksdb/checkpoint_content.h"

namespace rocksdcp::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr int kRoundsPerEpisode = 20;
// Sanitizer builds run several times slower; they look for memory and
// thread errors, which a few episodes show as well as ten.
#ifdef ROCKSDCP_SANITIZED
constexpr uint64_t kDefaultKills = 40;
#else
constexpr uint64_t kDefaultKills = 200;
#endif
// Kills that wait for a phase give up after this long (a hang or a phase
// that never came), and count as "watchdog". A hang detector, not a time
// limit: a sanitized child on a machine running other tests beside it can
// take tens of seconds to reach a late phase.
constexpr auto kWatchdog = std::chrono::seconds(90);

// Where to kill the child in one round.
struct KillPlan {
  // Empty: kill `delay` after the child starts. Else: at the skip+1-th
  // time the child reports this phase, kill it while it waits there
  // (at_phase), or let it go on and kill it `delay` later.
  std::string phase;
  int skip = 0;
  bool at_phase = true;
  std::chrono::microseconds delay{0};

  std::string ToString() const {
    std::ostringstream os;
    if (phase.empty()) {
      os << "after " << delay.count() << " us";
    } else {
      os << "at " << phase << " #" << skip + 1;
      if (!at_phase) os << " + " << delay.count() << " us";
    }
    return os.str();
  }
};

// The child process, its report lines and the go-ahead it waits for.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int to_child[2], from_child[2];
    EXPECT_EQ(pipe2(to_child, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(from_child, O_CLOEXEC), 0);
    // posix_spawn rather than fork: this process has threads (RocksDB's).
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    std::vector<std::string> copy = args;
    std::vector<char*> argv{const_cast<char*>(ROCKSDCP_CRASH_CHILD)};
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, ROCKSDCP_CRASH_CHILD, &actions, nullptr,
                          argv.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
  }
  ~Child() {
    Kill();
    close(to_);
    close(from_);
  }

  enum class Read { kLine, kTimeout, kEof };
  // The next line the child wrote, waiting no later than `deadline`.
  Read ReadLine(Clock::time_point deadline, std::string* line) {
    while (true) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Read::kLine;
      }
      const auto left =
          std::max(Clock::duration::zero(), deadline - Clock::now());
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), ns % 1000000000};
      pollfd pfd{from_, POLLIN, 0};
      const int ready = ppoll(&pfd, 1, &ts, nullptr);
      if (ready == 0) return Read::kTimeout;
      if (ready < 0) continue;  // EINTR
      char buf[4096];
      const ssize_t n = read(from_, buf, sizeof(buf));
      if (n <= 0) return Read::kEof;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  void Go() {
    const char go = 'g';
    EXPECT_EQ(write(to_, &go, 1), 1) << "the child is gone";
  }

  // SIGKILLs the child (if it still runs) and reaps it; returns its wait
  // status.
  int Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

std::string WaitStatusString(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Copies a store directory, without RocksDB's info logs (LOG*): checks run
// on the copy, so that the store keeps its leftovers for the next child.
// SST files are never written once finished (and the child that might
// finish one is dead), so they are hard-linked rather than copied.
void CopyStore(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::create_directories(to);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path dst = to / fs::relative(e.path(), from);
    if (e.is_directory()) {
      fs::create_directories(dst);
    } else if (e.path().extension() == ".sst") {
      fs::create_hard_link(e.path(), dst);
    } else if (e.path().filename().string().rfind("LOG", 0) != 0) {
      fs::copy_file(e.path(), dst);
    }
  }
}

std::string Join(const std::set<uint64_t>& gens) {
  std::string out;
  for (uint64_t g : gens) out += (out.empty() ? "" : ", ") + std::to_string(g);
  return "{" + out + "}";
}

// Totals over every round, printed at the end.
struct CrashStats {
  std::map<std::string, int> kills;  // By kill point.
  int checkpoints_verified = 0;
  int cut_short_committed = 0;  // Operations cut short whose effect stayed.
  int cut_short_absent = 0;     // ... and those that left no trace.
  int orphan_cfs_dropped = 0;
  int staging_files_removed = 0;
};

// One store, killed kRoundsPerEpisode times. All randomness comes from the
// episode's seed.
class CrashEpisode {
 public:
  CrashEpisode(uint64_t seed, const fs::path& dir, CrashStats* stats)
      : seed_(seed), rng_(seed), dir_(dir), stats_(stats) {}

  // Returns after the first round that failed.
  void Run(int rounds) {
    for (round_ = 0; round_ < rounds; ++round_) {
      const KillPlan plan = PlanKill();
      SCOPED_TRACE("round " + std::to_string(round_) + ", kill " +
                   plan.ToString());
      RunChild(plan);
      if (::testing::Test::HasFailure()) return;
      // Killed before it made the store: nothing to check.
      if (!fs::exists(dir_ / "store" / "CURRENT")) continue;
      CopyStore(dir_ / "store", dir_ / "check");
      CheckStore(dir_ / "check");
      if (::testing::Test::HasFailure()) return;
    }
    SCOPED_TRACE("the store itself, after the last round");
    if (fs::exists(dir_ / "store" / "CURRENT")) CheckStore(dir_ / "store");
  }

 private:
  // Cycles through the kinds of kill point, so that every one is covered
  // whatever the seed; the details are random.
  KillPlan PlanKill() {
    static const char* const kPoints[] = {"",
                                          "write_piece",
                                          "after_create_cf",
                                          "after_ingest",
                                          "",
                                          "after_write",
                                          "delete_after_catalog",
                                          "gc_after_drop_cf",
                                          "",
                                          "gc_removing_staging",
                                          "opened",
                                          "after_ingest",
                                          "materialize_copied"};
    constexpr size_t n = std::size(kPoints);
    KillPlan plan;
    plan.phase = kPoints[(seed_ + round_) % n];
    // GC meets orphans only if some are left; else kill elsewhere.
    if ((plan.phase == "gc_after_drop_cf" && !leftover_cfs_) ||
        (plan.phase == "gc_removing_staging" && !leftover_staging_)) {
      plan.phase = "after_write";
    }
    if (plan.phase.empty()) {
      plan.delay = std::chrono::microseconds(rng_() % 200000);
      return plan;
    }
    plan.skip =
        static_cast<int>(rng_() % (plan.phase == "write_piece" ? 40 : 2));
    if (plan.phase.rfind("gc_", 0) == 0) plan.skip = 0;
    plan.at_phase = rng_() % 2 == 0;
    plan.delay = std::chrono::microseconds(rng_() % 2000);
    return plan;
  }

  // Runs a child until the plan's kill, and follows its reports.
  void RunChild(const KillPlan& plan) {
    const bool gc_first = plan.phase.rfind("gc_", 0) == 0;
    Child child({(dir_ / "store").string(), std::to_string(rng_()),
                 std::to_string(1 + round_ * 1000000ull),
                 gc_first ? "1" : "0"});
    auto deadline =
        Clock::now() + (plan.phase.empty() ? plan.delay : kWatchdog);
    current_op_ = "startup";
    int skip = plan.skip;
    bool waiting = false;  // The child waits at a phase for our go-ahead.
    std::string label;
    std::string line;
    while (label.empty()) {
      switch (child.ReadLine(deadline, &line)) {
        case Child::Read::kEof:
          ADD_FAILURE() << "the crash child ended by itself ("
                        << WaitStatusString(child.Kill()) << ")";
          return;
        case Child::Read::kTimeout:
          label = plan.phase.empty() ? "random delay, " + CurrentOp()
                  : waiting          ? plan.phase + " + delay"
                                     : "watchdog";
          break;
        case Child::Read::kLine:
          if (line.rfind("P ", 0) == 0 && line.substr(2) == plan.phase &&
              skip-- == 0) {
            if (plan.at_phase) {
              label = plan.phase;
              break;
            }
            deadline = Clock::now() + plan.delay;
            waiting = true;
          }
          Follow(line, &child);
      }
    }
    child.Kill();
    // The reports written before the kill (a finished operation's "D" may
    // still be in the pipe).
    while (child.ReadLine(Clock::now(), &line) == Child::Read::kLine) {
      if (line.rfind("P ", 0) != 0) Follow(line, nullptr);
    }
    ++stats_->kills[label];
  }

  // Updates the model from one report; lets a waiting child go on.
  void Follow(const std::string& line, Child* child) {
    if (line.rfind("P ", 0) == 0) {
      if (child != nullptr) child->Go();
      return;
    }
    if (line.rfind("B ", 0) != 0 && line.rfind("D ", 0) != 0) {
      ADD_FAILURE() << "crash child: " << line;
      return;
    }
    std::istringstream in(line.substr(2));
    std::string op, id;
    uint64_t gen = 0;
    in >> op;
    if (op == "save" || op == "delete") {
      // The id may hold a space: it runs to the gen (saves) or the end.
      std::string rest;
      std::getline(in >> std::ws, rest);
      if (op == "save") {
        const size_t sp = rest.rfind(' ');
        id = rest.substr(0, sp);
        gen = std::stoull(rest.substr(sp + 1));
      } else {
        id = rest;
      }
    }
    switch (line[0]) {
      case 'B':
        current_op_ = op;
        if (!id.empty()) {
          std::set<uint64_t>& allowed =
              allowed_.try_emplace(id, std::set<uint64_t>{0}).first->second;
          EXPECT_EQ(allowed.size(), 1u) << "operations overlap: " << line;
          allowed.insert(gen);
          pending_[id] = gen;
        }
        break;
      case 'D':
        current_op_.clear();
        if (!id.empty()) allowed_[id] = {gen};
        pending_.erase(id);
        break;
    }
  }

  std::string CurrentOp() const {
    return current_op_.empty() ? "between operations" : "during " + current_op_;
  }

  // Loads every id the child ever touched from `store`, checks what each
  // holds against the model, and returns it (gen 0: no checkpoint).
  std::map<std::string, uint64_t> VerifyAll(Store& store) {
    std::map<std::string, uint64_t> found;
    for (const auto& [id, allowed] : allowed_) {
      SCOPED_TRACE("checkpoint '" + id + "', which may hold generation " +
                   Join(allowed) + " (0: none)");
      auto gen = LoadAndVerifyContent(store, id);
      if (gen.ok()) {
        EXPECT_EQ(allowed.count(*gen), 1u) << "holds generation " << *gen;
        found[id] = *gen;
        ++stats_->checkpoints_verified;
      } else {
        EXPECT_THAT(gen, StatusIs(StatusCode::kNotFound, HasSubstr(id)));
        EXPECT_EQ(allowed.count(0), 1u) << "a committed checkpoint is lost";
        found[id] = 0;
      }
    }
    return found;
  }

  void CheckStore(const fs::path& path) {
    std::map<std::string, uint64_t> found;
    std::set<std::string> cfs{"default"};
    {
      // Leftovers stay for the GC below, which counts them.
      ASSERT_OK_AND_ASSIGN(
          std::unique_ptr<Store> store,
          Store::Open(path.string(), {.reclaim_torn_saves = false}));
      ASSERT_OK_AND_ASSIGN(std::vector<CheckpointInfo> list, store->List());
      for (const CheckpointInfo& info : list) {
        EXPECT_EQ(allowed_.count(info.id), 1u)
            << "the catalog lists '" << info.id << "', never saved";
        EXPECT_TRUE(cfs.insert(info.column_family).second)
            << "column family '" << info.column_family << "' listed twice";
      }
      // And those incremental checkpoints reference, which GC keeps.
      for (const CheckpointInfo& info : list) {
        cfs.insert(info.referenced_column_families.begin(),
                   info.referenced_column_families.end());
      }
      found = VerifyAll(*store);
      for (const CheckpointInfo& info : list) {
        EXPECT_NE(found[info.id], 0u) << "listed, but no load: " << info.id;
      }
      ASSERT_OK_AND_ASSIGN(GcReport gc, store->CollectGarbage());
      leftover_cfs_ = !gc.dropped_column_families.empty();
      leftover_staging_ = !gc.deleted_staging_files.empty();
      stats_->orphan_cfs_dropped += gc.dropped_column_families.size();
      stats_->staging_files_removed += gc.deleted_staging_files.size();
      EXPECT_THAT(StagingEntries(path.string()), ::testing::IsEmpty())
          << "staging leftovers after GC";
      ASSERT_OK_AND_ASSIGN(gc, store->CollectGarbage(/*dry_run=*/true));
      EXPECT_THAT(gc.dropped_column_families, ::testing::IsEmpty());
    }
    // GC dropped every orphan, and nothing that the catalog names or
    // references.
    EXPECT_EQ(ColumnFamiliesOnDisk(path.string()), cfs)
        << "RocksDB's column families after GC are not the catalog's";
    for (const auto& [id, target] : pending_) {
      ++(found[id] == target ? stats_->cut_short_committed
                             : stats_->cut_short_absent);
    }
    pending_.clear();
    for (auto& [id, allowed] : allowed_) allowed = {found[id]};
  }

  const uint64_t seed_;
  std::mt19937_64 rng_;
  const fs::path dir_;
  CrashStats* const stats_;
  int round_ = 0;
  // id -> the generations it may hold now (0: none). One element, but two
  // while an operation on it is under way.
  std::map<std::string, std::set<uint64_t>> allowed_;
  // id -> what the operation under way on it would leave (0: deleted).
  std::map<std::string, uint64_t> pending_;
  std::string current_op_;
  bool leftover_cfs_ = false, leftover_staging_ = false;
};

TEST(CrashHarnessTest, KillNineAtAnyPointLosesNoCommittedCheckpoint) {
  signal(SIGPIPE, SIG_IGN);  // A child that dies early must not kill us.
  const uint64_t replay = EnvU64("ROCKSDCP_CRASH_SEED", 0);
  const uint64_t kills = EnvU64("ROCKSDCP_CRASH_KILLS", kDefaultKills);
  const uint64_t base = replay != 0 ? replay : std::random_device()() + 1;
  const uint64_t episodes =
      replay != 0 ? 1 : (kills + kRoundsPerEpisode - 1) / kRoundsPerEpisode;
  CrashStats stats;
  for (uint64_t e = 0; e < episodes; ++e) {
    const uint64_t seed = base + e;
    ScopedTempDir dir;
    SCOPED_TRACE("episode seed " + std::to_string(seed) +
                 "; replay with ROCKSDCP_CRASH_SEED=" + std::to_string(seed));
    CrashEpisode(seed, dir.path(), &stats).Run(kRoundsPerEpisode);
    if (::testing::Test::HasFailure()) break;
  }

  int total = 0;
  std::printf("kill points (seeds %llu..%llu):\n",
              static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + episodes - 1));
  for (const auto& [point, n] : stats.kills) {
    std::printf("  %6d  %s\n", n, point.c_str());
    total += n;
  }
  std::printf(
      "%d kills, %d checkpoint loads verified bit-exact, operations cut "
      "short: %d took effect, %d left no trace; GC dropped %d orphan column "
      "families and %d staging files\n",
      total, stats.checkpoints_verified, stats.cut_short_committed,
      stats.cut_short_absent, stats.orphan_cfs_dropped,
      stats.staging_files_removed);
  if (::testing::Test::HasFailure()) return;
  EXPECT_EQ(total, static_cast<int>(episodes * kRoundsPerEpisode));
  EXPECT_EQ(stats.kills.count("watchdog"), 0u);
  // Every kind of kill point was reached (the GC ones need leftovers, which
  // a run of 200 always has).
  for (const char* point :
       {"write_piece", "after_create_cf", "after_ingest", "after_write",
        "delete_after_catalog", "gc_after_drop_cf", "gc_removing_staging"}) {
    if (episodes * kRoundsPerEpisode < 200) break;
    EXPECT_GT(stats.kills[point] + stats.kills[std::string(point) + " + delay"],
              0)
        << point;
  }
}

}  // namespace
}  // namespace rocksdcp::testing
