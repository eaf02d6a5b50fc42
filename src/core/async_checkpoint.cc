// AsyncCheckpointer: a save staged into a pool of memory, written while the
// trainer goes on. The protocol between the two is core/staging_session.h.

#include "rocksdcp/async_checkpoint.h"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/staging_session.h"
#include "util/ready_future.h"
#include "util/staging_pool.h"

namespace rocksdcp {

namespace {

using staging::Session;
using util::StagingPool;

// The planner the storage sees: the caller's (or a default one), with
// every tensor redirected to its staged copy.
class StagingPlanner final : public SavePlannerWrapper {
 public:
  StagingPlanner(Session* session, SavePlanner* inner)
      : SavePlannerWrapper(inner), session_(session) {}

  Result<SavePlan> FinishPlan(SavePlan central_plan) override {
    Result<SavePlan> plan = target()->FinishPlan(std::move(central_plan));
    if (plan.ok()) session_->PlanFinished(*plan);
    return plan;
  }
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    ROCKSDCP_ASSIGN_OR_RETURN(ResolvedData resolved,
                              target()->ResolveData(item));
    return session_->Resolve(item, std::move(resolved));
  }
  void ReleaseData(const WriteItem& item) override {
    session_->ReleaseItem(item);
    target()->ReleaseData(item);
  }

 private:
  Session* const session_;
};

// The caller's writer, telling the session when WriteData is over.
class StagingWriter final : public StorageWriterWrapper {
 public:
  StagingWriter(Session* session, StorageWriter* inner)
      : StorageWriterWrapper(inner), session_(session) {}

  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override {
    // Save() waits for the future at once anyway; waiting here tells the
    // session the moment the storage is done reading.
    Result<std::vector<WriteResult>> results =
        target()->WriteData(plan, planner).get();
    session_->ReleaseAll();
    return util::ReadyFuture(std::move(results));
  }

 private:
  Session* const session_;
};

}  // namespace

struct AsyncCheckpointer::Rep {
  std::unique_ptr<StagingPool> pool;

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  std::function<void()> job;  // The next save for the worker to run.
  bool busy = false;          // A save is between its Save and its commit.
  bool stop = false;
  std::thread worker;  // Last: started once the rest exists.

  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || job != nullptr; });
      if (job == nullptr) return;
      std::function<void()> next = std::move(job);
      job = nullptr;
      lock.unlock();
      next();
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }
};

Result<std::unique_ptr<AsyncCheckpointer>> AsyncCheckpointer::Create(
    Options options) {
  auto rep = std::make_unique<Rep>();
  ROCKSDCP_ASSIGN_OR_RETURN(
      rep->pool, StagingPool::Create(options.staging_budget, options.prefault));
  rep->worker = std::thread([r = rep.get()] { r->Run(); });
  return std::unique_ptr<AsyncCheckpointer>(
      new AsyncCheckpointer(std::move(rep)));
}

AsyncCheckpointer::AsyncCheckpointer(std::unique_ptr<Rep> rep)
    : rep_(std::move(rep)) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  {
    std::unique_lock<std::mutex> lock(rep_->mu);
    rep_->cv.wait(lock, [&] { return !rep_->busy; });
    rep_->stop = true;
    rep_->cv.notify_all();
  }
  rep_->worker.join();
}

uint64_t AsyncCheckpointer::staging_capacity() const {
  return rep_->pool->capacity();
}

Result<AsyncSaveHandle> AsyncCheckpointer::Save(const StateDict& state_dict,
                                                StorageWriter& writer,
                                                const SaveOptions& options) {
  if (options.checkpoint_id.empty()) {
    return Status::InvalidArgument("async save: checkpoint_id is empty");
  }
  {
    std::unique_lock<std::mutex> lock(rep_->mu);
    rep_->cv.wait(lock, [&] { return !rep_->busy; });
    rep_->busy = true;
  }
  // The previous save is over, so the pool is all free and no one else
  // touches it until this save's Finish.
  auto session = std::make_shared<Session>(state_dict, rep_->pool.get());
  std::promise<Result<Metadata>> committed;
  AsyncSaveHandle handle;
  handle.committed = committed.get_future();

  auto job = [session, committed = std::move(committed), options,
              writer = &writer, pool = rep_->pool.get()]() mutable {
    DefaultSavePlanner default_planner;
    StagingPlanner planner(session.get(), options.planner != nullptr
                                              ? options.planner
                                              : &default_planner);
    StagingWriter staging_writer(session.get(), writer);
    SaveOptions staged_options = options;
    staged_options.planner = &planner;
    Result<Metadata> result =
        ::rocksdcp::Save(session->dict(), staging_writer, staged_options);
    session->Finish();
    pool->FreeAll();
    committed.set_value(std::move(result));
  };
  {
    std::lock_guard<std::mutex> lock(rep_->mu);
    // std::function needs a copyable callable; the promise is move-only.
    auto shared_job = std::make_shared<decltype(job)>(std::move(job));
    rep_->job = [shared_job] { (*shared_job)(); };
    rep_->cv.notify_all();
  }

  session->StageAll();
  session->WaitUntilSafe(&handle);
  return handle;
}

}  // namespace rocksdcp
