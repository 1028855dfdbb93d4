// The OpenCL program caches (issue 18, item 2): in-process (one build per program and options per
// Context) and on disk (a new Context loads the binary instead of building; a corrupt file is rebuilt and
// replaced; SPECTRASIFT_CACHE_DIR=off disables it), and a failed build reports the compiler's log. Each
// test uses its own empty cache folder, so none depends on a warm cache.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/program_cache.hpp"
#include "backend/opencl/state.hpp"
#endif

namespace ss = spectrasift;
namespace fs = std::filesystem;

namespace {

#ifdef SPECTRASIFT_HAVE_OPENCL

// A small program (the matcher's, with a tiny shape) so that PoCL builds it in about a second.
const char* const kSource = "match_l2_top2.cl";
const std::string kOptions =
    "-DMATCH_EXACT_MAX=362.0f -DMATCH_DIM=128 -DMATCH_DK=16 -DMATCH_WX=2 -DMATCH_WY=2 -DMATCH_RX=1 -DMATCH_RY=1";

ss::opencl::State& state_of(ss::Context& c) { return dynamic_cast<ss::opencl::State&>(*c.impl().backend_impl); }

class ProgramCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ss::test::opencl_device() < 0) GTEST_SKIP() << "no OpenCL device on this machine";
    const char* old = std::getenv("SPECTRASIFT_CACHE_DIR");
    had_old_ = old != nullptr;
    if (old) old_ = old;
    dir_ = fs::temp_directory_path() /
           ("spectrasift_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ::setenv("SPECTRASIFT_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_)
      ::setenv("SPECTRASIFT_CACHE_DIR", old_.c_str(), 1);
    else
      ::unsetenv("SPECTRASIFT_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::size_t cache_files() const {
    std::size_t n = 0;
    if (fs::exists(dir_))
      for (const auto& e : fs::directory_iterator(dir_)) n += e.path().extension() == ".clbin";
    return n;
  }
  fs::path dir_;
  std::string old_;
  bool had_old_ = false;
};

TEST_F(ProgramCache, InProcessOncePerContext) {
  ss::Context c(ss::test::opencl_options());
  auto& st = state_of(c);
  const cl_program p = st.program(kSource, kOptions);
  EXPECT_EQ(st.program(kSource, kOptions), p);
  EXPECT_EQ(st.program_builds + st.program_binary_loads, 1u);
}

TEST_F(ProgramCache, SecondContextLoadsTheBinary) {
  {
    ss::Context c(ss::test::opencl_options());
    auto& st = state_of(c);
    EXPECT_EQ(st.cache_dir, dir_.string());
    st.program(kSource, kOptions);
    EXPECT_EQ(st.program_builds, 1u);
    EXPECT_EQ(st.program_binary_loads, 0u);
  }
  ASSERT_EQ(cache_files(), 1u);
  ss::Context c(ss::test::opencl_options());
  auto& st = state_of(c);
  st.program(kSource, kOptions);
  EXPECT_EQ(st.program_builds, 0u);
  EXPECT_EQ(st.program_binary_loads, 1u);
  // The loaded program runs: its kernel has a work-group limit.
  EXPECT_GE(st.limits(st.kernel(kSource, "match_l2_top2", kOptions)).work_group_size, 4u);
  // Other options are another program, another file.
  st.program(kSource, kOptions + " -DUNUSED_OPTION=1");
  EXPECT_EQ(st.program_builds, 1u);
  EXPECT_EQ(cache_files(), 2u);
}

TEST_F(ProgramCache, CorruptFilesAreRebuiltAndReplaced) {
  {
    ss::Context c(ss::test::opencl_options());
    state_of(c).program(kSource, kOptions);
  }
  ASSERT_EQ(cache_files(), 1u);
  const fs::path file = fs::directory_iterator(dir_)->path();
  const auto size = fs::file_size(file);
  for (int damage = 0; damage < 3; ++damage) {
    if (damage == 0) {  // a flipped byte in the payload
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(size - 10));
      f.put('\x5a');
    } else if (damage == 1) {  // truncated
      fs::resize_file(file, size / 2);
    } else {  // garbage
      std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a program binary";
    }
    {
      ss::Context c(ss::test::opencl_options());
      auto& st = state_of(c);
      st.program(kSource, kOptions);
      EXPECT_EQ(st.program_builds, 1u) << "damage " << damage;
      EXPECT_EQ(st.program_binary_loads, 0u) << "damage " << damage;
    }
    ss::Context c(ss::test::opencl_options());  // the rebuild replaced the file
    auto& st = state_of(c);
    st.program(kSource, kOptions);
    EXPECT_EQ(st.program_binary_loads, 1u) << "damage " << damage;
  }
}

TEST_F(ProgramCache, OffDisablesIt) {
  ::setenv("SPECTRASIFT_CACHE_DIR", "off", 1);
  EXPECT_EQ(ss::opencl::program_cache_dir(), "");
  for (int i = 0; i < 2; ++i) {
    ss::Context c(ss::test::opencl_options());
    auto& st = state_of(c);
    EXPECT_TRUE(st.cache_dir.empty());
    st.program(kSource, kOptions);
    EXPECT_EQ(st.program_builds, 1u);
    EXPECT_EQ(st.program_binary_loads, 0u);
  }
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(ProgramCache, FolderFromTheEnvironment) {
  ::unsetenv("SPECTRASIFT_CACHE_DIR");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg_test", 1);
  EXPECT_EQ(ss::opencl::program_cache_dir(), "/tmp/xdg_test/spectrasift");
  ::unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (home && *home) {
    EXPECT_EQ(ss::opencl::program_cache_dir(), std::string(home) + "/.cache/spectrasift");
  }
  if (xdg) ::setenv("XDG_CACHE_HOME", keep.c_str(), 1);
}

TEST_F(ProgramCache, FailedBuildShowsTheLog) {
  ss::Context c(ss::test::opencl_options());
  // MATCH_DK and the shape are missing: the compiler names them in its log.
  try {
    state_of(c).program(kSource, "-DMATCH_DIM=128");
    FAIL() << "the build should fail";
  } catch (const ss::Error& e) {
    const std::string m = e.what();
    const auto at = m.find("build log:");
    ASSERT_NE(at, std::string::npos) << m;
    EXPECT_NE(m.find("MATCH_", at), std::string::npos) << m;  // the compiler's own words name a missing macro
    EXPECT_NE(m.find("match_l2_top2.cl"), std::string::npos) << m;
  }
  EXPECT_EQ(cache_files(), 0u);
}

#else
TEST(ProgramCache, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace
