// libtorch_trainer: a LibTorch trainer that checkpoints with rocksdcp, and
// resumes where it stopped, bit for bit, however it was stopped.
//
// Usage: libtorch_trainer --store DIR [--steps S] [--every N] [--keep K]
//                         [--seed SEED]
//
// It trains an MLP with BatchNorm and dropout (1.3 M parameters, 5.3 MB)
// with AdamW on synthetic data, one CPU thread, for S steps (default 240).
// Every N steps (default 16) and at the last step it saves a checkpoint
// `step-NNNNNN` with an AsyncCheckpointer: Save returns once the state is
// copied, training goes on, and the commit completes in the background.
// Once a commit completes it keeps the newest K checkpoints (default 3).
// On start it loads the newest committed checkpoint of DIR, if there is
// one: the model, the optimizer (a fresh AdamW, which gets its state from
// the checkpoint), the step, the CPU generator that dropout draws from, and
// the data loader's position, saved as bytes. Opening the store read-write
// reclaims what a killed run's torn save left (StoreOptions::
// reclaim_torn_saves): nothing to call.
//
// So a run killed at any moment (kill -9, mid-commit included) and
// restarted computes the same losses, step for step, and ends with the same
// bytes as a run that was never stopped: the data of step k is a function
// of (SEED, k), and everything else is in the checkpoint.
//
// It prints, on stdout, line-buffered:
//   start fresh | start resumed step-NNNNNN at step K
//   step K loss XXXXXXXX L     (the loss's float32 bits in hex, and L)
//   commit-begin step-NNNNNN   (AsyncCheckpointer::Save returned)
//   committed step-NNNNNN      (its commit completed, as seen after a step
//                               or before the next save)
//   done
// tests/torch/trainer_resume_test.cc reads them while it kills this
// program at random moments.

#include <torch/torch.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "rocksdcp/rocksdcp.h"
#include "rocksdcp/torch.h"

namespace {

constexpr int64_t kInputs = 256;
constexpr int64_t kHidden = 1024;
constexpr int64_t kClasses = 16;
constexpr int64_t kBatch = 32;

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    layers = register_module(
        "layers",
        torch::nn::Sequential(
            torch::nn::Linear(kInputs, kHidden),
            torch::nn::BatchNorm1d(kHidden), torch::nn::ReLU(),
            torch::nn::Dropout(0.1), torch::nn::Linear(kHidden, kHidden),
            torch::nn::BatchNorm1d(kHidden), torch::nn::ReLU(),
            torch::nn::Dropout(0.1), torch::nn::Linear(kHidden, kClasses)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return layers->forward(x); }
  torch::nn::Sequential layers{nullptr};
};
TORCH_MODULE(Mlp);

// Batches drawn from (seed, position): a fixed random linear "teacher"
// labels Gaussian inputs. Its position is what a resumed run must restore.
class SyntheticLoader {
 public:
  explicit SyntheticLoader(uint64_t seed) : seed_(seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    teacher_ = torch::randn({kInputs, kClasses}, gen);
  }
  std::pair<torch::Tensor, torch::Tensor> Next() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(
        seed_ * 1000003 + static_cast<uint64_t>(position_++));
    torch::Tensor x = torch::randn({kBatch, kInputs}, gen);
    return {x, x.matmul(teacher_).argmax(1)};
  }
  int64_t position() const { return position_; }
  void set_position(int64_t p) { position_ = p; }

 private:
  uint64_t seed_;
  int64_t position_ = 0;
  torch::Tensor teacher_;
};

std::string CheckpointId(int64_t step) {
  char id[32];
  std::snprintf(id, sizeof id, "step-%06" PRId64, step);
  return id;
}

int Fail(const char* what, const rocksdcp::Status& s) {
  std::fprintf(stderr, "libtorch_trainer: %s: %s\n", what,
               s.ToString().c_str());
  return 1;
}

struct Args {
  std::string store;
  int64_t steps = 240;
  int64_t every = 16;
  uint64_t keep = 3;
  uint64_t seed = 1;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--store")
      a->store = v;
    else if (flag == "--steps")
      a->steps = std::atoll(v);
    else if (flag == "--every")
      a->every = std::atoll(v);
    else if (flag == "--keep")
      a->keep = std::strtoull(v, nullptr, 10);
    else if (flag == "--seed")
      a->seed = std::strtoull(v, nullptr, 10);
    else
      return false;
  }
  return argc % 2 == 1 && !a->store.empty() && a->steps > 0 && a->every > 0;
}

int Train(const Args& args) {
  // One thread: the same arithmetic in the same order on every run, on any
  // machine, so that the losses compare bit for bit.
  at::set_num_threads(1);
  torch::manual_seed(args.seed);
  Mlp model;
  torch::optim::AdamW adamw(
      model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  SyntheticLoader loader(args.seed);
  rocksdcp::torch::TrainerState state;
  const rocksdcp::torch::Trainer trainer{model.get(), &adamw, &state};

  // A run killed mid-save left staging files and perhaps a column family
  // that never committed: the open drops them.
  auto store = rocksdcp::Store::Open(args.store);
  if (!store.ok()) return Fail("open", store.status());
  auto checkpoints = (*store)->List();
  if (!checkpoints.ok()) return Fail("list", checkpoints.status());
  if (checkpoints->empty()) {
    std::printf("start fresh\n");
  } else {
    const std::string& newest = checkpoints->back().id;  // Oldest first.
    auto reader = (*store)->NewReader();
    if (!reader.ok()) return Fail("reader", reader.status());
    rocksdcp::Status s =
        rocksdcp::torch::Load(trainer, **reader, {.checkpoint_id = newest});
    if (!s.ok()) return Fail("resume", s);
    loader.set_position(std::stoll(state.extra.at("data.position")));
    std::printf("start resumed %s at step %" PRId64 "\n", newest.c_str(),
                state.step);
  }

  auto checkpointer =
      rocksdcp::AsyncCheckpointer::Create({.staging_budget = 64ull << 20});
  if (!checkpointer.ok()) return Fail("checkpointer", checkpointer.status());
  auto writer = (*store)->NewWriter({.overwrite = true});
  if (!writer.ok()) return Fail("writer", writer.status());
  std::optional<rocksdcp::AsyncSaveHandle> pending;
  std::string pending_id;
  auto wait_for_commit = [&]() -> rocksdcp::Status {
    if (!pending) return rocksdcp::Status::OK();
    auto committed = pending->committed.get();
    pending.reset();
    ROCKSDCP_RETURN_IF_ERROR(committed.status());
    std::printf("committed %s\n", pending_id.c_str());
    return (*store)->KeepLast(args.keep).status();
  };

  for (int64_t step = state.step + 1; step <= args.steps; ++step) {
    model->train();
    auto [x, y] = loader.Next();
    adamw.zero_grad();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    adamw.step();
    const float value = loss.item<float>();
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    std::printf("step %" PRId64 " loss %08x %.6f\n", step, bits, value);
    // A commit that completed: say so, and apply the retention, now.
    if (pending && pending->committed.wait_for(std::chrono::seconds(0)) ==
                       std::future_status::ready) {
      if (rocksdcp::Status s = wait_for_commit(); !s.ok()) {
        return Fail("commit", s);
      }
    }

    if (step % args.every == 0 || step == args.steps) {
      if (rocksdcp::Status s = wait_for_commit(); !s.ok()) {
        return Fail("commit", s);
      }
      state.step = step;
      state.extra["data.position"] = std::to_string(loader.position());
      auto dict = rocksdcp::torch::MakeStateDict(trainer);
      if (!dict.ok()) return Fail("state dict", dict.status());
      pending_id = CheckpointId(step);
      auto handle =
          (*checkpointer)
              ->Save(dict->dict(), **writer, {.checkpoint_id = pending_id});
      if (!handle.ok()) return Fail("save", handle.status());
      pending = std::move(handle).value();
      std::printf("commit-begin %s\n", pending_id.c_str());
    }
  }
  if (rocksdcp::Status s = wait_for_commit(); !s.ok()) return Fail("commit", s);
  std::printf("done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered in a pipe too: the resume test reads lines as they come.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: libtorch_trainer --store DIR [--steps S] [--every N] "
                 "[--keep K] [--seed SEED]\n");
    return 2;
  }
  try {
    return Train(args);
  } catch (const std::exception& e) {  // LibTorch throws; rocksdcp does not.
    std::fprintf(stderr, "libtorch_trainer: %s\n", e.what());
    return 1;
  }
}
