// The backend interface and its dispatch (src/backend/backend.hpp, src/core/dispatch.hpp): which backend
// runs an operation, the "not implemented" rule, and the device-resident Features handle, which is used
// only while it still mirrors the host descriptors. A test-only backend stands in for a GPU backend that
// keeps descriptors on its device (no GPU backend makes such copies yet).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "core/spectral_backend.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/cube.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift {
namespace {

Features random_features(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(0, 255);
  Features f;
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * Features::kDescriptorSize);
  for (auto& v : f.descriptors) v = float(value(rng));
  return f;
}

ContextOptions cpu_options() {
  ContextOptions o;
  o.backend = Backend::kCpu;
  return o;
}

MatchOptions mutual() {
  MatchOptions o;
  o.mutual = true;
  return o;
}

/// A device copy as a GPU backend would make it (here it only records what it mirrors).
class FakeDeviceFeatures final : public detail::DeviceFeatures {
 public:
  FakeDeviceFeatures(const detail::BackendImpl& owner, const Features& f)
      : DeviceFeatures(owner, f.size(), f.descriptors.data(), f.descriptors.size()) {}
};

/// A "GPU" backend that implements matching only: it records the device copies it was given and
/// computes on the host (so results can be compared with the CPU backend's).
class FakeGpuBackend final : public detail::BackendImpl {
 public:
  Backend kind() const noexcept override { return Backend::kOpenCL; }
  bool implements(detail::Operation op) const noexcept override { return op == detail::Operation::kMatch; }
  void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                  Top2* out) override {
    seen_query.push_back(query.device);
    seen_train.push_back(train.device);
    detail::host_backend().match_top2(ctx, query, train, out);
  }
  std::vector<const detail::DeviceFeatures*> seen_query, seen_train;
};

TEST(DeviceFeatures, UsedOnlyWhileTheyMirrorTheHostDescriptorsOnTheirOwnBackend) {
  FakeGpuBackend gpu, other;
  Features f = random_features(50, 1);
  EXPECT_EQ(f.device, nullptr);
  EXPECT_EQ(detail::device_copy_for(f, gpu), nullptr);
  f.device = std::make_shared<FakeDeviceFeatures>(gpu, f);
  EXPECT_EQ(f.device->count(), 50u);
  EXPECT_TRUE(f.device->owned_by(gpu));
  EXPECT_FALSE(f.device->owned_by(other));
  EXPECT_NE(gpu.instance(), other.instance());
  EXPECT_EQ(detail::device_copy_for(f, gpu), f.device.get());
  EXPECT_EQ(detail::device_copy_for(f, other), nullptr) << "a copy on another backend's device is not usable";

  const Features copy = f;  // a copy has the same content: its device copy stays valid
  EXPECT_EQ(detail::device_copy_for(copy, gpu), f.device.get());

  Features edited = f;
  edited.descriptors[1000] += 1.0f;  // one value changed in place (same buffer size and count)
  EXPECT_EQ(detail::device_copy_for(edited, gpu), nullptr);
  Features swapped = f;
  std::swap(swapped.descriptors[0], swapped.descriptors[Features::kDescriptorSize]);  // two rows' first values
  ASSERT_NE(swapped.descriptors[0], f.descriptors[0]) << "the random rows happen to agree: pick another seed";
  EXPECT_EQ(detail::device_copy_for(swapped, gpu), nullptr);
  Features shorter = f;
  shorter.keypoints.pop_back();
  shorter.descriptors.resize(shorter.descriptors.size() - Features::kDescriptorSize);
  EXPECT_EQ(detail::device_copy_for(shorter, gpu), nullptr);
  Features moved_from = f;
  const Features taken = std::move(moved_from);
  moved_from.keypoints.resize(50);  // a vector refilled with other values after a move
  moved_from.descriptors.assign(50 * Features::kDescriptorSize, 0.0f);
  EXPECT_EQ(detail::device_copy_for(moved_from, gpu), nullptr);
  EXPECT_EQ(detail::device_copy_for(taken, gpu), f.device.get());
}

TEST(DeviceFeatures, DigestSeesEveryValueAndTheLength) {
  std::vector<float> v(256, 3.0f);
  const std::uint64_t d = detail::descriptor_digest(v.data(), v.size());
  EXPECT_EQ(detail::descriptor_digest(v.data(), v.size()), d);
  for (std::size_t i : {std::size_t(0), std::size_t(127), std::size_t(255)}) {
    std::vector<float> w = v;
    w[i] = -0.0f == w[i] ? 0.0f : -w[i];
    EXPECT_NE(detail::descriptor_digest(w.data(), w.size()), d) << "value " << i;
  }
  std::vector<float> z(256, 0.0f), nz(256, 0.0f);
  nz[7] = -0.0f;  // equal as floats, different bits: a different copy
  EXPECT_NE(detail::descriptor_digest(z.data(), z.size()), detail::descriptor_digest(nz.data(), nz.size()));
  EXPECT_NE(detail::descriptor_digest(v.data(), v.size() - 1), d);
}

// The digest is a sum over rows: pieces summed apart (as the CUDA read-back does on several threads) give
// the digest of the whole; swapping two rows changes it.
TEST(DeviceFeatures, DigestIsTheSumOfItsPieces) {
  std::vector<float> v(5 * 128 + 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float((i * 37) % 256);
  const std::uint64_t d = detail::descriptor_digest(v.data(), v.size());
  for (std::size_t split : {std::size_t(0), std::size_t(128), std::size_t(384), std::size_t(640)}) {
    const std::uint64_t sum = detail::descriptor_digest_sum(v.data(), 0, split) +
                              detail::descriptor_digest_sum(v.data() + split, split, v.size() - split);
    EXPECT_EQ(detail::descriptor_digest_finish(sum, v.size()), d) << "split " << split;
  }
  std::vector<float> w = v;
  std::swap_ranges(w.begin(), w.begin() + 128, w.begin() + 128);  // rows 0 and 1 (they differ)
  ASSERT_NE(w, v);
  EXPECT_NE(detail::descriptor_digest(w.data(), w.size()), d);
}

TEST(Dispatch, MatchingGetsTheValidDeviceCopiesAndTheSameMatches) {
  const Features a = random_features(120, 2);
  Features b = random_features(90, 3);
  for (std::size_t i = 0; i < 60; ++i)  // 60 train rows near query rows: clear matches
    for (std::size_t k = 0; k < std::size_t(Features::kDescriptorSize); ++k)
      b.descriptors[i * Features::kDescriptorSize + k] = a.descriptors[(2 * i) * Features::kDescriptorSize + k] + (k == 3);
  Context cpu(cpu_options());
  const std::vector<Match> expected = match_features(cpu, a, b, mutual());
  ASSERT_GE(expected.size(), 60u);

  Context ctx(cpu_options());
  auto fake = std::make_unique<FakeGpuBackend>();
  FakeGpuBackend& gpu = *fake;
  ctx.impl().backend_impl = std::move(fake);
  Features qa = a, qb = b;
  qa.device = std::make_shared<FakeDeviceFeatures>(gpu, qa);
  qb.device = std::make_shared<FakeDeviceFeatures>(gpu, qb);
  const std::vector<Match> got = match_features(ctx, qa, qb, mutual());
  ASSERT_EQ(gpu.seen_query.size(), 2u);  // forward and backward (mutual) passes
  EXPECT_EQ(gpu.seen_query[0], qa.device.get());
  EXPECT_EQ(gpu.seen_train[0], qb.device.get());
  EXPECT_EQ(gpu.seen_query[1], qb.device.get());
  EXPECT_EQ(gpu.seen_train[1], qa.device.get());
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].query, expected[i].query);
    EXPECT_EQ(got[i].train, expected[i].train);
    EXPECT_EQ(got[i].distance, expected[i].distance);
  }

  qb.descriptors[0] = qb.descriptors[0] == 0.0f ? 1.0f : 0.0f;  // the user edits the train side
  gpu.seen_query.clear();
  gpu.seen_train.clear();
  (void)nearest_two(ctx, qa, qb);
  ASSERT_EQ(gpu.seen_query.size(), 1u);
  EXPECT_EQ(gpu.seen_query[0], qa.device.get());
  EXPECT_EQ(gpu.seen_train[0], nullptr) << "an edited Features must be matched from its host values";
}

/// A backend whose nearest-two pass number `throw_on` (1: forward, 2: backward) fails.
class FailingMatchBackend final : public detail::BackendImpl {
 public:
  explicit FailingMatchBackend(int throw_on) : throw_on_(throw_on) {}
  Backend kind() const noexcept override { return Backend::kOpenCL; }
  bool implements(detail::Operation op) const noexcept override { return op == detail::Operation::kMatch; }
  void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                  Top2* out) override {
    if (++calls_ == throw_on_) throw Error(ErrorCode::kBackend, "pass failed", "opencl");
    detail::host_backend().match_top2(ctx, query, train, out);
  }

 private:
  int throw_on_, calls_ = 0;
};

// The default match_filtered halves the operation's progress range for the mutual check's two passes; when a
// pass throws, the caller's range comes back all the same (a later stage must not report into half of it).
TEST(Dispatch, MatchFilteredRestoresTheProgressRangeWhenAPassThrows) {
  const Features a = random_features(30, 4), b = random_features(20, 5);
  const detail::FeatureView qa{a.descriptors.data(), int(a.size())}, qb{b.descriptors.data(), int(b.size())};
  for (int throw_on : {1, 2}) {
    SCOPED_TRACE(throw_on);
    Context ctx(cpu_options());
    detail::ContextImpl& im = ctx.impl();
    im.progress_lo = 0.2;
    im.progress_hi = 0.6;
    FailingMatchBackend backend(throw_on);
    std::vector<Match> out;
    EXPECT_THROW(backend.match_filtered(im, qa, qb, mutual(), out), Error);
    EXPECT_EQ(im.progress_lo, 0.2);
    EXPECT_EQ(im.progress_hi, 0.6);
  }
}

TEST(Dispatch, OperationsAGpuBackendLacksFollowTheAutoRule) {
  Context ctx(cpu_options());
  ctx.impl().backend_impl = std::make_unique<FakeGpuBackend>();
  detail::ContextImpl& im = ctx.impl();
  detail::BackendImpl& gpu = *im.backend_impl;
  EXPECT_EQ(&detail::backend_for(im, detail::Operation::kMatch), &gpu);
  // RANSAC scoring and warping of a backend that lacks them run on the CPU backend (the same bits), explicit or not.
  im.options.backend = Backend::kOpenCL;
  EXPECT_EQ(&detail::backend_for(im, detail::Operation::kRansac), &detail::host_backend());
  EXPECT_EQ(&detail::backend_for(im, detail::Operation::kWarp), &detail::host_backend());
  EXPECT_EQ(detail::host_backend().kind(), Backend::kCpu);
  // Asked for explicitly: an error naming the operation and the backend.
  for (auto op : {detail::Operation::kSift, detail::Operation::kSpectral}) {
    try {
      detail::backend_for(im, op);
      ADD_FAILURE() << "no error for " << detail::to_string(op);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find(std::string(detail::to_string(op)) +
                                           " is not implemented on the opencl backend yet (use --backend cpu or auto)"),
                std::string::npos)
          << e.what();
    }
  }
  // Picked by auto: the CPU backend.
  im.options.backend = Backend::kAuto;
  EXPECT_EQ(&detail::backend_for(im, detail::Operation::kSpectral), &detail::host_backend());
  EXPECT_EQ(&detail::backend_for(im, detail::Operation::kSift), &detail::host_backend());
  // An entry the backend does not implement is an internal error if it is ever reached.
  SpectralResult result;
  try {
    gpu.spectral_match(im, detail::CubeView{}, detail::PreparedReferences{}, SpectralOptions{}, result, {});
    ADD_FAILURE() << "the default spectral entry did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

/// A "GPU" with a small memory (1 MB, 512 KB free, at most 256 KB per buffer) that implements SIFT and spectral
/// matching: jobs must be checked against its memory, not the host's (issue 21, item 2). Its entries are never
/// reached by the jobs below, which are refused first.
class SmallDevice final : public detail::BackendImpl {
 public:
  Backend kind() const noexcept override { return Backend::kCuda; }
  bool implements(detail::Operation op) const noexcept override {
    return op == detail::Operation::kSift || op == detail::Operation::kSpectral;
  }
  detail::DeviceMemory device_memory() const override { return {1u << 20, 512u << 10, 256u << 10}; }
};

std::string error_of(const std::function<void()>& job) {
  try {
    job();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory) << e.what();
    return e.what();
  }
  return "no error";
}

TEST(DeviceMemory, JobsOnAGpuBackendAreCheckedAgainstTheDevicesMemory) {
  EXPECT_EQ(detail::host_backend().device_memory().total, 0u) << "the CPU backend works in host memory";
  Context ctx(cpu_options());
  ctx.impl().backend_impl = std::make_unique<SmallDevice>();
  ctx.impl().options.backend = Backend::kCuda;
  // SIFT of 256 x 256: about 12 MB with the upsampled octave, far below the host's budget, over the device's.
  const Image flat = Image::allocate(256, 256, 1, PixelType::kU8);
  std::string e = error_of([&] { detect_and_compute(ctx, flat); });
  EXPECT_NE(e.find("sift: image of 256 x 256 needs a single buffer of"), std::string::npos) << e;
  EXPECT_NE(e.find("allows at most 256.0 KB per buffer"), std::string::npos) << e;
  // 64 x 64 without upsampling: every buffer fits one allocation, the whole job not the device.
  SiftOptions no_up;
  no_up.upsample = false;
  const Image small = Image::allocate(64, 64, 1, PixelType::kU8);
  e = error_of([&] { detect_and_compute(ctx, small, no_up); });
  EXPECT_NE(e.find("of working memory on the device, more than the budget of 1.0 MB (the device's memory; "
                   "512.0 KB free now)"),
            std::string::npos)
      << e;
  // --max-memory replaces the budget (the largest allocation stays).
  ctx.impl().options.max_memory = 100;
  e = error_of([&] { detect_and_compute(ctx, small, no_up); });
  EXPECT_NE(e.find("more than the budget of 100 bytes;"), std::string::npos) << e;
  ctx.impl().options.max_memory = 0;

  // Spectral: 1000 references of 100 bands (two float copies, 800 KB) on a 4 x 4 cube.
  std::vector<float> cube(4 * 4 * 100, 1.0f);
  SpectralLibrary lib;
  lib.count = 1000;
  lib.bands = 100;
  lib.spectra.assign(std::size_t(lib.count) * lib.bands, 0.5f);
  CubeRef ref;
  ref.data = cube.data();
  ref.size_bytes = cube.size() * sizeof(float);
  ref.samples = ref.lines = 4;
  ref.bands = 100;
  e = error_of([&] { spectral_match(ctx, ref, lib, SpectralOptions{}); });
  EXPECT_NE(e.find("spectral: 1000 reference(s) of 100 bands and lines of 4 pixels needs a single buffer of 390.6 KB"),
            std::string::npos)
      << e;
}

TEST(Dispatch, TheCpuBackendImplementsEveryOperation) {
  Context ctx(cpu_options());
  detail::ContextImpl& im = ctx.impl();
  for (auto op : {detail::Operation::kSift, detail::Operation::kMatch, detail::Operation::kRansac,
                  detail::Operation::kWarp, detail::Operation::kSpectral}) {
    EXPECT_TRUE(im.backend_impl->implements(op)) << detail::to_string(op);
    EXPECT_EQ(&detail::backend_for(im, op), im.backend_impl.get());
  }
}

}  // namespace
}  // namespace spectrasift
