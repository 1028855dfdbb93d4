// `spectrasift match` and `register` with --backend opencl (issue 18, item 3): extraction and matching on
// the device, RANSAC and the warp on the host, and the same output as --backend cpu on the demo images.
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
#include <iterator>
#include <string>

#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"

namespace fs = std::filesystem;
namespace ss = spectrasift;

namespace {

const fs::path kDemo = SPECTRASIFT_DATA_DIR;
const fs::path kTestData = SPECTRASIFT_TEST_DATA;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

TEST_F(CliOpenCL, MatchFeatureFilesEqualsCpu) {
  run("sift '" + (kDemo / "box.png").string() + "' -o " + path("q.bin"), false);
  run("sift '" + (kDemo / "box_in_scene.png").string() + "' -o " + path("t.bin"), false);
  for (const char* mutual : {"", " --mutual"}) {
    run("match " + path("q.bin") + " " + path("t.bin") + mutual + " -o " + path("cpu.json"), false);
    const std::string summary = run("match " + path("q.bin") + " " + path("t.bin") + mutual + " -o " + path("ocl.json") + " --json", true);
    EXPECT_EQ(nlohmann::json::parse(summary)["backend"], "opencl");
    const auto cpu = nlohmann::json::parse(read_all(dir_ / "cpu.json"));
    const auto ocl = nlohmann::json::parse(read_all(dir_ / "ocl.json"));
    EXPECT_GT(cpu["matches"].size(), 30u);
    EXPECT_EQ(ocl["matches"], cpu["matches"]) << mutual;
  }
}

TEST_F(CliOpenCL, MatchImagesEqualsCpu) {
  const std::string args = "match '" + (kDemo / "box.png").string() + "' '" + (kDemo / "box_in_scene.png").string() + "' --json";
  const auto cpu = nlohmann::json::parse(run(args, false));
  const auto ocl = nlohmann::json::parse(run(args, true));
  EXPECT_EQ(ocl["backend"], "opencl");
  // The process left its compiled programs in the cache folder for the next one.
  std::size_t cached = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) cached += e.path().extension() == ".clbin";
  EXPECT_GE(cached, 2u);  // sift.cl and match_l2_top2.cl
  if (cpu_device_) {
    EXPECT_EQ(ocl["query_features"], cpu["query_features"]);
    EXPECT_EQ(ocl["train_features"], cpu["train_features"]);
    EXPECT_EQ(ocl["match_list"], cpu["match_list"]);
  } else {
    EXPECT_NEAR(double(ocl["matches"]), double(cpu["matches"]), 0.03 * double(cpu["matches"]) + 2);
  }
}

TEST_F(CliOpenCL, RegisterEqualsCpu) {
  struct Pair { fs::path fixed, moving; };
  for (const Pair& pr : {Pair{kDemo / "box_in_scene.png", kDemo / "box.png"},
                         Pair{kTestData / "graf1_gray.png", kTestData / "graf3_gray.png"}}) {
    const std::string args = "register '" + pr.fixed.string() + "' '" + pr.moving.string() + "' --json -o ";
    const auto cpu = nlohmann::json::parse(run(args + path("cpu.png"), false));
    const auto ocl = nlohmann::json::parse(run(args + path("ocl.png"), true));
    EXPECT_EQ(ocl["backend"], "opencl");
    if (cpu_device_) {
      for (const char* key : {"matrix", "matches", "inliers", "rms_px", "iterations"})
        EXPECT_EQ(ocl[key], cpu[key]) << key << " " << pr.moving;
      EXPECT_EQ(read_all(dir_ / "ocl.png"), read_all(dir_ / "cpu.png")) << pr.moving;
    } else {
      // The moving image's corners mapped by both homographies agree within half a pixel.
      const double w = double(ocl["moving"]["width"]), h = double(ocl["moving"]["height"]);
      for (const auto& c : {std::pair{0.0, 0.0}, std::pair{w - 1, 0.0}, std::pair{0.0, h - 1}, std::pair{w - 1, h - 1}}) {
        auto map = [&](const nlohmann::json& m, int row) {
          const double z = double(m[2][0]) * c.first + double(m[2][1]) * c.second + double(m[2][2]);
          return (double(m[row][0]) * c.first + double(m[row][1]) * c.second + double(m[row][2])) / z;
        };
        EXPECT_NEAR(map(ocl["matrix"], 0), map(cpu["matrix"], 0), 0.5) << pr.moving;
        EXPECT_NEAR(map(ocl["matrix"], 1), map(cpu["matrix"], 1), 0.5) << pr.moving;
      }
    }
  }
}

}  // namespace
