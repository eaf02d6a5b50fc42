// How the rocksdcp CLI prints: text safe for a terminal, sizes and times
// for people, --json documents, and a progress bar.

#ifndef ROCKSDCP_TOOLS_CLI_OUTPUT_H_
#define ROCKSDCP_TOOLS_CLI_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "json.h"
#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// `s` for a terminal: control characters (C0, DEL and C1) and bytes outside
// UTF-8 as \xNN; other UTF-8 as itself. An fqn or id is any byte string,
// and an escape sequence in one would drive the user's terminal.
std::string Printable(std::string_view s);

// Prints on stdout, as printf. Every command's output goes through it, so
// that the first failed write is known (FinishOutput); from then on, the
// output being lost, it prints nothing more.
void Print(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Flushes stdout and returns the errno of the first write to it that
// failed (EPIPE: the reader went away; ENOSPC: a full disk), or 0.
int FinishOutput();

// Prints a --json document and a newline on stdout.
void PrintJson(const JsonWriter& j);

// The columns `s` takes on a terminal: its UTF-8 code points. Printable()
// text is UTF-8; a wide character (CJK) counts as one column, not two.
size_t DisplayWidth(std::string_view s);

// A column of a text table: its title, and whether its cells are aligned
// right (numbers) or left.
struct TableColumn {
  const char* title;
  bool right = false;
};
using TableRow = std::vector<std::string>;
// Calls its argument with each row of a table, in order.
using TableRows =
    std::function<void(const std::function<void(const TableRow&)>&)>;

// Prints a table: the titles, then the rows, each column as wide as its
// widest cell (title included), two spaces apart; the last column is not
// padded. `rows` is called twice, to measure and then to print, and must
// give the same rows both times (cells already Printable): no row is kept,
// so a table of a million items takes no memory of its own.
// REQUIRES: every row has one cell per column.
void PrintTable(const std::vector<TableColumn>& columns, const TableRows& rows);

// "512 B", "9.8 KiB", "1.5 GiB".
std::string HumanBytes(uint64_t b);

// "2026-11-30T09:45:59Z".
std::string TimeString(int64_t unix_micros);

// A one-line progress bar on stderr, drawn only when stderr is a terminal:
// redrawn when the percentage moves, and once when the last item is done
// (its bytes may have reached 100% before).
// Not thread-safe: the library calls progress on the calling thread.
class ProgressBar {
 public:
  // `verb` starts the line: "verifying", "exporting", ...
  explicit ProgressBar(const char* verb) : verb_(verb) {}

  // The callback for an operation's options: none off a terminal.
  // REQUIRES: the ProgressBar outlives the operation.
  ProgressCallback Callback();
  void Update(const Progress& p);
  // Ends the line, if one was drawn.
  void Finish();

 private:
  const char* verb_;
  int last_pct_ = -1;
  bool drew_finish_ = false;
  bool drawn_ = false;
};

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_CLI_OUTPUT_H_
