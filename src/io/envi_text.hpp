// Text helpers of the ENVI reader and writers (internal to io/): trimming, key normalisation, number
// parsing with file-naming errors, brace lists, and shortest round-trip number formatting.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "spectrasift/envi.hpp"

namespace spectrasift::envi_text {

std::string trim(std::string_view s);
std::string lower(std::string s);
/// Lower case, blanks trimmed, inner runs of blanks collapsed to one space.
std::string normalise_key(std::string_view raw);
/// Throws Error(kBadFormat) "<file>: <what>".
[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what);
/// A whole-token number ("nan" and "inf" accepted), or nullopt.
std::optional<double> to_number(std::string_view s);
double number(const std::filesystem::path& file, const std::string& key, std::string_view s);
long long integer(const std::filesystem::path& file, const std::string& key, std::string_view s, long long lo,
                  long long hi);
std::vector<std::string> split_list(std::string_view s);
/// A CSV row (RFC 4180 quoting): a quoted field may hold commas, "" is a quote; quotes are removed.
std::vector<std::string> split_csv_row(std::string_view s);
std::vector<double> number_list(const std::filesystem::path& file, const std::string& key, std::string_view s);
std::string read_text(const std::filesystem::path& path);
bool is_library(const EnviHeader& h);
std::string format_number(double v);

template <class T>
std::string brace_list(const std::vector<T>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    if constexpr (std::is_same_v<T, std::string>) s += v[i];
    else s += format_number(double(v[i]));
  }
  return s + "}";
}

}  // namespace spectrasift::envi_text
