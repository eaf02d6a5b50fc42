// The rocksdcp CLI's commands (tools/README.md), one function each, called
// by rocksdcp_cli.cc once the command line has been checked.

#ifndef ROCKSDCP_TOOLS_CLI_COMMANDS_H_
#define ROCKSDCP_TOOLS_CLI_COMMANDS_H_

#include <map>
#include <string>
#include <vector>

namespace rocksdcp::tools {

// Exit codes (tools/README.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;   // Bad store, id or fqn; locked; I/O.
inline constexpr int kExitUsage = 2;    // Bad command line.
inline constexpr int kExitCorrupt = 3;  // verify found corrupted items.

// The command line after the command name: positional arguments, and the
// flags the command accepts (with a value for those that take one).
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  bool json = false;
  bool help = false;
  bool has(const std::string& f) const { return flags.count(f) != 0; }
};

// Each runs one command and returns its exit code, having printed its
// output on stdout (JSON with Args::json) and its errors on stderr.
// REQUIRES: `a` holds the positional arguments and flags the command's
// usage line (rocksdcp_cli.cc) names, checked.
int RunLs(const Args& a);
int RunInfo(const Args& a);
int RunDiff(const Args& a);
int RunVerify(const Args& a);
int RunRm(const Args& a);
int RunKeepLast(const Args& a);
int RunGc(const Args& a);
int RunMaterialize(const Args& a);
int RunDump(const Args& a);
int RunExport(const Args& a);
int RunImport(const Args& a);

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_CLI_COMMANDS_H_
