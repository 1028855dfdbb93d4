// spectrasift/io.hpp — reading and writing images and feature files.
// Every reader names the file and the problem in its Error (code kIo for open/read failures,
// kBadFormat for malformed content, kUnsupported for valid but unsupported variants). Every writer
// writes to a temporary file beside the target and renames it when complete, so that a failure
// leaves no partial output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "spectrasift/types.hpp"

namespace spectrasift {

// ---- images ---------------------------------------------------------------------------------------

/// Limits checked before any allocation while decoding.
struct ImageLimits {
  std::uint64_t max_pixels = std::uint64_t(1) << 30;  ///< width * height; 0 = no limit
};

/// Reads PNG (1/2/3/4 channels, 8/16 bit), JPEG (8 bit gray/colour), PGM/PPM (P2, P3, P5, P6; maxval
/// up to 65535: 16-bit when maxval > 255) and, when built with libtiff, TIFF (8/16-bit integer and
/// 32-bit float, contiguous or separate planes). The format is taken from the file's first bytes,
/// never from its extension. Samples keep their type (U8/U16/F32).
Image read_image(const std::filesystem::path& path, const ImageLimits& limits = {});

/// What read_image(path, mode) returns.
enum class ReadMode {
  kAsStored,  ///< channels and sample type as stored: read_image(path)
  /// One grey channel made the way cv2.imread(path, IMREAD_GRAYSCALE) (OpenCV 4.6) makes it from the file,
  /// so that SIFT sees OpenCV's pixels: a colour JPEG is decoded straight to libjpeg's luma plane
  /// (out_color_space = JCS_GRAYSCALE; it differs from converting the decoded RGB by up to a few levels);
  /// 8-bit colour PNG as libpng's rgb_to_gray that OpenCV asks for, (9797 R + 19234 G + 3737 B) >> 15;
  /// 8-bit colour PNM and TIFF as OpenCV's (4899 R + 9617 G + 1868 B + 8192) >> 14; alpha is ignored.
  /// These differ from to_gray_float's cvtColor rule, which SIFT applies to an in-memory colour image.
  /// 16-bit and float colour images are returned as stored (SIFT converts them at full precision; OpenCV
  /// would reduce them to 8 bits). CMYK JPEGs go through RGB and the 14-bit rule.
  kGray,
};
Image read_image(const std::filesystem::path& path, ReadMode mode, const ImageLimits& limits = {});

/// How write_png compresses. The default, level 1, is fast: zlib level 1 with run-length matching on rows
/// filtered with PNG's Up filter (a 2560x1600 photograph: ~0.35 s and ~9 MB, OpenCV imwrite's speed and
/// size; level 6 took ~2 s for 8.6 MB). Levels 2..9 are zlib's levels with libpng's adaptive choice of
/// filter per row: smaller files, several times slower (9: the smallest). 0 stores the rows uncompressed.
struct PngOptions {
  int level = 1;  ///< 0..9; others throw Error(kInvalidArgument)
};

/// Writes PNG (U8 or U16; 1, 2, 3 or 4 channels). F32 images are written as U16 after clamping [0, 1].
void write_png(const std::filesystem::path& path, const Image& image, const PngOptions& options = {});
/// Writes TIFF (U8/U16/F32) when built with libtiff; throws Error(kUnsupported) otherwise.
void write_tiff(const std::filesystem::path& path, const Image& image);
/// Writes by extension: .png, .tif/.tiff, .pgm/.ppm (8/16 bit).
void write_image(const std::filesystem::path& path, const Image& image);
/// True when this build reads and writes TIFF.
bool tiff_supported() noexcept;

/// Grey levels as SIFT sees them: one float channel in 0..255.
/// Colour uses OpenCV's BGR2GRAY weights on (R, G, B): 0.299 R + 0.587 G + 0.114 B; alpha is ignored;
/// 2-channel (grey + alpha) keeps the grey channel. U8 values are exact; U8 colour is rounded like
/// OpenCV 4.6's cvtColor ((9798 R + 19235 G + 3735 B + 16384) >> 15, equal to it for all 2^24 colours)
/// so that our input equals cv::SIFT's; U16 is divided by 257
/// (65535 -> 255) and F32 multiplied by 255, without rounding, so no precision is lost.
ImageF to_gray_float(const Image& image);
/// A single-channel U8 image from a float image, rounding and clamping to 0..255.
Image to_u8(const ImageF& image);

// ---- feature files --------------------------------------------------------------------------------

enum class FeatureFormat { kKey, kJson, kBinary };
/// "key", "json" or "bin"; throws Error(kInvalidArgument) otherwise.
FeatureFormat parse_feature_format(const std::string& name);
/// From the extension: .key/.sift -> kKey, .json -> kJson, anything else -> kBinary.
FeatureFormat feature_format_from_path(const std::filesystem::path& path);

/// Every writer takes features of either descriptor type (Features::descriptor_type) and refuses, with
/// Error(kInvalidArgument), features whose array of that type does not hold 128 values per keypoint.
///
/// Lowe's text format (the format of his box.sift): first line "N 128", then per feature a line
/// "y x scale orientation" (scale = sigma = size / 2 in input pixels, orientation in radians, the
/// OpenCV angle converted with angle * pi / 180 and reduced to (-pi, pi]) followed by 128 integers
/// 0..255 over several lines (20 per line); f32 values are rounded and saturated (descriptors_u8()), u8
/// ones written as they are. The format names no type, so reading gives f32 descriptors (OpenCV's default
/// and what other tools' .key files were read as before; to_u8() makes the u8 form, losslessly), and
/// octave/layer/response = 0.
void write_features_key(const std::filesystem::path& path, const Features& f);
Features read_features_key(const std::filesystem::path& path);
/// JSON: {"format":"spectrasift-features","version":1,"descriptor_type":"f32"|"u8","image":{"width","height"},
/// "keypoints":[{"x","y","size","angle","response","octave","layer"}...],"descriptors":[[128 numbers]...]}.
/// A file without "descriptor_type" (written before u8 descriptors existed) reads as f32; in a "u8" file
/// every value must be an integer 0..255. Reading gives back the written type.
void write_features_json(const std::filesystem::path& path, const Features& f);
Features read_features_json(const std::filesystem::path& path);
/// Compact binary, little-endian throughout: magic "SSFT", u32 version, u32 count, u32 descriptor size (128),
/// u32 width, u32 height; version 2 adds a u32 descriptor type (0 = f32, 1 = u8) at offset 24; then per
/// keypoint 7 float32/int32 fields (x, y, size, angle, response, octave, layer), then count * 128 values:
/// float32 in version 1 and in version 2 of type f32, one byte each in version 2 of type u8.
/// f32 features are written as version 1 (header of 24 bytes, the layout readers before version 2 know),
/// u8 features as version 2 (header of 28 bytes, a quarter of the descriptor bytes). Reading accepts both
/// and gives back the written type; another version or type is refused with its byte offset.
void write_features_bin(const std::filesystem::path& path, const Features& f);
Features read_features_bin(const std::filesystem::path& path);
/// Dispatch on a format.
void write_features(const std::filesystem::path& path, const Features& f, FeatureFormat format);
Features read_features(const std::filesystem::path& path);  ///< format detected from the content

// ---- output safety --------------------------------------------------------------------------------

/// A file written under a temporary name beside `target` and renamed onto it by commit(). If the
/// object is destroyed without commit() (an exception), the temporary is removed: no partial output.
/// The temporary "<target>.tmp-<pid>-<n>" is created exclusively (never through a link planted at that
/// name) and removed on SIGINT/SIGTERM/SIGHUP (when the program has not installed its own handler); those
/// of processes that died are removed when the same target is written again. A symlink `target` is written
/// through (its target is replaced); a directory, device, FIFO or socket is refused with Error(kIo).
class AtomicOutput {
 public:
  explicit AtomicOutput(std::filesystem::path target);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  /// The name given (messages use it).
  const std::filesystem::path& target() const noexcept { return target_; }
  /// The file commit() replaces: target() with symlinks followed.
  const std::filesystem::path& resolved_target() const noexcept { return resolved_; }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path resolved_;
  std::filesystem::path temp_;
  bool committed_ = false;
  bool nested_ = false;  ///< target is another AtomicOutput's temporary: written in place, its owner renames it
};

/// Several outputs of one command, committed as a set: add() gives the temporary name (beside the
/// target) to write each one to, and commit() renames them all onto their targets once every one is
/// complete. Destroyed without commit() (an exception while any of them was written), it removes every
/// temporary: no new output appears. commit() holds an exclusive lock (flock) on every folder of the set
/// while it renames, so that two processes writing the same outputs never mix their files; it keeps a
/// hard link to each file it replaces until the whole set is in place, and if a rename fails it puts the
/// old files back (and removes the new ones that had none), removes the remaining temporaries, and throws
/// Error(kIo) with the cause of the failed rename: the user sees the complete old set or the new one.
///
///   OutputSet out;
///   write_envi_f32(out, "scores.hdr", w, h, names, scores.data());  // scores.hdr + scores.img
///   write_png(out.add("scores.png"), picture);
///   out.commit();
class OutputSet {
 public:
  OutputSet();
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  /// Registers `target` and returns the temporary path to write it to. Throws Error(kInvalidArgument)
  /// when the set holds `target` already, Error(kIo) when `target` is an existing directory.
  std::filesystem::path add(const std::filesystem::path& target);
  /// Renames every temporary onto its target, in the order they were added. Call it once.
  void commit();
  std::vector<std::filesystem::path> targets() const;

 private:
  std::vector<std::unique_ptr<AtomicOutput>> outputs_;
};

}  // namespace spectrasift
#include "spectrasift/envi.hpp"  // ENVI cubes and spectral libraries
