// `spectrasift match` and `register` with --backend opencl (issue 18, item 3): extraction and matching on
// the device, RANSAC and the warp on the host, and the same output as --backend cpu on the demo images
// (the whole --json output compared, less times, backend and device names and the test's own paths, so the
// test does not depend on the commands' key names).
// Feature files written by the CPU backend are matched identically on every OpenCL device; from images the
// outputs are identical on CPU devices (PoCL, where the OpenCL SIFT is bit-identical to the CPU backend)
// and close on GPUs (whose exp/sqrt differ by an ulp: tests/tolerances.hpp). The child processes share a
// program cache folder of their own (the first builds the programs, the others load them), so the test
// neither needs nor touches the user's cache. Skips when the machine has no OpenCL device.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <iterator>
#include <string>

#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"

namespace fs = std::filesystem;
namespace ss = spectrasift;

extern "C" char** environ;

namespace {

/// What the test watches of the environment: how many variables it has, the ICD loader's library list and the
/// variable PoCL's set-up added on the H200 host.
std::string environment_digest() {
  std::size_t count = 0;
  for (char** e = environ; e && *e; ++e) ++count;
  const char* icds = std::getenv("OCL_ICD_FILENAMES");
  const char* hwloc = std::getenv("HWLOC_PLUGINS_PATH");
  return std::to_string(count) + " variables, OCL_ICD_FILENAMES=" + (icds ? icds : "(unset)") +
         ", HWLOC_PLUGINS_PATH=" + (hwloc ? hwloc : "(unset)");
}

/// The environment as the test program started, before any OpenCL call (static initialisation).
const std::string kStartEnvironment = environment_digest();

const fs::path kDemo = SPECTRASIFT_DATA_DIR;
const fs::path kTestData = SPECTRASIFT_TEST_DATA;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The JSON a command printed, without what legitimately differs between backends and runs: times, the
/// backend and device names, and strings naming the test's own files (output paths). What remains (counts,
/// matches, matrices, inliers, features, options) must be equal. Key names are not assumed beyond those.
nlohmann::json comparable(nlohmann::json j, const std::string& own_dir) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      // descriptor_type: match and register extract u8 on GPU backends and f32 on the CPU's (the same values).
      if (k == "times_ms" || k == "time_ms" || k == "backend" || k == "device" || k == "threads" ||
          k == "descriptor_type")
        continue;
      out[k] = comparable(it.value(), own_dir);
    }
    return out;
  }
  if (j.is_array()) {
    for (auto& e : j) e = comparable(e, own_dir);
    return j;
  }
  if (j.is_string() && j.get<std::string>().find(own_dir) != std::string::npos) return "";
  return j;
}

/// The value of the first key `name` found anywhere in j (depth first), or null.
nlohmann::json find_key(const nlohmann::json& j, const std::string& name) {
  if (j.is_object()) {
    if (j.contains(name)) return j[name];
    for (const auto& e : j)
      if (auto f = find_key(e, name); !f.is_null()) return f;
  } else if (j.is_array()) {
    for (const auto& e : j)
      if (auto f = find_key(e, name); !f.is_null()) return f;
  }
  return nullptr;
}

/// The number of matches a command reported: "match_count", else "matches" as a number.
double match_count(const nlohmann::json& j) {
  const auto c = find_key(j, "match_count");
  if (c.is_number()) return double(c);
  const auto m = find_key(j, "matches");
  return m.is_number() ? double(m) : m.is_array() ? double(m.size()) : -1.0;
}

class CliOpenCL : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = ss::test::opencl_device();
    if (device_ < 0) GTEST_SKIP() << "no OpenCL device on this machine";
    for (const auto& d : ss::list_devices())
      if (d.backend == ss::Backend::kOpenCL && d.index == device_) cpu_device_ = d.type == "cpu";
    dir_ = fs::temp_directory_path() / ("spectrasift_cli_opencl_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// `spectrasift <args> --backend B` (plus --device for opencl); returns stdout, expects exit status 0.
  std::string run(const std::string& args, bool opencl) const {
    const std::string backend = opencl ? " --backend opencl --device " + std::to_string(device_) : " --backend cpu";
    const std::string cmd = "SPECTRASIFT_CACHE_DIR='" + (dir_ / "cache").string() + "' '" + SPECTRASIFT_CLI + "' " +
                            args + backend + " >'" + (dir_ / "out").string() + "' 2>'" + (dir_ / "err").string() + "'";
    const int raw = std::system(cmd.c_str());
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
    EXPECT_EQ(status, 0) << cmd << "\n" << read_all(dir_ / "err");
    return read_all(dir_ / "out");
  }
  /// A file of the test's folder, quoted for the shell.
  std::string path(const std::string& name) const {
    std::string q(1, '\'');
    q.append((dir_ / name).string());
    q.push_back('\'');
    return q;
  }

  int device_ = -1;
  bool cpu_device_ = false;
  fs::path dir_;
};

// Listing devices and opening a context leave the environment as it was, so that the CLI processes the tests
// start see every OpenCL device (on the H200 host, PoCL's set-up cut NVIDIA's library out of OCL_ICD_FILENAMES
// and every child saw one device: backend/opencl/context.cpp, with_environment_kept).
TEST_F(CliOpenCL, DevicesAndContextsLeaveTheEnvironmentAsItWas) {
  ss::Context ctx(ss::test::opencl_options());
  EXPECT_EQ(environment_digest(), kStartEnvironment);
}

TEST_F(CliOpenCL, MatchFeatureFilesEqualsCpu) {
  run("sift '" + (kDemo / "box.png").string() + "' -o " + path("q.bin"), false);
  run("sift '" + (kDemo / "box_in_scene.png").string() + "' -o " + path("t.bin"), false);
  // u8 files (binary version 2) are matched on the device from their bytes: the f32 files' matches.
  run("sift '" + (kDemo / "box.png").string() + "' --descriptor-type u8 -o " + path("qu.bin"), false);
  run("sift '" + (kDemo / "box_in_scene.png").string() + "' --descriptor-type u8 -o " + path("tu.bin"), false);
  for (const char* mutual : {"", " --mutual"}) {
    run("match " + path("q.bin") + " " + path("t.bin") + mutual + " -o " + path("cpu.json"), false);
    const std::string summary = run("match " + path("q.bin") + " " + path("t.bin") + mutual + " -o " + path("ocl.json") + " --json", true);
    EXPECT_EQ(find_key(nlohmann::json::parse(summary), "backend"), "opencl");
    const auto cpu = nlohmann::json::parse(read_all(dir_ / "cpu.json"));
    const auto ocl = nlohmann::json::parse(read_all(dir_ / "ocl.json"));
    EXPECT_GT(cpu["matches"].size(), 30u);
    EXPECT_EQ(ocl["matches"], cpu["matches"]) << mutual;
    run("match " + path("qu.bin") + " " + path("tu.bin") + mutual + " -o " + path("ocl_u8.json"), true);
    EXPECT_EQ(nlohmann::json::parse(read_all(dir_ / "ocl_u8.json"))["matches"], cpu["matches"]) << mutual;
  }
}

TEST_F(CliOpenCL, MatchImagesEqualsCpu) {
  const std::string args = "match '" + (kDemo / "box.png").string() + "' '" + (kDemo / "box_in_scene.png").string() + "' --json";
  const auto cpu = nlohmann::json::parse(run(args, false));
  const auto ocl = nlohmann::json::parse(run(args, true));
  EXPECT_EQ(find_key(ocl, "backend"), "opencl");
  // The process left its compiled programs in the cache folder for the next one.
  std::size_t cached = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) cached += e.path().extension() == ".clbin";
  EXPECT_GE(cached, 2u);  // sift.cl and match_l2_top2.cl
  EXPECT_GT(match_count(cpu), 30.0);
  if (cpu_device_) {
    EXPECT_EQ(comparable(ocl, dir_.string()), comparable(cpu, dir_.string()));
  } else {
    EXPECT_NEAR(match_count(ocl), match_count(cpu), 0.03 * match_count(cpu) + 2);
  }
}

TEST_F(CliOpenCL, RegisterEqualsCpu) {
  struct Pair { fs::path a, b; };
  for (const Pair& pr : {Pair{kDemo / "box_in_scene.png", kDemo / "box.png"},
                         Pair{kTestData / "graf1_gray.png", kTestData / "graf3_gray.png"}}) {
    const std::string args = "register '" + pr.a.string() + "' '" + pr.b.string() + "' --json -o ";
    const auto cpu = nlohmann::json::parse(run(args + path("cpu.png"), false));
    const auto ocl = nlohmann::json::parse(run(args + path("ocl.png"), true));
    EXPECT_EQ(find_key(ocl, "backend"), "opencl");
    EXPECT_EQ(find_key(ocl, "descriptor_type"), "u8");  // the default of a GPU backend's context
    EXPECT_EQ(find_key(cpu, "descriptor_type"), "f32");
    ASSERT_TRUE(find_key(cpu, "matrix").is_array()) << cpu.dump();
    if (cpu_device_) {
      EXPECT_EQ(comparable(ocl, dir_.string()), comparable(cpu, dir_.string())) << pr.b;
      EXPECT_EQ(read_all(dir_ / "ocl.png"), read_all(dir_ / "cpu.png")) << pr.b;
    } else {
      // The corners of the image the homography maps from, mapped by both, agree within half a pixel.
      const nlohmann::json hc = find_key(cpu, "matrix"), ho = find_key(ocl, "matrix");
      const double w = 800, h = 640;  // a bound of both pairs' sizes is enough for the check
      for (const auto& c : {std::pair{0.0, 0.0}, std::pair{w - 1, 0.0}, std::pair{0.0, h - 1}, std::pair{w - 1, h - 1}}) {
        auto map = [&](const nlohmann::json& m, int row) {
          const double z = double(m[2][0]) * c.first + double(m[2][1]) * c.second + double(m[2][2]);
          return (double(m[row][0]) * c.first + double(m[row][1]) * c.second + double(m[row][2])) / z;
        };
        EXPECT_NEAR(map(ho, 0), map(hc, 0), 0.5) << pr.b;
        EXPECT_NEAR(map(ho, 1), map(hc, 1), 0.5) << pr.b;
      }
    }
  }
}

}  // namespace
