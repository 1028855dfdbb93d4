// Hostile inputs and faults (issue 21): one case per item. Each case runs in a forked child, the crafted
// inputs (all under 1 KB) with an address space limited to 256 MB beyond the process's baseline (what it maps
// before the case: shared libraries, arenas), and must end with a clean Error — never a crash, an allocation
// of the declared size, a file written through a planted link or a temporary left.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/spectral.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan reserves terabytes of shadow: no address-space limit there
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

struct ChildResult {
  bool exited = false;
  int status = -1;  ///< exit status, or the signal number when !exited
  std::string message;
};

/// This process's address-space size in KB (VmSize of /proc/self/status; 0 when unknown).
std::uint64_t vm_size_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7));
  return 0;
}

/// Runs `body` in a forked child with an address space limited to 256 MB beyond its baseline (`limit`),
/// capturing what it returns (a message: "" = success) through a pipe. Exit 0: body returned; 2: an exception escaped.
ChildResult in_child(const std::function<std::string()>& body, bool limit = true) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (limit && !kSanitized) {
      // 256 MB beyond what the process maps already (a CUDA build maps libcublasLt, 540 MB, before main).
      const rlim_t as = rlim_t(vm_size_kb()) * 1024 + (rlim_t(256) << 20);
      rlimit r{as, as};
      ::setrlimit(RLIMIT_AS, &r);
    }
    std::string msg;
    int code = 0;
    try {
      msg = body();
    } catch (const std::exception& e) {
      msg = std::string("escaped: ") + e.what();
      code = 2;
    }
    if (!msg.empty() && ::write(fds[1], msg.data(), msg.size()) < 0) code = 3;
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.message.append(buf, std::size_t(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.exited = WIFEXITED(st);
  r.status = r.exited ? WEXITSTATUS(st) : WTERMSIG(st);
  return r;
}

/// The message of the Error `fn` throws, prefixed by its code ("code N: ..."), or "no error".
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return "code " + std::to_string(int(e.code())) + ": " + e.what();
  } catch (const std::bad_alloc&) {
    return "bad_alloc";
  }
  return "no error";
}

std::string code(ErrorCode c) { return "code " + std::to_string(int(c)) + ": "; }


void put(std::vector<std::uint8_t>& v, std::uint32_t x, bool big) {
  for (int i = 0; i < 4; ++i) v.push_back(std::uint8_t(big ? x >> (24 - 8 * i) : x >> (8 * i)));
}
void put16(std::vector<std::uint8_t>& v, std::uint16_t x, bool big) {
  v.push_back(std::uint8_t(big ? x >> 8 : x));
  v.push_back(std::uint8_t(big ? x : x >> 8));
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void png_chunk(std::vector<std::uint8_t>& f, const char* type, const std::vector<std::uint8_t>& data) {
  put(f, std::uint32_t(data.size()), true);
  const std::size_t start = f.size();
  f.insert(f.end(), type, type + 4);
  f.insert(f.end(), data.begin(), data.end());
  put(f, crc32(f.data() + start, f.size() - start), true);
}

std::vector<std::uint8_t> crafted_png(std::uint32_t w, std::uint32_t h, std::uint8_t depth, std::uint8_t colour) {
  std::vector<std::uint8_t> f = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  std::vector<std::uint8_t> ihdr;
  put(ihdr, w, true);
  put(ihdr, h, true);
  ihdr.insert(ihdr.end(), {depth, colour, 0, 0, 0});
  png_chunk(f, "IHDR", ihdr);
  png_chunk(f, "IDAT", {0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01});
  png_chunk(f, "IEND", {});
  return f;
}

/// A baseline JPEG header (one grey component, one-code Huffman tables) declaring w x h, a few data bytes.
std::vector<std::uint8_t> crafted_jpeg(std::uint16_t w, std::uint16_t h) {
  std::vector<std::uint8_t> f = {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x43, 0x00};
  f.insert(f.end(), 64, 1);                                                    // DQT: 64 ones
  f.insert(f.end(), {0xFF, 0xC0, 0x00, 0x0B, 0x08});                           // SOF0, 8 bits
  put16(f, h, true);
  put16(f, w, true);
  f.insert(f.end(), {0x01, 0x01, 0x11, 0x00});                                 // 1 component
  f.insert(f.end(), {0xFF, 0xC4, 0x00, 0x14, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00});  // DC
  f.insert(f.end(), {0xFF, 0xC4, 0x00, 0x14, 0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00});  // AC
  f.insert(f.end(), {0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00});  // SOS
  f.insert(f.end(), 16, 0x00);
  f.insert(f.end(), {0xFF, 0xD9});
  return f;
}

/// A little-endian TIFF declaring w x h float samples in one uncompressed strip it does not hold.
std::vector<std::uint8_t> crafted_tiff(std::uint32_t w, std::uint32_t h) {
  std::vector<std::uint8_t> f = {'I', 'I', 42, 0};
  put(f, 8, false);  // IFD at 8
  struct Entry {
    std::uint16_t tag, type;
    std::uint32_t value;
  };
  const Entry entries[] = {{256, 4, w}, {257, 4, h},  {258, 3, 32}, {259, 3, 1},         {262, 3, 1},
                           {273, 4, 8}, {277, 3, 1},  {278, 4, h},  {279, 4, w * 4 * h}, {339, 3, 3}};
  put16(f, std::uint16_t(std::size(entries)), false);
  for (const Entry& e : entries) {
    put16(f, e.tag, false);
    put16(f, e.type, false);
    put(f, 1, false);
    if (e.type == 3) {
      put16(f, std::uint16_t(e.value), false);
      put16(f, 0, false);
    } else {
      put(f, e.value, false);
    }
  }
  put(f, 0, false);  // no next IFD
  return f;
}

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("spectrasift_hostile_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    EXPECT_LT(bytes.size(), 1024u) << name << " is not a tiny file";
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return p;
  }
  fs::path text(const std::string& name, const std::string& content) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::size_t temporaries() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp-") != std::string::npos) ++n;
    return n;
  }
  /// Runs read_image(path) limited to 256 MB; returns its error.
  std::string read_limited(const fs::path& path) const {
    const ChildResult r = in_child([&] { return error_of([&] { read_image(path); }); });
    EXPECT_TRUE(r.exited) << path << " killed the reader with signal " << r.status;
    EXPECT_EQ(r.status, 0) << r.message;
    return r.message;
  }
  /// Runs the CLI (after `prefix`, shell words such as "ulimit -v N;" or "env X=Y"); returns its exit status
  /// and stderr.
  std::pair<int, std::string> cli(const std::string& args, const std::string& prefix = "") const {
    const fs::path err = dir_ / ".stderr";
    const std::string cmd =
        prefix + " " + std::string(SPECTRASIFT_CLI) + " " + args + " >/dev/null 2>'" + err.string() + "'";
    const int raw = std::system(cmd.c_str());
    std::ifstream in(err);
    std::string e((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(err);
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), e};
  }
  fs::path dir_;
};

// ---- 1. tiny files must not allocate gigabytes ---------------------------------------------------------

TEST_F(Hostile, Item1_TinyPngDeclaringAGiantRowIsRefusedBeforeLibpngAllocates) {
  // 2^31 - 1 x 1 RGBA 16-bit: libpng's row buffers (17 GB) came before our check.
  const std::string e = read_limited(write("wide.png", crafted_png(0x7FFFFFFF, 1, 16, 6)));
  EXPECT_EQ(e.rfind(code(ErrorCode::kOutOfMemory), 0), 0u) << e;
  EXPECT_NE(e.find("exceeds the limit"), std::string::npos) << e;
  // 30000 x 30000 grey: within the pixel limit, but 69 bytes cannot hold it.
  const std::string g = read_limited(write("square.png", crafted_png(30000, 30000, 8, 0)));
  EXPECT_EQ(g.rfind(code(ErrorCode::kBadFormat), 0), 0u) << g;
  EXPECT_NE(g.find("header promises"), std::string::npos) << g;
}

TEST_F(Hostile, Item1_TinyJpegDeclaringABillionPixelsIsRefused) {
  const std::string e = read_limited(write("big.jpg", crafted_jpeg(65000, 16000)));
  EXPECT_EQ(e.rfind(code(ErrorCode::kBadFormat), 0), 0u) << e;
  EXPECT_NE(e.find("header promises 65000x16000"), std::string::npos) << e;
}

TEST_F(Hostile, Item1_TinyTiffIsComparedWithItsFileSize) {
  if (!tiff_supported()) GTEST_SKIP() << "no libtiff in this build";
  const std::string e = read_limited(write("big.tif", crafted_tiff(32000, 32000)));
  EXPECT_EQ(e.rfind(code(ErrorCode::kBadFormat), 0), 0u) << e;
  EXPECT_NE(e.find("header promises"), std::string::npos) << e;
}

// ---- 2. limits that protect the machine ------------------------------------------------------------

TEST_F(Hostile, Item2_JobsOverTheMemoryBudgetAreRefusedWithHowToLowerThem) {
  // A tiny valid PNG (64 x 64 grey, constant) and a 16 x 16 x 4 cube, each well under 1 KB.
  const Image flat = Image::allocate(64, 64, 1, PixelType::kU8);
  write_png(dir_ / "small.png", flat);
  ASSERT_LT(fs::file_size(dir_ / "small.png"), 1024u);
  std::vector<float> data(16 * 16 * 4, 0.5f);
  write_envi_f32(dir_ / "cube.hdr", 16, 16, {"a", "b", "c", "d"}, data.data());
  ASSERT_LT(fs::file_size(dir_ / "cube.img"), 8192u);

  const auto [s1, e1] = cli("sift '" + (dir_ / "small.png").string() + "' --max-memory 100K");
  EXPECT_EQ(s1, 1) << e1;
  EXPECT_NE(e1.find("sift: image of 64 x 64 needs about"), std::string::npos) << e1;
  EXPECT_NE(e1.find("--no-upsample"), std::string::npos) << e1;
  EXPECT_NE(e1.find("--max-memory"), std::string::npos) << e1;

  const std::string cube = "'" + (dir_ / "cube.hdr").string() + "'";
  const auto [s2, e2] = cli("spectral " + cube + " --ref-pixel 0,0 --ref-pixel 1,1 --ref-pixel 2,2 --top 3 -o '" +
                            (dir_ / "out.hdr").string() + "' --max-memory 4K");
  EXPECT_EQ(s2, 1) << e2;
  EXPECT_NE(e2.find("spectral: 16 x 16 pixels x 3 score band(s) needs about"), std::string::npos) << e2;
  EXPECT_NE(e2.find("smaller K"), std::string::npos) << e2;
  EXPECT_FALSE(fs::exists(dir_ / "out.hdr"));

  // SPECTRASIFT_MAX_MEMORY is --max-memory's variable (the flag wins over it).
  const std::string small = "sift '" + (dir_ / "small.png").string() + "'";
  const auto [s5, e5] = cli(small, "env SPECTRASIFT_MAX_MEMORY=100K");
  EXPECT_EQ(s5, 1) << e5;
  EXPECT_NE(e5.find("sift: image of 64 x 64 needs about"), std::string::npos) << e5;
  EXPECT_NE(e5.find("SPECTRASIFT_MAX_MEMORY"), std::string::npos) << e5;
  EXPECT_EQ(cli(small + " --max-memory 1G", "env SPECTRASIFT_MAX_MEMORY=100K").first, 0);
  const auto [s6, e6] = cli(small, "env SPECTRASIFT_MAX_MEMORY=12Q");
  EXPECT_NE(s6, 0);
  EXPECT_NE(e6.find("SPECTRASIFT_MAX_MEMORY: '12Q' is not a memory size"), std::string::npos) << e6;

  // The default budget (half of the physical memory) admits them.
  const auto [s3, e3] = cli("spectral " + cube + " --ref-pixel 0,0 --top 1 -o '" + (dir_ / "out.hdr").string() + "'");
  EXPECT_EQ(s3, 0) << e3;
  const auto [s4, e4] = cli("sift x.png --max-memory 12Q");
  EXPECT_EQ(s4, 2) << e4;
  EXPECT_NE(e4.find("'12Q' is not a memory size"), std::string::npos) << e4;
}

TEST_F(Hostile, Item2_ACubeOfVeryManyBandsIsRefusedBeforeItsTileBuffers) {
  // 1 x 1 x 2^24 bands (a sparse 16 MB file): the CPU backend's tile buffers hold 64 pixels x bands per thread
  // (a 1 x 1 x 2^28 cube took 5.5 GB); the budget counts them, so the job is refused before they are made.
  std::vector<float> one(1, 1.0f);
  write_envi_f32(dir_ / "deep.hdr", 1, 1, {"a"}, one.data());
  text("deep.hdr", "ENVI\nsamples = 1\nlines = 1\nbands = 16777216\nheader offset = 0\nfile type = ENVI Standard\n"
                   "data type = 1\ninterleave = bsq\nbyte order = 0\n");
  fs::resize_file(dir_ / "deep.img", std::uintmax_t(1) << 24);
  const ChildResult r = in_child([&] {
    ContextOptions co;
    co.backend = Backend::kCpu;
    co.threads = 1;
    co.max_memory = std::uint64_t(1) << 30;  // 1 GB: far above the output and the reference (64 MB)
    Context ctx(co);
    SpectralLibrary lib;
    lib.count = 1;
    lib.bands = 1 << 24;
    lib.spectra.assign(std::size_t(1) << 24, 1.0f);
    return error_of([&] { spectral_match(ctx, open_envi(dir_ / "deep.hdr"), lib, SpectralOptions{}); });
  });
  EXPECT_EQ(r.message.rfind(code(ErrorCode::kOutOfMemory), 0), 0u) << r.message;
  EXPECT_NE(r.message.find("spectral: 1 x 1 pixels x 1 score band(s) needs about"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("fewer bands"), std::string::npos) << r.message;
}

TEST_F(Hostile, Item2_PngPictureOfADegenerateCubeShapeIsRefusedBeforeTheJob) {
  // 2^24 x 1 x 1 (a sparse 16 MB file): the picture's canvas was 2^24 x 160 RGB, 8 GB, before libpng refused
  // its width. With 256 MB of address space to spare the CLI must refuse it before matching, with the reason.
  std::vector<float> one(1, 1.0f);
  write_envi_f32(dir_ / "line.hdr", 1, 1, {"a"}, one.data());
  std::string hdr = "ENVI\nsamples = 16777216\nlines = 1\nbands = 1\nheader offset = 0\nfile type = ENVI Standard\n"
                    "data type = 1\ninterleave = bsq\nbyte order = 0\n";
  text("line.hdr", hdr);
  fs::resize_file(dir_ / "line.img", std::uintmax_t(1) << 24);
  // 256 MB above the process's baseline: a CUDA build maps libcublasLt (540 MB) before main, so a bare 256 MB
  // would stop the CLI from starting; this test process links the same libraries and gives the baseline.
  const std::string limit = kSanitized ? "" : "ulimit -v " + std::to_string(vm_size_kb() + 262144) + ";";
  const std::string args = "spectral --backend cpu '" + (dir_ / "line.hdr").string() + "' --metric ed --ref-pixel 0,0 --best -o '" +
                           (dir_ / "out.hdr").string() + "' --png '" + (dir_ / "out.png").string() + "'";
  const auto [s1, e1] = cli(args, limit);
  EXPECT_EQ(s1, 1) << e1;
  EXPECT_NE(e1.find("--png: the picture of a 16777216 x 1 cube would be 16777472 x 448 pixels, over PNG's 1000000 "
                    "pixels a side"),
            std::string::npos)
      << e1;
  EXPECT_FALSE(fs::exists(dir_ / "out.hdr"));
  // Within PNG's sides but not the budget: 900000 x 1 makes a 2.4 GB picture.
  text("line.hdr", std::string(hdr).replace(hdr.find("16777216"), 8, "900000"));
  const auto [s2, e2] = cli(args + " --max-memory 100M", limit);
  EXPECT_EQ(s2, 1) << e2;
  EXPECT_NE(e2.find("--png: the picture of a 900000 x 1 cube needs about"), std::string::npos) << e2;
  EXPECT_NE(e2.find("more than the memory budget of 100 MB"), std::string::npos) << e2;
  // Without --png the same cube is matched.
  const std::string plain = "spectral --backend cpu '" + (dir_ / "line.hdr").string() + "' --metric ed --ref-pixel 0,0 --best -o '" +
                            (dir_ / "out.hdr").string() + "'";
  EXPECT_EQ(cli(plain, limit).first, 0);
}

// ---- 3. temporary files that cannot be redirected ----------------------------------------------------

TEST_F(Hostile, Item3_PlantedLinksAtTemporaryNamesAreNeverFollowed) {
  const fs::path victim = text("victim.txt", "precious");
  const fs::path target = dir_ / "out.key";
  const ChildResult r = in_child([&] {
    // The child's temporaries are <target>.tmp-<pid>-<n> with a small n: plant links at the first 50.
    for (int n = 0; n < 50; ++n)
      fs::create_symlink(victim, fs::path(target.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n)));
    Features f;
    f.keypoints.push_back(Keypoint{});
    f.descriptors.assign(128, 1.0f);
    return error_of([&] { write_features(target, f, FeatureFormat::kKey); }) == "no error" ? std::string()
                                                                                             : "write failed";
  });
  EXPECT_EQ(r.status, 0) << r.message;
  std::ifstream in(victim);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target)));
}

TEST_F(Hostile, Item3_MessagesNameTheUsersFileNotTheTemporary) {
  const ChildResult r = in_child([&] {
    OutputSet set;
    Image broken = Image::allocate(4, 4, 1, PixelType::kU8);
    broken.data.resize(3);  // shape and data disagree: write_png refuses it
    return error_of([&] { write_png(set.add(dir_ / "picture.png"), broken); });
  });
  EXPECT_NE(r.message.find("picture.png:"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find(".tmp-"), std::string::npos) << r.message;
}

// ---- 4. output targets that are not regular files ---------------------------------------------------

TEST_F(Hostile, Item4_DevicesFifosAndFoldersAreRefusedLinksWrittenThrough) {
  Features f;
  const ChildResult r = in_child([&] {
    std::string out;
    out += error_of([&] { write_features("/dev/null", f, FeatureFormat::kJson); }) + "\n";
    ::mkfifo((dir_ / "fifo").c_str(), 0600);
    out += error_of([&] { write_features(dir_ / "fifo", f, FeatureFormat::kJson); }) + "\n";
    fs::create_directory(dir_ / "folder");
    out += error_of([&] { write_features(dir_ / "folder", f, FeatureFormat::kJson); }) + "\n";
    fs::create_symlink("real.json", dir_ / "link.json");
    out += error_of([&] { write_features(dir_ / "link.json", f, FeatureFormat::kJson); }) + "\n";
    return out;
  });
  EXPECT_NE(r.message.find("/dev/null: is a device"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("fifo: is a FIFO"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("folder: is a directory"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("\nno error\n"), std::string::npos) << r.message;  // the link
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));           // still the user's link ...
  EXPECT_TRUE(fs::is_regular_file(dir_ / "real.json"));      // ... and the file it names was written
  EXPECT_EQ(temporaries(), 0u);
}

// ---- 5. output sets that survive faults -------------------------------------------------------------

TEST_F(Hostile, Item5_SigtermAndSigintRemoveTheTemporaries) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const ChildResult r = in_child([&] {
      OutputSet set;
      set.add(dir_ / "a.img");
      set.add(dir_ / "a.hdr");
      ::kill(::getpid(), sig);
      return std::string("survived signal ") + std::to_string(sig);
    });
    EXPECT_FALSE(r.exited) << r.message;
    EXPECT_EQ(r.status, sig);
    EXPECT_EQ(temporaries(), 0u) << "signal " << sig;
  }
}

TEST_F(Hostile, Item5_TemporariesOfDeadProcessesAreSwept) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);  // reaped: that pid runs nothing now (reuse within the test is negligible)
  text("out.json.tmp-" + std::to_string(dead) + "-3", "left by a SIGKILL");
  text("out.json.tmp-" + std::to_string(::getpid()) + "-99999", "a live process's: kept");
  const ChildResult r = in_child([&] { return error_of([&] { write_features(dir_ / "out.json", Features{}, FeatureFormat::kJson); }); });
  EXPECT_EQ(r.message, "no error");
  EXPECT_FALSE(fs::exists(dir_ / ("out.json.tmp-" + std::to_string(dead) + "-3")));
  EXPECT_TRUE(fs::exists(dir_ / ("out.json.tmp-" + std::to_string(::getpid()) + "-99999")));
}

TEST_F(Hostile, Item5_AFailedRenameRestoresTheOldSetAndReportsTheCause) {
  text("a.txt", "old a");
  text("b.txt", "old b");
  const ChildResult r = in_child([&] {
    OutputSet set;
    std::ofstream(set.add(dir_ / "a.txt")) << "new a";
    std::ofstream(set.add(dir_ / "b.txt")) << "new b";
    // b.txt becomes a non-empty folder before the commit: its rename fails (EISDIR).
    fs::remove(dir_ / "b.txt");
    fs::create_directory(dir_ / "b.txt");
    text("b.txt/inside", "x");
    return error_of([&] { set.commit(); });
  });
  EXPECT_NE(r.message.find("b.txt: cannot write (" + std::string(std::strerror(EISDIR)) + ")"), std::string::npos)
      << r.message;
  std::ifstream a(dir_ / "a.txt");
  std::string content((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "old a");  // the old file is back, not deleted and not the new one
  EXPECT_EQ(temporaries(), 0u);
}

TEST_F(Hostile, Item5_ConcurrentWritersWaitForTheFolderLock) {
  text("x.txt", "old");
  const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another writer in the middle of its commit
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fd);  // the inherited descriptor shares the parent's lock: this writer must take its own
    OutputSet set;
    std::ofstream(set.add(dir_ / "x.txt")) << "new";
    set.commit();
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::ifstream in(dir_ / "x.txt");
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "old") << "the commit did not wait for the lock";
  }
  ::close(fd);
  int st = 0;
  ::waitpid(pid, &st, 0);
  std::ifstream in(dir_ / "x.txt");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "new");
}

// ---- 6. smaller defects -----------------------------------------------------------------------------

TEST_F(Hostile, Item6_CliArgumentsOutOfRangeAreUsageErrors) {
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"sift x.png --threads 100000", "--threads: '100000' is not an integer in 0.."},
      {"sift x.png --device -1", "--device: '-1' is not an integer in 0..2147483647"},
      {"register a.png b.png --seed -1", "--seed: '-1' is not an integer"},
      {"register a.png b.png --seed 18446744073709551616", "--seed: '18446744073709551616' is not"},
      {"register a.png b.png --seed 1e23", "--seed: '1e23' is not"},
      {"register a.png b.png --threshold nan", "--threshold: 'nan' is not a positive finite number"},
      {"spectral c.hdr -o o.hdr --threshold nan", "--threshold: 'nan' is not a finite number"},
      {"spectral c.hdr -o o.hdr --top -3", "--top: '-3' is not an integer in 1..2147483647"},
  };
  for (const Case& c : cases) {
    const auto [status, err] = cli(c.args);
    EXPECT_EQ(status, 2) << c.args << ": " << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.args << ": " << err;
    EXPECT_LT(err.size(), 200u) << c.args << ": " << err;  // no 300-digit bound
  }
}

TEST_F(Hostile, Item6_JsonDescriptorBeyondFloatRangeIsRefused) {
  std::string json = R"({"format":"spectrasift-features","version":1,"keypoints":[{"x":1,"y":1,"size":2,"angle":0}],)"
                     R"("descriptors":[[1e39)";
  for (int i = 1; i < 128; ++i) json += ",0";
  json += "]]}";
  const fs::path p = text("inf.json", json);
  const ChildResult r = in_child([&] { return error_of([&] { read_features_json(p); }); });
  EXPECT_EQ(r.message.rfind(code(ErrorCode::kBadFormat), 0), 0u) << r.message;
  EXPECT_NE(r.message.find("not a finite float"), std::string::npos) << r.message;
}

TEST_F(Hostile, Item6_CubeTruncatedWhileMappedIsAnErrorNotSigbus) {
  const int samples = 64, lines = 64, bands = 16;  // 256 KB: many pages
  std::vector<float> data(std::size_t(samples) * lines * bands, 1.0f);
  std::vector<std::string> names;
  for (int b = 0; b < bands; ++b) names.push_back(std::string(1, char('a' + b)));
  write_envi_f32(dir_ / "cube.hdr", samples, lines, names, data.data());
  const ChildResult r = in_child([&] {
    const EnviCube cube = open_envi(dir_ / "cube.hdr");
    fs::resize_file(dir_ / "cube.img", 4096);  // another program truncates it
    double sum = 0;
    for (int b = 0; b < bands; ++b) sum += cube.value(lines - 1, samples - 1, b);  // past the new end
    if (sum != 0) return std::string("read stale data");
    return error_of([&] { cube.check_intact(); });
  }, /*limit=*/false);  // not a memory case: a CUDA build's process already maps more than 256 MB (seen on the H200)
  EXPECT_TRUE(r.exited) << "signal " << r.status;
  EXPECT_EQ(r.message.rfind(code(ErrorCode::kIo), 0), 0u) << r.message;
  EXPECT_NE(r.message.find("shrank while it was read"), std::string::npos) << r.message;
}

TEST_F(Hostile, Item6_QuotedCommaInACsvHeaderIsPartOfTheName) {
  const fs::path p = text("lib.csv", "wavelength (nm),\"grass, dry\",\"say \"\"hi\"\"\"\n400,0.1,0.2\n500,0.3,0.4\n");
  const SpectralLibrary lib = read_csv_library(p);
  ASSERT_EQ(lib.count, 2);
  EXPECT_EQ(lib.names[0], "grass, dry");
  EXPECT_EQ(lib.names[1], "say \"hi\"");
  EXPECT_EQ(lib.bands, 2);
  EXPECT_EQ(lib.wavelength_units, "nm");
}

TEST_F(Hostile, Item6_ReadOnlyFolderSaysWhyItCannotWrite) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  fs::create_directory(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  const ChildResult r = in_child([&] { return error_of([&] { write_features(dir_ / "ro" / "m.json", Features{}, FeatureFormat::kJson); }); });
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
  EXPECT_NE(r.message.find("m.json: cannot create a file in"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(std::strerror(EACCES)), std::string::npos) << r.message;
}

TEST_F(Hostile, Item6_TopKCostDoesNotBlowUpWithK) {
  // 5000 references, K = 2000, each reference closer to every pixel than all before it: the sorted insertion
  // moved ~K entries per reference (~10^7 per pixel, 21 s for such a job); the heap moves log K. The child
  // runs under a CPU-time limit (SIGXCPU) far above the heap's cost and far below the insertion's.
  const int samples = 32, lines = 32, bands = 4, count = 5000, k = 2000;
  std::vector<float> data(std::size_t(samples) * lines * bands, 0.0f);
  write_envi_f32(dir_ / "zero.hdr", samples, lines, {"a", "b", "c", "d"}, data.data());
  const ChildResult r = in_child([&] {
    rlimit cpu{6, 7};
    ::setrlimit(RLIMIT_CPU, &cpu);
    SpectralLibrary lib;
    lib.count = count;
    lib.bands = bands;
    for (int i = 0; i < count; ++i)
      for (int b = 0; b < bands; ++b) lib.spectra.push_back(float(count - i));  // distance 2 (count - i)
    ContextOptions co;
    co.backend = Backend::kCpu;
    Context ctx(co);
    SpectralOptions o;
    o.metric = Metric::kEuclidean;
    o.reduction = Reduction::kTopK;
    o.top_k = k;
    const SpectralResult res = spectral_match(ctx, open_envi(dir_ / "zero.hdr"), lib, o);
    const std::size_t npix = std::size_t(samples) * lines;
    for (std::size_t p = 0; p < npix; ++p)
      for (int rank = 0; rank < k; ++rank)
        if (res.index[std::size_t(rank) * npix + p] != count - 1 - rank) return std::string("wrong ranking");
    return std::string();
  }, /*limit=*/false);  // a CPU case, not a memory one
  EXPECT_TRUE(r.exited) << "killed by signal " << r.status << (r.status == SIGXCPU ? " (SIGXCPU: over the CPU-time limit)" : "");
  EXPECT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(r.message, "");
}

TEST_F(Hostile, Item6_EnviBraceListParsesInLinearTime) {
  std::string hdr = "ENVI\nsamples = 1\nlines = 1\nbands = 1\ndata type = 4\ninterleave = bsq\ndescription = {\n";
  for (int i = 0; i < 1000000; ++i) hdr += "x\n";  // was quadratic: 2 million lines took 45 s
  hdr += "}\n";
  const fs::path p = text("long.hdr", hdr);
  // A CPU-time limit (SIGXCPU) instead of a clock: far above the linear parse, far below the quadratic one.
  const ChildResult r = in_child([&] {
    rlimit cpu{5, 6};
    ::setrlimit(RLIMIT_CPU, &cpu);
    return read_envi_header(p).samples == 1 ? std::string() : std::string("wrong header");
  }, /*limit=*/false);
  EXPECT_TRUE(r.exited) << "killed by signal " << r.status;
  EXPECT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(r.message, "");
}

}  // namespace
