#include "cli_output.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace rocksdcp::tools {

std::string Printable(std::string_view s) {
  std::string out;
  auto escape = [&out](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", c);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    const bool c1 =
        n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
    if (n == 0 || c1) {
      // A byte outside UTF-8 (a terminal may read 0x9b as CSI), or a C1
      // control (U+0080-U+009F): its bytes as \xNN.
      const size_t bytes = n == 0 ? 1 : n;
      for (size_t k = 0; k < bytes; ++k) {
        escape(static_cast<unsigned char>(s[i + k]));
      }
      i += bytes;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

namespace {
// The errno of the first write to stdout that failed, or 0.
int output_error = 0;
}  // namespace

void Print(const char* format, ...) {
  if (output_error != 0) return;
  std::va_list args;
  va_start(args, format);
  // vprintf fails when a write of its buffer to stdout fails, with that
  // write's errno.
  if (std::vprintf(format, args) < 0) output_error = errno != 0 ? errno : EIO;
  va_end(args);
}

int FinishOutput() {
  if (output_error == 0 && std::fflush(stdout) != 0) {
    output_error = errno != 0 ? errno : EIO;
  }
  if (output_error == 0 && std::ferror(stdout)) output_error = EIO;
  return output_error;
}

void PrintJson(const JsonWriter& j) { Print("%s\n", j.str().c_str()); }

size_t DisplayWidth(std::string_view s) {
  // Every byte but UTF-8's continuation bytes (10xxxxxx) starts a code
  // point.
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

void PrintTable(const std::vector<TableColumn>& columns,
                const TableRows& rows) {
  std::vector<size_t> widths;
  for (const TableColumn& c : columns) widths.push_back(DisplayWidth(c.title));
  rows([&](const TableRow& row) {
    for (size_t i = 0; i < widths.size() && i < row.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
    }
  });
  auto print_row = [&](const std::vector<std::string_view>& cells) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string_view cell = i < cells.size() ? cells[i] : "";
      const size_t width = DisplayWidth(cell);
      const std::string pad(widths[i] > width ? widths[i] - width : 0, ' ');
      if (i > 0) line += "  ";
      if (columns[i].right) line += pad;
      line += cell;
      if (!columns[i].right && i + 1 < widths.size()) line += pad;
    }
    Print("%s\n", line.c_str());
  };
  std::vector<std::string_view> titles;
  for (const TableColumn& c : columns) titles.push_back(c.title);
  print_row(titles);
  rows([&](const TableRow& row) {
    print_row(std::vector<std::string_view>(row.begin(), row.end()));
  });
}

std::string HumanBytes(uint64_t b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " B", b);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

std::string TimeString(int64_t unix_micros) {
  std::time_t t = static_cast<std::time_t>(unix_micros / 1000000);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "?";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ProgressCallback ProgressBar::Callback() {
  if (!isatty(2)) return {};
  return [this](const Progress& p) { Update(p); };
}

void ProgressBar::Update(const Progress& p) {
  const int pct = p.bytes_total == 0
                      ? 100
                      : static_cast<int>(std::min<uint64_t>(
                            100, p.bytes_done * 100 / p.bytes_total));
  const bool finished = p.items_total != 0 && p.items_done == p.items_total;
  if (pct == last_pct_ && (!finished || drew_finish_)) return;
  last_pct_ = pct;
  drew_finish_ = finished;
  const int filled = pct * 30 / 100;
  std::fprintf(stderr, "\r%s [%s%s] %3d%% %s, %" PRIu64 "/%" PRIu64 " items",
               verb_, std::string(filled, '#').c_str(),
               std::string(30 - filled, ' ').c_str(), pct,
               HumanBytes(p.bytes_done).c_str(), p.items_done, p.items_total);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (drawn_) std::fprintf(stderr, "\n");
}

}  // namespace rocksdcp::tools
