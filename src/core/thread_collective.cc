#include <condition_variable>
#include <mutex>

#include "rocksdcp/collective.h"

namespace rocksdcp {

// A reusable rendezvous. Round k writes slots_[k % 2]: a rank can only start
// round k + 2 after every rank arrived at round k + 1, hence after every
// rank finished reading round k, so two buffers suffice.
struct ThreadCollective::Shared {
  Shared(int n, int coord) : world_size(n), coordinator(coord) {
    for (auto& s : slots) s.resize(n);
  }

  const int world_size;
  const int coordinator;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t round[2] = {0, 0};  // Round number each buffer serves.
  int arrived[2] = {0, 0};
  std::vector<std::vector<std::string>> slots[2];
  std::vector<uint64_t> rounds_done;  // Per rank: rounds it completed.
  int departed = -1;                  // A rank that left the group.
};

std::vector<std::unique_ptr<ThreadCollective>> ThreadCollective::Group(
    int world_size, int coordinator_rank) {
  auto shared = std::make_shared<Shared>(world_size, coordinator_rank);
  shared->rounds_done.assign(world_size, 0);
  std::vector<std::unique_ptr<ThreadCollective>> group;
  for (int r = 0; r < world_size; ++r) {
    group.push_back(
        std::unique_ptr<ThreadCollective>(new ThreadCollective(shared, r)));
  }
  return group;
}

ThreadCollective::ThreadCollective(std::shared_ptr<Shared> shared, int rank)
    : shared_(std::move(shared)), rank_(rank) {}

ThreadCollective::~ThreadCollective() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->departed < 0) shared_->departed = rank_;
  shared_->cv.notify_all();
}

int ThreadCollective::world_size() const { return shared_->world_size; }
int ThreadCollective::coordinator_rank() const { return shared_->coordinator; }

Result<std::vector<std::vector<std::string>>> ThreadCollective::Exchange(
    std::vector<std::string> payload) {
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t my_round = s.rounds_done[rank_] + 1;
  const int b = static_cast<int>(my_round % 2);
  auto left = [&] {
    return Status::Aborted("rank " + std::to_string(s.departed) +
                           " left the thread group before collective round " +
                           std::to_string(my_round));
  };
  if (s.departed >= 0) return left();
  // Wait for the buffer to be free of round my_round - 2 readers; they are
  // done once the buffer's round advanced or nobody is in it.
  if (s.round[b] != my_round) {
    s.round[b] = my_round;
    s.arrived[b] = 0;
  }
  s.slots[b][rank_] = std::move(payload);
  if (++s.arrived[b] == s.world_size) s.cv.notify_all();
  s.cv.wait(lock,
            [&] { return s.arrived[b] == s.world_size || s.departed >= 0; });
  if (s.arrived[b] != s.world_size) return left();
  s.rounds_done[rank_] = my_round;
  return s.slots[b];
}

Result<std::vector<std::string>> ThreadCollective::Gather(std::string message) {
  std::vector<std::string> payload;
  payload.push_back(std::move(message));
  ROCKSDCP_ASSIGN_OR_RETURN(auto all, Exchange(std::move(payload)));
  std::vector<std::string> out;
  if (!is_coordinator()) return out;
  for (auto& p : all) out.push_back(std::move(p[0]));
  return out;
}

Result<std::string> ThreadCollective::Scatter(
    std::vector<std::string> messages) {
  if (is_coordinator() &&
      messages.size() != static_cast<size_t>(world_size())) {
    return Status::InvalidArgument("Scatter needs one message per rank: got " +
                                   std::to_string(messages.size()) + " for " +
                                   std::to_string(world_size()));
  }
  if (!is_coordinator()) messages.clear();
  ROCKSDCP_ASSIGN_OR_RETURN(auto all, Exchange(std::move(messages)));
  const auto& from = all[coordinator_rank()];
  if (from.size() != static_cast<size_t>(world_size())) {
    return Status::Aborted("the coordinator's Scatter failed");
  }
  return from[rank_];
}

Result<std::string> ThreadCollective::Broadcast(std::string message) {
  std::vector<std::string> payload;
  if (is_coordinator()) payload.push_back(std::move(message));
  ROCKSDCP_ASSIGN_OR_RETURN(auto all, Exchange(std::move(payload)));
  return all[coordinator_rank()].at(0);
}

Result<std::vector<std::string>> ThreadCollective::AllGather(
    std::string message) {
  std::vector<std::string> payload;
  payload.push_back(std::move(message));
  ROCKSDCP_ASSIGN_OR_RETURN(auto all, Exchange(std::move(payload)));
  std::vector<std::string> out;
  for (auto& p : all) out.push_back(std::move(p[0]));
  return out;
}

Status ThreadCollective::Barrier() { return Exchange({}).status(); }

}  // namespace rocksdcp
