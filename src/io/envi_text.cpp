// Text helpers of the ENVI reader and writers (see envi_text.hpp).
#include "io/envi_text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "spectrasift/error.hpp"

namespace spectrasift::envi_text {

namespace fs = std::filesystem;

std::string trim(std::string_view s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string normalise_key(std::string_view raw) {
  std::string out;
  bool blank = false;
  for (char c : trim(raw)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out += ' ';
    blank = false;
    out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

[[noreturn]] void bad(const fs::path& file, const std::string& what) {
  throw Error(ErrorCode::kBadFormat, file.string() + ": " + what);
}

std::optional<double> to_number(std::string_view s) {
  const std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  const char* b = t.data();
  const char* e = b + t.size();
  if (*b == '+') ++b;
  double v = 0;
  auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || ptr != e) return std::nullopt;
  return v;
}

double number(const fs::path& file, const std::string& key, std::string_view s) {
  auto v = to_number(s);
  if (!v) bad(file, "'" + key + " = " + trim(s) + "' is not a number");
  return *v;
}

long long integer(const fs::path& file, const std::string& key, std::string_view s, long long lo, long long hi) {
  const std::string t = trim(s);
  long long v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size())
    bad(file, "'" + key + " = " + t + "' is not an integer");
  if (v < lo || v > hi)
    bad(file, "'" + key + " = " + t + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

namespace {

/// The comma-separated fields of s, trimmed; with quotes, "..." protects commas and "" inside it is one quote.
std::vector<std::string> split_fields(std::string_view s, bool quotes) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quotes && c == '"') {
      if (quoted && i + 1 < s.size() && s[i + 1] == '"') {
        cur += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
  return out;
}

}  // namespace

std::vector<std::string> split_list(std::string_view s) { return split_fields(s, false); }

std::vector<std::string> split_csv_row(std::string_view s) { return split_fields(s, true); }

std::vector<double> number_list(const fs::path& file, const std::string& key, std::string_view s) {
  std::vector<double> out;
  for (const auto& item : split_list(s)) {
    auto v = to_number(item);
    if (!v) bad(file, "'" + key + "' holds '" + item + "', which is not a number");
    out.push_back(*v);
  }
  return out;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_library(const EnviHeader& h) { return lower(h.file_type).find("spectral library") != std::string::npos; }

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  (void)ec;
  return std::string(buf, p);
}

}  // namespace spectrasift::envi_text
