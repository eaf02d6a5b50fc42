// Collective: how the ranks of one checkpoint talk to each other.
//
// The driver (checkpoint.h) runs DCP's protocol over this interface:
// gather plans to the coordinator, scatter plans back, gather results,
// broadcast metadata, and agree on errors. Messages are opaque bytes.
//
// Every rank must make the same sequence of collective calls; a call
// returns on a rank once that rank's part is done.
//
// Thread safety: a Collective object belongs to one rank and is used from
// that rank's thread.

#ifndef ROCKSDCP_COLLECTIVE_H_
#define ROCKSDCP_COLLECTIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int coordinator_rank() const = 0;
  bool is_coordinator() const { return rank() == coordinator_rank(); }

  // Sends `message` to the coordinator. On the coordinator, returns every
  // rank's message in rank order; elsewhere an empty vector.
  virtual Result<std::vector<std::string>> Gather(std::string message) = 0;

  // The coordinator passes one message per rank (others pass an empty
  // vector); each rank gets its own.
  virtual Result<std::string> Scatter(std::vector<std::string> messages) = 0;

  // The coordinator's `message` reaches every rank.
  virtual Result<std::string> Broadcast(std::string message) = 0;

  // Every rank's message reaches every rank, in rank order.
  virtual Result<std::vector<std::string>> AllGather(std::string message) = 0;

  virtual Status Barrier() = 0;
};

// World size 1: the single rank is the coordinator; every collective is the
// identity.
class LocalCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int coordinator_rank() const override { return 0; }
  Result<std::vector<std::string>> Gather(std::string message) override;
  Result<std::string> Scatter(std::vector<std::string> messages) override;
  Result<std::string> Broadcast(std::string message) override;
  Result<std::vector<std::string>> AllGather(std::string message) override;
  Status Barrier() override { return Status::OK(); }
};

// N ranks as N threads of one process: the single-node trainer with one
// thread per device. Make the group once, hand member r to rank r's thread.
//
// Every member must make the same sequence of calls. A member destroyed
// while others wait for it makes their pending and later calls fail with
// Aborted naming it, so one rank's early exit can't hang the rest.
class ThreadCollective final : public Collective {
 public:
  // REQUIRES: world_size >= 1, 0 <= coordinator_rank < world_size.
  static std::vector<std::unique_ptr<ThreadCollective>> Group(
      int world_size, int coordinator_rank = 0);

  ~ThreadCollective() override;
  ThreadCollective(const ThreadCollective&) = delete;
  ThreadCollective& operator=(const ThreadCollective&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override;
  int coordinator_rank() const override;
  Result<std::vector<std::string>> Gather(std::string message) override;
  Result<std::string> Scatter(std::vector<std::string> messages) override;
  Result<std::string> Broadcast(std::string message) override;
  Result<std::vector<std::string>> AllGather(std::string message) override;
  Status Barrier() override;

 private:
  struct Shared;
  ThreadCollective(std::shared_ptr<Shared> shared, int rank);
  // Deposits `payload` and waits until every rank has; returns all
  // payloads in rank order.
  Result<std::vector<std::vector<std::string>>> Exchange(
      std::vector<std::string> payload);

  std::shared_ptr<Shared> shared_;
  const int rank_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_COLLECTIVE_H_
