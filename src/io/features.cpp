// Feature files: Lowe's text .key, JSON and a compact little-endian binary format (io.hpp documents
// the layouts). Writers go through AtomicOutput; readers check every count against the content and
// every value against its range, and name the file and the line (text) or byte offset (binary).
// Descriptors of either type (Features::descriptor_type): JSON names the type, the binary format keeps
// version 1 (float32 rows) for f32 features and writes u8 ones as version 2 (a type field, byte rows).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numbers>
#include <string>

#include "io/image_codecs.hpp"
#include "io/temp_files.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {
namespace {

constexpr int kD = Features::kDescriptorSize;
/// Version 1: float32 rows, header of 24 bytes (what every f32 file is written as, so that readers from
/// before version 2 still read them). Version 2: a u32 descriptor type at offset 24 (kBinTypeF32 or kBinTypeU8),
/// header of 28 bytes, rows of that type (u8: one byte a value).
constexpr std::uint32_t kBinVersionF32 = 1, kBinVersionTyped = 2;
constexpr std::uint32_t kBinTypeF32 = 0, kBinTypeU8 = 1;
constexpr std::size_t kBinHeaderV1 = 24, kBinHeaderV2 = 28;
constexpr int kMinOctave = -8, kMaxOctave = 64, kMaxLayer = 64;

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorCode::kBadFormat, path.string() + ": " + what);
}

/// The writers' check: a known descriptor type, and one row of it per keypoint.
void check_features(const std::filesystem::path& path, const Features& f) {
  if (int(f.descriptor_type) > int(DescriptorType::kU8))
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": unknown descriptor type code " +
                                                 std::to_string(int(f.descriptor_type)));
  if (f.descriptor_values() != f.keypoints.size() * std::size_t(kD))
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": " + std::to_string(f.keypoints.size()) +
                                                 " keypoints but " + std::to_string(f.descriptor_values()) + " " +
                                                 to_string(f.descriptor_type) + " descriptor values (expected " +
                                                 std::to_string(kD) + " per keypoint)");
}

/// Writes a whole buffer through AtomicOutput (messages name the user's file).
void write_all(const std::filesystem::path& path, const void* data, std::size_t size) {
  io_detail::write_file_atomically(path, data, size);
}

/// Shortest text that reads back as the same float.
void append_float(std::string& s, float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

double angle_to_radians(float degrees) {
  // OpenCV angle (degrees, [0, 360), y down) -> radians in (-pi, pi].
  double r = double(degrees) * std::numbers::pi / 180.0;
  r = std::remainder(r, 2.0 * std::numbers::pi);  // [-pi, pi]
  if (r <= -std::numbers::pi) r += 2.0 * std::numbers::pi;
  return r;
}

float radians_to_angle(double radians) {
  double d = radians * 180.0 / std::numbers::pi;
  d = std::fmod(d, 360.0);
  if (d < 0) d += 360.0;
  float a = float(d);
  if (a >= 360.0f) a = 0.0f;  // rounding up to 360 wraps
  return a;
}

// ---- a tokenizer over a text file that knows its line numbers ----

class TextTokens {
 public:
  TextTokens(const std::filesystem::path& path, const std::vector<std::uint8_t>& text) : path_(path), t_(text) {}

  /// The next whitespace-separated token; empty at the end of the file.
  std::string_view next() {
    while (pos_ < t_.size() && std::isspace(t_[pos_])) {
      if (t_[pos_] == '\n') ++line_;
      ++pos_;
    }
    const std::size_t start = pos_;
    while (pos_ < t_.size() && !std::isspace(t_[pos_])) ++pos_;
    return {reinterpret_cast<const char*>(t_.data()) + start, pos_ - start};
  }

  [[noreturn]] void fail(const std::string& what) const { bad(path_, what + " (line " + std::to_string(line_) + ")"); }

  long long integer(const char* what) {
    const std::string_view tok = next();
    if (tok.empty()) fail(std::string("file ends before the ") + what + " (truncated)");
    long long v = 0;
    const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (r.ec != std::errc() || r.ptr != tok.data() + tok.size())
      fail(std::string("expected an integer for the ") + what + ", found '" + std::string(tok.substr(0, 32)) + "'");
    return v;
  }

  double real(const char* what) {
    const std::string_view tok = next();
    if (tok.empty()) fail(std::string("file ends before the ") + what + " (truncated)");
    double v = 0;
    const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (r.ec != std::errc() || r.ptr != tok.data() + tok.size() || !std::isfinite(v))
      fail(std::string("expected a finite number for the ") + what + ", found '" + std::string(tok.substr(0, 32)) + "'");
    return v;
  }

  int line() const { return line_; }

 private:
  const std::filesystem::path& path_;
  const std::vector<std::uint8_t>& t_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// ---- little-endian helpers for the binary format ----

void put_u32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}
void put_f32(std::vector<std::uint8_t>& b, float v) { put_u32(b, std::bit_cast<std::uint32_t>(v)); }
std::uint32_t get_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
float get_f32(const std::uint8_t* p) { return std::bit_cast<float>(get_u32(p)); }

/// Checks a keypoint read from a file; `where` says which one (line or offset) for the message.
void check_keypoint(const std::filesystem::path& path, const Keypoint& k, const std::string& where) {
  if (!std::isfinite(k.x) || !std::isfinite(k.y) || !std::isfinite(k.size) || !std::isfinite(k.angle) ||
      !std::isfinite(k.response))
    bad(path, "non-finite keypoint value " + where);
  if (k.size < 0) bad(path, "negative keypoint size " + where);
  if (k.octave < kMinOctave || k.octave > kMaxOctave) bad(path, "keypoint octave " + std::to_string(k.octave) + " out of range " + where);
  if (k.layer < 0 || k.layer > kMaxLayer) bad(path, "keypoint layer " + std::to_string(k.layer) + " out of range " + where);
}

}  // namespace

FeatureFormat parse_feature_format(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "key" || s == "sift") return FeatureFormat::kKey;
  if (s == "json") return FeatureFormat::kJson;
  if (s == "bin" || s == "binary") return FeatureFormat::kBinary;
  throw Error(ErrorCode::kInvalidArgument, "unknown feature format '" + name + "' (expected key, json or bin)");
}

FeatureFormat feature_format_from_path(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".key" || ext == ".sift") return FeatureFormat::kKey;
  if (ext == ".json") return FeatureFormat::kJson;
  return FeatureFormat::kBinary;
}

// ---- Lowe's .key ----

void write_features_key(const std::filesystem::path& path, const Features& f) {
  check_features(path, f);
  const std::vector<std::uint8_t> d = f.descriptors_u8();
  std::string s;
  s.reserve(64 + f.size() * (48 + kD * 4));
  s += std::to_string(f.size()) + " " + std::to_string(kD) + "\n";
  for (std::size_t i = 0; i < f.size(); ++i) {
    const Keypoint& k = f.keypoints[i];
    append_float(s, k.y);
    s += ' ';
    append_float(s, k.x);
    s += ' ';
    append_float(s, k.size / 2.0f);
    s += ' ';
    append_float(s, float(angle_to_radians(k.angle)));
    s += '\n';
    for (int j = 0; j < kD; ++j) {
      s += ' ';  // Lowe's files indent descriptor lines by one space
      s += std::to_string(d[i * kD + std::size_t(j)]);
      if (j % 20 == 19 || j == kD - 1) s += '\n';
    }
  }
  write_all(path, s.data(), s.size());
}

Features read_features_key(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> text = io_detail::read_file_bytes(path);
  TextTokens tok(path, text);
  const long long n = tok.integer("keypoint count");
  const long long dim = tok.integer("descriptor length");
  if (n < 0) tok.fail("negative keypoint count");
  if (dim != kD) tok.fail("descriptor length " + std::to_string(dim) + " (only " + std::to_string(kD) + " is supported)");
  // Each feature takes at least 4 + 128 tokens of 2 bytes: a count larger than that is a lie.
  if (std::uint64_t(n) > text.size() / (2 * (4 + kD)) + 1)
    tok.fail("the file is too short for " + std::to_string(n) + " keypoints (truncated)");
  Features f;  // f32 descriptors: the format names no type (io.hpp)
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * kD);
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    Keypoint& k = f.keypoints[i];
    k.y = float(tok.real("y coordinate"));
    k.x = float(tok.real("x coordinate"));
    const double scale = tok.real("scale");
    if (scale < 0) tok.fail("negative scale");
    k.size = float(2.0 * scale);
    k.angle = radians_to_angle(tok.real("orientation"));
    // A finite double such as 1e300 becomes +inf as a float: refuse it as the other readers do.
    check_keypoint(path, k, "(keypoint " + std::to_string(i) + ", line " + std::to_string(tok.line()) + ")");
    for (int j = 0; j < kD; ++j) {
      const long long v = tok.integer("descriptor value");
      if (v < 0 || v > 255) tok.fail("descriptor value " + std::to_string(v) + " outside 0..255");
      f.descriptors[i * kD + std::size_t(j)] = float(v);
    }
  }
  if (!tok.next().empty()) tok.fail("unexpected data after " + std::to_string(n) + " keypoints");
  return f;
}

// ---- JSON ----

void write_features_json(const std::filesystem::path& path, const Features& f) {
  check_features(path, f);
  nlohmann::json j;
  j["format"] = "spectrasift-features";
  j["version"] = 1;
  // Always written (readers take a file without it as f32): values are integers 0..255 when it is "u8".
  j["descriptor_type"] = to_string(f.descriptor_type);
  j["image"] = {{"width", f.image_width}, {"height", f.image_height}};
  nlohmann::json kps = nlohmann::json::array();
  for (const Keypoint& k : f.keypoints)
    kps.push_back({{"x", k.x}, {"y", k.y}, {"size", k.size}, {"angle", k.angle}, {"response", k.response},
                   {"octave", k.octave}, {"layer", k.layer}});
  j["keypoints"] = std::move(kps);
  nlohmann::json desc = nlohmann::json::array();
  const bool u8 = f.descriptor_type == DescriptorType::kU8;
  for (std::size_t i = 0; i < f.size(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (int c = 0; c < kD; ++c) {
      if (u8) {
        row.push_back(unsigned(f.descriptor_bytes[i * kD + std::size_t(c)]));
        continue;
      }
      const float v = f.descriptors[i * kD + std::size_t(c)];
      // Integral values (the default descriptors) are written as integers: shorter, and exact.
      if (v == std::nearbyint(v) && std::fabs(v) < 1e9f) row.push_back(static_cast<long long>(v));
      else row.push_back(v);
    }
    desc.push_back(std::move(row));
  }
  j["descriptors"] = std::move(desc);
  const std::string s = j.dump() + "\n";
  write_all(path, s.data(), s.size());
}

Features read_features_json(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> text = io_detail::read_file_bytes(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    bad(path, std::string("invalid JSON at byte ") + std::to_string(e.byte) + " (" + e.what() + ")");
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range 406: a number such as 1e999
    bad(path, std::string("invalid JSON (") + e.what() + ")");
  }
  try {
    if (!j.is_object() || j.value("format", std::string()) != "spectrasift-features")
      bad(path, "not a spectrasift feature file (\"format\" is not \"spectrasift-features\")");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != 1)
      bad(path, "unsupported feature file version (expected 1)");
    Features f;
    // Absent in files written before u8 descriptors existed: those hold floats.
    if (j.contains("descriptor_type")) {
      const auto& t = j["descriptor_type"];
      if (!t.is_string()) bad(path, "\"descriptor_type\" is not a string (expected \"f32\" or \"u8\")");
      try {
        f.descriptor_type = parse_descriptor_type(t.get<std::string>());
      } catch (const Error&) {
        bad(path, "unknown \"descriptor_type\" \"" + t.get<std::string>().substr(0, 32) + "\" (expected \"f32\" or \"u8\")");
      }
    }
    const bool u8 = f.descriptor_type == DescriptorType::kU8;
    if (j.contains("image")) {
      const auto& im = j.at("image");
      // Integers in 0..INT_MAX only: get<int>() of 1e300 is undefined behaviour, of 5e9 a wrapped value.
      auto dimension = [&](const char* key) -> int {
        const auto& v = im.at(key);
        if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<std::uint64_t>() > 0x7FFFFFFFull
                                                              : (v.get<std::int64_t>() < 0 ||
                                                                 v.get<std::int64_t>() > 0x7FFFFFFFll)))
          bad(path, std::string("image ") + key + " is not an integer in 0..2147483647");
        return int(v.get<std::int64_t>());
      };
      f.image_width = dimension("width");
      f.image_height = dimension("height");
    }
    const auto& kps = j.at("keypoints");
    const auto& desc = j.at("descriptors");
    if (!kps.is_array() || !desc.is_array()) bad(path, "\"keypoints\" and \"descriptors\" must be arrays");
    if (kps.size() != desc.size())
      bad(path, std::to_string(kps.size()) + " keypoints but " + std::to_string(desc.size()) + " descriptors");
    f.keypoints.resize(kps.size());
    if (u8) f.descriptor_bytes.resize(kps.size() * kD);
    else f.descriptors.resize(kps.size() * kD);
    auto number = [&](const nlohmann::json& o, const char* key, std::size_t i) -> double {
      if (!o.contains(key) || !o[key].is_number())
        bad(path, std::string("keypoint ") + std::to_string(i) + ": \"" + key + "\" missing or not a number");
      return o[key].get<double>();
    };
    auto integer = [&](const nlohmann::json& o, const char* key, std::size_t i) -> int {
      if (!o.contains(key) || !o[key].is_number_integer() ||
          (o[key].is_number_unsigned() ? o[key].get<std::uint64_t>() > 0x7FFFFFFFull
                                       : o[key].get<std::int64_t>() < -0x7FFFFFFFll - 1 ||
                                             o[key].get<std::int64_t>() > 0x7FFFFFFFll))
        bad(path, std::string("keypoint ") + std::to_string(i) + ": \"" + key + "\" missing or not a 32-bit integer");
      return int(o[key].get<std::int64_t>());
    };
    for (std::size_t i = 0; i < kps.size(); ++i) {
      const auto& o = kps[i];
      if (!o.is_object()) bad(path, "keypoint " + std::to_string(i) + " is not an object");
      Keypoint& k = f.keypoints[i];
      k.x = float(number(o, "x", i));
      k.y = float(number(o, "y", i));
      k.size = float(number(o, "size", i));
      k.angle = float(number(o, "angle", i));
      k.response = o.contains("response") ? float(number(o, "response", i)) : 0.0f;
      k.octave = o.contains("octave") ? integer(o, "octave", i) : 0;
      k.layer = o.contains("layer") ? integer(o, "layer", i) : 0;
      check_keypoint(path, k, "(keypoint " + std::to_string(i) + ")");
      const auto& row = desc[i];
      if (!row.is_array() || row.size() != std::size_t(kD))
        bad(path, "descriptor " + std::to_string(i) + " does not have " + std::to_string(kD) + " values");
      for (int c = 0; c < kD; ++c) {
        if (!row[std::size_t(c)].is_number()) bad(path, "descriptor " + std::to_string(i) + " holds a non-number");
        if (u8) {
          // Integers 0..255 only (3.0 counts: it is the value 3); anything else would change when stored as a byte.
          const double v = row[std::size_t(c)].get<double>();
          if (!(v >= 0.0 && v <= 255.0 && v == std::nearbyint(v)))
            bad(path, "descriptor " + std::to_string(i) + " value " + std::to_string(c) + " (" +
                          row[std::size_t(c)].dump().substr(0, 32) + ") is not an integer 0..255 (descriptor_type u8)");
          f.descriptor_bytes[i * kD + std::size_t(c)] = std::uint8_t(v);
          continue;
        }
        // Checked as a float: a finite double such as 1e39 becomes +inf (one cut a self-match to 1 match).
        const float v = float(row[std::size_t(c)].get<double>());
        if (!std::isfinite(v))
          bad(path, "descriptor " + std::to_string(i) + " holds a value that is not a finite float");
        f.descriptors[i * kD + std::size_t(c)] = v;
      }
    }
    return f;
  } catch (const nlohmann::json::exception& e) {
    bad(path, std::string("malformed feature file (") + e.what() + ")");
  }
}

// ---- binary ----

void write_features_bin(const std::filesystem::path& path, const Features& f) {
  check_features(path, f);
  if (f.size() > 0xFFFFFFFFull)
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": too many keypoints");
  // f32 features stay version 1, byte for byte as before version 2 existed; u8 ones need version 2's type.
  const bool u8 = f.descriptor_type == DescriptorType::kU8;
  std::vector<std::uint8_t> b;
  b.reserve(kBinHeaderV2 + f.size() * (7 * 4 + kD * (u8 ? 1 : 4)));
  b.insert(b.end(), {'S', 'S', 'F', 'T'});
  put_u32(b, u8 ? kBinVersionTyped : kBinVersionF32);
  put_u32(b, std::uint32_t(f.size()));
  put_u32(b, std::uint32_t(kD));
  put_u32(b, std::uint32_t(std::max(f.image_width, 0)));
  put_u32(b, std::uint32_t(std::max(f.image_height, 0)));
  if (u8) put_u32(b, kBinTypeU8);
  for (const Keypoint& k : f.keypoints) {
    put_f32(b, k.x);
    put_f32(b, k.y);
    put_f32(b, k.size);
    put_f32(b, k.angle);
    put_f32(b, k.response);
    put_u32(b, std::uint32_t(k.octave));  // two's complement
    put_u32(b, std::uint32_t(k.layer));
  }
  if (u8) b.insert(b.end(), f.descriptor_bytes.begin(), f.descriptor_bytes.end());
  else
    for (float v : f.descriptors) put_f32(b, v);
  write_all(path, b.data(), b.size());
}

Features read_features_bin(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> b = io_detail::read_file_bytes(path);
  constexpr std::size_t kKeypointBytes = 7 * 4;
  if (b.size() < kBinHeaderV1) bad(path, "truncated header (" + std::to_string(b.size()) + " bytes, need 24)");
  if (std::memcmp(b.data(), "SSFT", 4) != 0) bad(path, "not a spectrasift binary feature file (magic at offset 0)");
  const std::uint32_t version = get_u32(b.data() + 4);
  if (version != kBinVersionF32 && version != kBinVersionTyped)
    bad(path, "unsupported version " + std::to_string(version) + " at offset 4 (this reader knows 1 and 2)");
  const std::size_t header = version == kBinVersionF32 ? kBinHeaderV1 : kBinHeaderV2;
  if (b.size() < header)
    bad(path, "truncated header (" + std::to_string(b.size()) + " bytes, version " + std::to_string(version) +
                  " needs " + std::to_string(header) + ")");
  const std::uint32_t count = get_u32(b.data() + 8);
  const std::uint32_t dim = get_u32(b.data() + 12);
  if (dim != std::uint32_t(kD)) bad(path, "descriptor size " + std::to_string(dim) + " at offset 12 (expected 128)");
  const std::uint32_t width = get_u32(b.data() + 16), height = get_u32(b.data() + 20);
  if (width > 0x7FFFFFFFu || height > 0x7FFFFFFFu) bad(path, "image size out of range at offset 16");
  std::uint32_t type = kBinTypeF32;
  if (version == kBinVersionTyped) {
    type = get_u32(b.data() + 24);
    if (type != kBinTypeF32 && type != kBinTypeU8)
      bad(path, "unknown descriptor type " + std::to_string(type) + " at offset 24 (expected 0 = f32 or 1 = u8)");
  }
  const bool u8 = type == kBinTypeU8;
  const std::uint64_t value_bytes = u8 ? 1 : 4;
  // Sizes are 64-bit here, so the expected length cannot overflow before it is compared.
  const std::uint64_t expected = header + std::uint64_t(count) * (kKeypointBytes + std::uint64_t(kD) * value_bytes);
  if (b.size() < expected)
    bad(path, "truncated: " + std::to_string(count) + " keypoints need " + std::to_string(expected) +
                  " bytes, the file has " + std::to_string(b.size()));
  if (b.size() > expected)
    bad(path, "unexpected data after offset " + std::to_string(expected) + " (" + std::to_string(b.size()) + " bytes)");
  Features f;
  f.image_width = int(width);
  f.image_height = int(height);
  f.keypoints.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t off = header + i * kKeypointBytes;
    const std::uint8_t* p = b.data() + off;
    Keypoint& k = f.keypoints[i];
    k.x = get_f32(p);
    k.y = get_f32(p + 4);
    k.size = get_f32(p + 8);
    k.angle = get_f32(p + 12);
    k.response = get_f32(p + 16);
    k.octave = std::int32_t(get_u32(p + 20));
    k.layer = std::int32_t(get_u32(p + 24));
    check_keypoint(path, k, "(keypoint " + std::to_string(i) + " at offset " + std::to_string(off) + ")");
  }
  const std::size_t dbase = header + std::size_t(count) * kKeypointBytes;
  if (u8) {
    f.descriptor_type = DescriptorType::kU8;  // every byte is a valid value
    f.descriptor_bytes.assign(b.begin() + std::ptrdiff_t(dbase), b.end());
    return f;
  }
  f.descriptors.resize(std::size_t(count) * kD);
  for (std::size_t i = 0; i < f.descriptors.size(); ++i) {
    const float v = get_f32(b.data() + dbase + 4 * i);
    if (!std::isfinite(v)) bad(path, "non-finite descriptor value at offset " + std::to_string(dbase + 4 * i));
    f.descriptors[i] = v;
  }
  return f;
}

// ---- dispatch ----

void write_features(const std::filesystem::path& path, const Features& f, FeatureFormat format) {
  switch (format) {
    case FeatureFormat::kKey: return write_features_key(path, f);
    case FeatureFormat::kJson: return write_features_json(path, f);
    case FeatureFormat::kBinary: return write_features_bin(path, f);
  }
  throw Error(ErrorCode::kInvalidArgument, path.string() + ": unknown feature format");
}

Features read_features(const std::filesystem::path& path) {
  // Peek at the first bytes only; each reader then reads the whole file itself.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open");
  char head[64] = {};
  in.read(head, sizeof head);
  const std::size_t got = std::size_t(in.gcount());
  if (got >= 4 && std::memcmp(head, "SSFT", 4) == 0) return read_features_bin(path);
  std::size_t i = 0;
  if (got >= 3 && std::uint8_t(head[0]) == 0xEF && std::uint8_t(head[1]) == 0xBB && std::uint8_t(head[2]) == 0xBF) i = 3;
  while (i < got && std::isspace(static_cast<unsigned char>(head[i]))) ++i;
  if (i < got && head[i] == '{') return read_features_json(path);
  if (i < got && std::isdigit(static_cast<unsigned char>(head[i]))) return read_features_key(path);
  bad(path, got == 0 ? "empty file" : "not a feature file (neither binary, JSON nor Lowe's .key)");
}

}  // namespace spectrasift
