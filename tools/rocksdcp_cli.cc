// rocksdcp: inspect, check and prune a checkpoint store from the shell.
// See tools/README.md for the commands and exit codes. This file parses the
// command line; cli_commands.cc runs the commands.

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "cli_commands.h"
#include "cli_output.h"
#include "files.h"

namespace rocksdcp::tools {
namespace {

struct Command {
  const char* name;
  const char* usage;    // After "rocksdcp NAME ".
  const char* summary;  // One line.
  int min_positional;
  int max_positional;  // -1: no limit.
  std::vector<std::string> bool_flags;
  std::vector<std::string> value_flags;
  int (*run)(const Args&);
};

void PrintUsage(FILE* f, const Command& c) {
  std::fprintf(f, "usage: rocksdcp %s %s\n\n%s\n", c.name, c.usage, c.summary);
  std::fprintf(f,
               "\nOptions:\n  --json   print JSON on stdout\n"
               "  --help   print this help\n");
  for (const std::string& flag : c.bool_flags) {
    if (flag == "--dry-run") {
      std::fprintf(f, "  --dry-run  only report what would be freed\n");
    } else if (flag == "--overwrite") {
      std::fprintf(f, "  --overwrite  replace checkpoint ID if it exists\n");
    }
  }
}

// The commands that read the store: its checkpoints, their items, their
// differences, their checksums.
std::vector<Command> ReadCommands() {
  return {
      {"ls",
       "STORE",
       "Lists the committed checkpoints, oldest first: id, "
       "state, created time, bytes, items, world size.",
       1,
       1,
       {},
       {},
       RunLs},
      {"info",
       "STORE ID",
       "Lists every item of checkpoint ID: fqn, dtype, "
       "global shape, chunks, bytes.",
       2,
       2,
       {},
       {},
       RunInfo},
      {"diff",
       "STORE FROM TO",
       "Lists every item of checkpoints FROM and TO: unchanged, changed (how "
       "many pieces), added, removed, reshaped or incomparable, from the "
       "hashes recorded when each piece was saved, without reading tensor "
       "data.",
       3,
       3,
       {},
       {},
       RunDiff},
      {"verify",
       "STORE [ID...]",
       "Reads every piece of the named "
       "checkpoints (all, if none are named) and checks its checksum; lists "
       "every corrupted item and exits 3 if there is one.",
       1,
       -1,
       {},
       {},
       RunVerify},
  };
}

// The commands that change the store: delete checkpoints, drop what
// nothing holds, make a checkpoint hold every piece itself.
std::vector<Command> ChangeCommands() {
  return {
      {"rm",
       "STORE ID...",
       "Deletes the named checkpoints (none, if one of "
       "them does not exist).",
       2,
       -1,
       {},
       {},
       RunRm},
      {"keep-last",
       "STORE N",
       "Deletes all but the newest N committed "
       "checkpoints, by created time.",
       2,
       2,
       {},
       {},
       RunKeepLast},
      {"gc",
       "STORE [--dry-run]",
       "Drops column families no checkpoint holds or references "
       "(uncommitted saves, deleted bases) and staging leftovers, and says "
       "what it freed.",
       1,
       1,
       {"--dry-run"},
       {},
       RunGc},
      {"materialize",
       "STORE ID",
       "Rewrites an incremental checkpoint ID to hold every piece itself "
       "(what it references included), and drops the column families "
       "nothing needs any more.",
       2,
       2,
       {},
       {},
       RunMaterialize},
  };
}

// The commands from a store to a file and back: a tensor as .npy, a
// checkpoint as safetensors.
std::vector<Command> FileCommands() {
  return {
      {"dump",
       "STORE ID FQN --npy OUT",
       "Writes one tensor, reassembled "
       "from its chunks, as a NumPy .npy file.",
       3,
       3,
       {},
       {"--npy"},
       RunDump},
      {"export",
       "STORE ID --safetensors OUT",
       "Writes checkpoint ID as a "
       "safetensors file.",
       2,
       2,
       {},
       {"--safetensors"},
       RunExport},
      {"import",
       "FILE.safetensors STORE ID [--overwrite] [--compress]",
       "Saves a "
       "safetensors file into STORE as checkpoint ID (creating the store if "
       "missing); --compress compresses every piece (byte planes and "
       "zstd).",
       3,
       3,
       {"--overwrite", "--compress"},
       {},
       RunImport},
  };
}

// Every command, in the order the main usage lists them.
const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = [] {
    std::vector<Command> all = ReadCommands();
    for (std::vector<Command> group : {ChangeCommands(), FileCommands()}) {
      all.insert(all.end(), group.begin(), group.end());
    }
    return all;
  }();
  return kCommands;
}

void PrintMainUsage(FILE* f) {
  std::fprintf(f,
               "usage: rocksdcp COMMAND ARGS... [--json] [--help]\n\n"
               "Commands:\n");
  for (const Command& c : Commands()) {
    std::fprintf(f, "  %-10s %s\n", c.name, c.usage);
  }
  std::fprintf(f, "\n'rocksdcp COMMAND --help' describes one command.\n");
}

int Usage(const Command& c, const std::string& msg) {
  std::fprintf(stderr, "rocksdcp %s: %s\n", c.name, msg.c_str());
  PrintUsage(stderr, c);
  return kExitUsage;
}

// The command named `name`, or nullptr.
const Command* FindCommand(const std::string& name) {
  const Command* cmd = nullptr;
  for (const Command& c : Commands()) {
    if (name == c.name) cmd = &c;
  }
  return cmd;
}

// Parses cmd's arguments, argv[2...], into `a`. Returns kExitOk, or
// kExitUsage for an unknown option or one without its value.
int ParseArgs(const Command& cmd, int argc, char** argv, Args* a) {
  bool only_positional = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 2 || arg.rfind("-", 0) != 0) {
      a->positional.push_back(arg);
    } else if (arg == "--") {
      only_positional = true;
    } else if (arg == "--help" || arg == "-h") {
      a->help = true;
    } else if (arg == "--json") {
      a->json = true;
    } else if (std::count(cmd.bool_flags.begin(), cmd.bool_flags.end(), arg)) {
      a->flags[arg] = "";
    } else if (std::count(cmd.value_flags.begin(), cmd.value_flags.end(),
                          arg)) {
      if (i + 1 >= argc) return Usage(cmd, arg + " needs a value");
      a->flags[arg] = argv[++i];
    } else {
      return Usage(cmd, "unknown option '" + arg + "'");
    }
  }
  return kExitOk;
}

// Returns kExitOk if `a` has as many positional arguments as cmd takes,
// and each value flag it requires; kExitUsage if not.
int CheckArgs(const Command& cmd, const Args& a) {
  int n = static_cast<int>(a.positional.size());
  if (n < cmd.min_positional ||
      (cmd.max_positional >= 0 && n > cmd.max_positional)) {
    return Usage(cmd, "expected " + std::string(cmd.usage) + ", got " +
                          std::to_string(n) + " arguments");
  }
  for (const std::string& f : cmd.value_flags) {
    if (!a.has(f)) return Usage(cmd, f + " is required");
  }
  return kExitOk;
}

// Runs `cmd`; returns its exit code.
int RunCommand(const Command& cmd, const Args& a) {
  try {
    return cmd.run(a);
  } catch (const std::bad_alloc&) {
    // The library returns ResourceExhausted for its own allocations; this
    // is the tool's (a table, a JSON document) running out.
    std::fprintf(stderr, "rocksdcp %s: out of memory\n", cmd.name);
    return kExitFailed;
  }
}

// Writes out what `cmd`, which ended with exit code `rc`, printed; returns
// its exit code, kExitFailed if that output was lost.
int FinishCommand(const Command& cmd, int rc) {
  const int output_error = FinishOutput();
  if (output_error == EPIPE) {
    // The reader went away (`rocksdcp info ... | head`): not an error
    // worth a message. As ls, grep and git do, the command ends by
    // SIGPIPE (status 141 in a shell, so `set -o pipefail` sees it),
    // unless it failed for another reason, whose exit code and message
    // stand. The command has run to its end (its store is closed, and a
    // change it made is made); only its output is lost.
    if (rc == kExitOk) {
      std::signal(SIGPIPE, SIG_DFL);
      std::raise(SIGPIPE);
    }
  } else if (output_error != 0) {
    // Output a script reads must not be lost silently: a full disk behind
    // stdout fails the command.
    std::fprintf(stderr, "rocksdcp %s: cannot write the output: %s\n", cmd.name,
                 std::strerror(output_error));
    if (rc == kExitOk) rc = kExitFailed;
  }
  return rc;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintMainUsage(stderr);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintMainUsage(stdout);
    return kExitOk;
  }
  const Command* cmd = FindCommand(name);
  if (cmd == nullptr) {
    std::fprintf(stderr, "rocksdcp: unknown command '%s'\n", name.c_str());
    PrintMainUsage(stderr);
    return kExitUsage;
  }
  Args a;
  if (int rc = ParseArgs(*cmd, argc, argv, &a); rc != kExitOk) return rc;
  if (a.help) {
    PrintUsage(stdout, *cmd);
    return kExitOk;
  }
  if (int rc = CheckArgs(*cmd, a); rc != kExitOk) return rc;
  return FinishCommand(*cmd, RunCommand(*cmd, a));
}

}  // namespace
}  // namespace rocksdcp::tools

int main(int argc, char** argv) {
  // The library reports errors as values; only an allocation can throw. A
  // command that runs out of memory fails like any other, with exit 1.
  // A closed pipe behind stdout is a write error (EPIPE) that Main sees
  // once the command has run, not a death in the middle of it (a store
  // open read-write, an output file half written); Ctrl-C leaves no
  // temporary file behind.
  std::signal(SIGPIPE, SIG_IGN);
  rocksdcp::tools::RemoveOutFilesOnSignals();
  try {
    return rocksdcp::tools::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rocksdcp: out of memory\n");
    return rocksdcp::tools::kExitFailed;
  }
}
