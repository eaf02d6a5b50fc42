// MpiCollective: the ranks of a checkpoint as the processes of an MPI job.
//
// Built only when CMake finds MPI (target rocksdcp::mpi, a library of its
// own so that the core library never depends on MPI). This header does not
// include <mpi.h>: the communicator is hidden behind a pointer.
//
// Ranks as processes. Every process of the job calls Save (or Load) with
// its own state dict and its own MpiCollective. Only one process may open a
// Store read-write (RocksDB's LOCK file), so the store is opened in this
// order:
//   1. the coordinator's process opens (or creates) it read-write;
//   2. a Barrier, so that the store exists before anyone else opens it;
//   3. for a save, the other ranks open it with StoreOptions{.follower =
//      true}: their writers write staging SST files that the coordinator
//      ingests and commits. For a load, they open it with
//      StoreOptions{.read_only = true}, after the save committed: a
//      read-only Store sees the checkpoints committed when it opened.
// The store must be at the same path on every rank: one node, or a shared
// filesystem mounted at the same path on every node.
//
// Example (every rank):
//   MPI_Init(&argc, &argv);  // The application owns MPI.
//   ROCKSDCP_ASSIGN_OR_RETURN(auto mpi, MpiCollective::Create());
//   std::unique_ptr<Store> store;
//   if (mpi->is_coordinator()) {
//     ROCKSDCP_ASSIGN_OR_RETURN(store, Store::Open(path));
//   }
//   ROCKSDCP_RETURN_IF_ERROR(mpi->Barrier());
//   if (!mpi->is_coordinator()) {
//     ROCKSDCP_ASSIGN_OR_RETURN(store, Store::Open(path, {.follower = true}));
//   }
//   ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter());
//   ROCKSDCP_RETURN_IF_ERROR(Save(state_dict, *writer,
//       {.checkpoint_id = "step-100", .collective = mpi.get()}).status());
//
// Messages: variable-length bytes, sent as their sizes first and then the
// bytes (MPI_Gatherv, MPI_Scatterv, MPI_Bcast, MPI_Allgatherv). MPI counts
// are ints, so one message, and the messages one call delivers together,
// must each stay within INT_MAX bytes; beyond that the call fails with
// InvalidArgument on every rank instead of leaving some ranks waiting.
// An MPI failure returns IOError naming the MPI function, the rank and
// MPI's error string: the communicator is set to MPI_ERRORS_RETURN, so MPI
// reports errors rather than aborting the job. A rank that exits or
// crashes is another matter: plain MPI can't tell the others, so Open MPI's
// mpirun ends the whole job.
//
// Thread safety: an MpiCollective belongs to one rank and is used from one
// thread at a time, and that thread must be allowed to call MPI by the
// thread level the application initialised MPI with (with
// MPI_THREAD_FUNNELED, the main thread only). Each object has a
// communicator of its own, so with MPI_THREAD_MULTIPLE distinct objects may
// run collectives at once on distinct threads.
//
// Call order: every rank calls Create (MPI_Comm_dup is collective), then the
// same sequence of collective calls, and destroys its object before
// MPI_Finalize (MPI_Comm_free is collective too).

#ifndef ROCKSDCP_MPI_COLLECTIVE_H_
#define ROCKSDCP_MPI_COLLECTIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "rocksdcp/collective.h"
#include "rocksdcp/status.h"

namespace rocksdcp {

class MpiCollective final : public Collective {
 public:
  // Makes this process's member of a collective over MPI_COMM_WORLD's
  // processes. The communicator is a duplicate of MPI_COMM_WORLD, so that
  // rocksdcp's messages can never match the application's.
  //
  // FailedPrecondition if MPI is not initialised (or already finalised):
  // the application owns MPI_Init and MPI_Finalize. InvalidArgument unless
  // 0 <= coordinator_rank < the world size.
  //
  // REQUIRES: every process calls Create with the same coordinator_rank.
  static Result<std::unique_ptr<MpiCollective>> Create(
      int coordinator_rank = 0);

  // Frees the communicator, unless MPI was finalised already.
  ~MpiCollective() override;
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;

  int rank() const override;
  int world_size() const override;
  int coordinator_rank() const override;
  Result<std::vector<std::string>> Gather(std::string message) override;
  Result<std::string> Scatter(std::vector<std::string> messages) override;
  Result<std::string> Broadcast(std::string message) override;
  Result<std::vector<std::string>> AllGather(std::string message) override;
  Status Barrier() override;

 private:
  struct Rep;  // Holds the MPI_Comm.
  explicit MpiCollective(std::unique_ptr<Rep> rep);

  std::unique_ptr<Rep> rep_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_MPI_COLLECTIVE_H_
