#include "rocksdcp/mpi_collective.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rocksdcp {

namespace {

// What a rank announces in place of a size it can't send, so that every
// rank fails the call together instead of some of them waiting forever in
// the data phase.
constexpr int64_t kTooLarge = -1;     // Over INT_MAX bytes.
constexpr int64_t kInvalidCall = -2;  // The coordinator's arguments are bad.

constexpr int64_t kMaxCount = INT_MAX;  // MPI counts and displacements.

std::string MpiErrorString(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(rc);
  }
  return std::string(text, len);
}

}  // namespace

struct MpiCollective::Rep {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int world_size = 1;
  int coordinator = 0;

  std::string Where(const char* what) const {
    return std::string(what) + " on rank " + std::to_string(rank) + " of " +
           std::to_string(world_size);
  }

  // OK, or IOError naming the MPI function, this rank and MPI's reason.
  Status Check(const char* function, int rc) const {
    if (rc == MPI_SUCCESS) return Status::OK();
    return Status::IOError(Where(function) + " failed: " + MpiErrorString(rc));
  }

  // Every rank's announced size, checked the same way on every rank (all
  // see the same sizes, so all reach the same verdict). Fills counts and
  // displacements for the data phase.
  Status PlanReceive(const char* op, const std::vector<int64_t>& sizes,
                     std::vector<int>* counts, std::vector<int>* displs,
                     int64_t* total) const {
    std::string too_large;
    *total = 0;
    counts->resize(sizes.size());
    displs->resize(sizes.size());
    for (size_t r = 0; r < sizes.size(); ++r) {
      if (sizes[r] < 0) {
        too_large += (too_large.empty() ? "" : ", ") + std::to_string(r);
        continue;
      }
      (*counts)[r] = static_cast<int>(sizes[r]);
      (*displs)[r] = static_cast<int>(std::min(*total, kMaxCount));
      *total += sizes[r];
    }
    if (!too_large.empty()) {
      return Status::InvalidArgument(
          Where(op) + ": the message of rank(s) " + too_large +
          " is over INT_MAX bytes, which MPI counts can't describe");
    }
    if (*total > kMaxCount) {
      return Status::InvalidArgument(
          Where(op) + ": the messages total " + std::to_string(*total) +
          " bytes, over the INT_MAX that MPI displacements can describe");
    }
    return Status::OK();
  }

  // The first phase of Gather and AllGather: every rank announces its
  // message's size to every rank (so that a size MPI can't carry fails the
  // call on every rank before the data phase), and PlanReceive checks them.
  Status ExchangeSizes(const char* op, size_t message_bytes,
                       std::vector<int>* counts, std::vector<int>* displs,
                       int64_t* total) const {
    const int64_t mine = message_bytes > static_cast<uint64_t>(kMaxCount)
                             ? kTooLarge
                             : static_cast<int64_t>(message_bytes);
    std::vector<int64_t> sizes(world_size);
    const std::string function =
        std::string("MPI_Allgather (") + op + " sizes)";
    ROCKSDCP_RETURN_IF_ERROR(Check(
        function.c_str(), MPI_Allgather(&mine, 1, MPI_INT64_T, sizes.data(), 1,
                                        MPI_INT64_T, comm)));
    return PlanReceive(op, sizes, counts, displs, total);
  }

  // The messages of the ranks, cut out of the bytes received.
  std::vector<std::string> Split(const std::string& all,
                                 const std::vector<int>& counts,
                                 const std::vector<int>& displs) const {
    std::vector<std::string> out;
    out.reserve(world_size);
    for (int i = 0; i < world_size; ++i) {
      out.push_back(all.substr(displs[i], counts[i]));
    }
    return out;
  }
};

Result<std::unique_ptr<MpiCollective>> MpiCollective::Create(
    int coordinator_rank) {
  int initialized = 0;
  int finalized = 0;
  // Both may be called before MPI_Init and after MPI_Finalize.
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized ||
      MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) {
    return Status::FailedPrecondition(
        "MpiCollective::Create: MPI is not initialised (or already "
        "finalised); the application must call MPI_Init first");
  }
  auto rep = std::make_unique<Rep>();
  int rc = MPI_Comm_size(MPI_COMM_WORLD, &rep->world_size);
  if (rc != MPI_SUCCESS) {
    return Status::IOError("MPI_Comm_size failed: " + MpiErrorString(rc));
  }
  // Checked before the (collective) dup: every rank passes the same value,
  // so every rank returns here together.
  if (coordinator_rank < 0 || coordinator_rank >= rep->world_size) {
    return Status::InvalidArgument("MpiCollective::Create: coordinator rank " +
                                   std::to_string(coordinator_rank) +
                                   " is not in [0, " +
                                   std::to_string(rep->world_size) + ")");
  }
  rep->coordinator = coordinator_rank;
  // A communicator of our own: its messages can't match the application's
  // even if both use the same tags and roots.
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &rep->comm);
  if (rc != MPI_SUCCESS) {
    return Status::IOError("MPI_Comm_dup of MPI_COMM_WORLD failed: " +
                           MpiErrorString(rc));
  }
  std::unique_ptr<MpiCollective> collective(new MpiCollective(std::move(rep)));
  Rep& r = *collective->rep_;
  // MPI_ERRORS_ARE_FATAL (inherited from MPI_COMM_WORLD) would abort the
  // job; rocksdcp reports errors as values.
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Comm_set_errhandler",
              MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN)));
  // Names the communicator in MPI's own error messages and tools.
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Comm_set_name", MPI_Comm_set_name(r.comm, "rocksdcp")));
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Comm_rank", MPI_Comm_rank(r.comm, &r.rank)));
  return collective;
}

MpiCollective::MpiCollective(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

MpiCollective::~MpiCollective() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize the communicator is gone with the rest of MPI.
  if (rep_->comm != MPI_COMM_NULL && !finalized) {
    MPI_Comm_free(&rep_->comm);  // Nothing to do on failure: best effort.
  }
}

int MpiCollective::rank() const { return rep_->rank; }
int MpiCollective::world_size() const { return rep_->world_size; }
int MpiCollective::coordinator_rank() const { return rep_->coordinator; }

Result<std::vector<std::string>> MpiCollective::Gather(std::string message) {
  const Rep& r = *rep_;
  std::vector<int> counts, displs;
  int64_t total = 0;
  ROCKSDCP_RETURN_IF_ERROR(
      r.ExchangeSizes("Gather", message.size(), &counts, &displs, &total));
  const bool root = r.rank == r.coordinator;
  std::string all(root ? total : 0, '\0');
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Gatherv",
              MPI_Gatherv(message.data(), static_cast<int>(message.size()),
                          MPI_BYTE, all.data(), counts.data(), displs.data(),
                          MPI_BYTE, r.coordinator, r.comm)));
  if (!root) return std::vector<std::string>{};
  return r.Split(all, counts, displs);
}

Result<std::string> MpiCollective::Scatter(std::vector<std::string> messages) {
  const Rep& r = *rep_;
  const bool root = r.rank == r.coordinator;
  // The coordinator checks its arguments, then still takes part in the
  // sizes phase, announcing a sentinel so that the other ranks fail too.
  std::vector<int64_t> sizes;
  Status invalid;
  std::string packed;
  std::vector<int> counts, displs;
  if (root) {
    sizes.assign(r.world_size, kInvalidCall);
    if (messages.size() != static_cast<size_t>(r.world_size)) {
      invalid = Status::InvalidArgument(r.Where("Scatter") +
                                        ": needs one message per rank, got " +
                                        std::to_string(messages.size()));
    } else {
      int64_t total = 0;
      for (const std::string& m : messages) {
        total += static_cast<int64_t>(m.size());
      }
      if (total > kMaxCount) {
        invalid = Status::InvalidArgument(
            r.Where("Scatter") + ": the messages total " +
            std::to_string(total) +
            " bytes, over the INT_MAX that MPI counts can describe");
        sizes.assign(r.world_size, kTooLarge);
      } else {
        // Scatterv takes one buffer: pack the messages back to back.
        packed.reserve(total);
        for (int i = 0; i < r.world_size; ++i) {
          sizes[i] = static_cast<int64_t>(messages[i].size());
          counts.push_back(static_cast<int>(messages[i].size()));
          displs.push_back(static_cast<int>(packed.size()));
          packed += messages[i];
        }
        messages.clear();
      }
    }
  }
  int64_t mine = 0;
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Scatter (Scatter sizes)",
              MPI_Scatter(sizes.data(), 1, MPI_INT64_T, &mine, 1, MPI_INT64_T,
                          r.coordinator, r.comm)));
  if (!invalid.ok()) return invalid;
  if (mine == kTooLarge) {
    return Status::InvalidArgument(
        r.Where("Scatter") + ": the coordinator (rank " +
        std::to_string(r.coordinator) +
        ")'s messages total over INT_MAX bytes, which MPI counts can't "
        "describe");
  }
  if (mine < 0) {
    return Status::Aborted(r.Where("Scatter") + ": the coordinator (rank " +
                           std::to_string(r.coordinator) +
                           ") called Scatter with invalid arguments");
  }
  std::string out(mine, '\0');
  ROCKSDCP_RETURN_IF_ERROR(r.Check(
      "MPI_Scatterv", MPI_Scatterv(packed.data(), counts.data(), displs.data(),
                                   MPI_BYTE, out.data(), static_cast<int>(mine),
                                   MPI_BYTE, r.coordinator, r.comm)));
  return out;
}

Result<std::string> MpiCollective::Broadcast(std::string message) {
  const Rep& r = *rep_;
  const bool root = r.rank == r.coordinator;
  int64_t size = 0;
  if (root) {
    size = message.size() > static_cast<uint64_t>(kMaxCount)
               ? kTooLarge
               : static_cast<int64_t>(message.size());
  }
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Bcast (Broadcast size)",
              MPI_Bcast(&size, 1, MPI_INT64_T, r.coordinator, r.comm)));
  if (size < 0) {
    return Status::InvalidArgument(
        r.Where("Broadcast") + ": the coordinator (rank " +
        std::to_string(r.coordinator) +
        ")'s message is over INT_MAX bytes, which MPI counts can't describe");
  }
  // The caller's message is only the coordinator's to send; elsewhere the
  // received bytes replace it.
  if (!root) message.assign(size, '\0');
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Bcast", MPI_Bcast(message.data(), static_cast<int>(size),
                                     MPI_BYTE, r.coordinator, r.comm)));
  return message;
}

Result<std::vector<std::string>> MpiCollective::AllGather(std::string message) {
  const Rep& r = *rep_;
  std::vector<int> counts, displs;
  int64_t total = 0;
  ROCKSDCP_RETURN_IF_ERROR(
      r.ExchangeSizes("AllGather", message.size(), &counts, &displs, &total));
  std::string all(total, '\0');
  ROCKSDCP_RETURN_IF_ERROR(
      r.Check("MPI_Allgatherv",
              MPI_Allgatherv(message.data(), static_cast<int>(message.size()),
                             MPI_BYTE, all.data(), counts.data(), displs.data(),
                             MPI_BYTE, r.comm)));
  return r.Split(all, counts, displs);
}

Status MpiCollective::Barrier() {
  const Rep& r = *rep_;
  return r.Check("MPI_Barrier", MPI_Barrier(r.comm));
}

}  // namespace rocksdcp
