// Matcher: agreement with a float64 brute-force reference, ratio / distance / mutual tests, ties,
// thread independence, argument checks, and the matches picture.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/cpu_features.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/match.hpp"

using namespace spectrasift;

namespace {

constexpr int kDim = Features::kDescriptorSize;

Context cpu_context(int threads = 2) {
  ContextOptions o;
  o.backend = Backend::kCpu;
  o.threads = threads;
  return Context(o);
}

/// n random descriptors; integer-valued 0..255 (as SIFT's) when `integer`, else uniform in [0, 1).
Features random_features(int n, std::uint64_t seed, bool integer) {
  std::mt19937_64 g(seed);
  Features f;
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * kDim);
  for (auto& v : f.descriptors) v = integer ? float(g() % 256) : float(double(g() >> 11) * 0x1.0p-53);
  for (int i = 0; i < n; ++i) f.keypoints[std::size_t(i)] = Keypoint{float(i % 50), float(i / 50), 2, 0, 1, 0, 1, 0};
  return f;
}

struct Ref {
  int i1 = -1, i2 = -1;
  double d1 = std::numeric_limits<double>::infinity(), d2 = std::numeric_limits<double>::infinity();
};

/// Slow float64 reference: the two nearest by exact distance, lower index first on ties.
std::vector<Ref> reference(const Features& q, const Features& t) {
  std::vector<Ref> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    Ref& r = out[i];
    for (std::size_t j = 0; j < t.size(); ++j) {
      double s = 0;
      for (int k = 0; k < kDim; ++k) {
        const double d = double(q.descriptor(i)[k]) - double(t.descriptor(j)[k]);
        s += d * d;
      }
      const double d = std::sqrt(s);
      if (d < r.d1) {
        r.i2 = r.i1, r.d2 = r.d1, r.i1 = int(j), r.d1 = d;
      } else if (d < r.d2) {
        r.i2 = int(j), r.d2 = d;
      }
    }
  }
  return out;
}

}  // namespace

TEST(Matcher, IntegerDescriptorsEqualFloat64Reference) {
  // Integer descriptors: every squared distance is an integer < 2^24, exact in float, so the two
  // nearest must be identical to the float64 reference, ties included.
  const Features q = random_features(300, 1, true), t = random_features(517, 2, true);  // 517: partial block
  auto ctx = cpu_context();
  const auto got = nearest_two(ctx, q, t);
  const auto ref = reference(q, t);
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].best1, ref[i].i1) << i;
    ASSERT_EQ(got[i].best2, ref[i].i2) << i;
    EXPECT_FLOAT_EQ(got[i].distance1, float(ref[i].d1));
    EXPECT_FLOAT_EQ(got[i].distance2, float(ref[i].d2));
  }
  // Ratio-test decisions equal the reference's (with 0.95: random descriptors are all ambiguous at 0.8).
  MatchOptions o;
  o.ratio = 0.95;
  const auto m = match_features(ctx, q, t, o);
  std::size_t k = 0;
  int kept = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const bool keep = ref[i].d1 < 0.95 * ref[i].d2;
    if (keep) {
      ASSERT_LT(k, m.size());
      EXPECT_EQ(m[k].query, int(i));
      EXPECT_EQ(m[k].train, ref[i].i1);
      ++k;
      ++kept;
    }
  }
  EXPECT_EQ(k, m.size());
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 300);
}

TEST(Matcher, RealDescriptorsAgreeWithReference) {
  const Features q = random_features(200, 3, false), t = random_features(333, 4, false);
  auto ctx = cpu_context();
  const auto got = nearest_two(ctx, q, t);
  const auto ref = reference(q, t);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].distance1, ref[i].d1, 1e-5 * ref[i].d1);
    // The index must agree unless the float64 gap is below float rounding.
    if (ref[i].d2 - ref[i].d1 > 1e-5 * ref[i].d1) {
      EXPECT_EQ(got[i].best1, ref[i].i1) << i;
    }
  }
}

TEST(Matcher, PlantedCorrespondencesPassTheRatioTest) {
  // Train = query permuted plus small noise: every query's nearest is its own copy.
  const Features base = random_features(150, 5, true);
  Features train = base;
  std::mt19937_64 g(6);
  std::vector<int> perm(150);
  for (int i = 0; i < 150; ++i) perm[std::size_t(i)] = (i * 37 + 11) % 150;
  for (int i = 0; i < 150; ++i)
    for (int k = 0; k < kDim; ++k)
      train.descriptors[std::size_t(perm[std::size_t(i)]) * kDim + k] =
          base.descriptors[std::size_t(i) * kDim + k] + float(int(g() % 5) - 2);
  auto ctx = cpu_context();
  const auto m = match_features(ctx, base, train);
  ASSERT_EQ(m.size(), 150u);
  for (const auto& x : m) {
    EXPECT_EQ(x.train, perm[std::size_t(x.query)]);
    EXPECT_LT(x.distance, 0.8f * x.second_distance);
  }
}

TEST(Matcher, TiesPickLowerIndexAndFailTheRatioTest) {
  Features t = random_features(40, 7, true);
  // Train 9 and 25 are identical; the query equals them.
  for (int k = 0; k < kDim; ++k) t.descriptors[25 * kDim + k] = t.descriptors[9 * kDim + k];
  Features q;
  q.keypoints.resize(1);
  q.descriptors.assign(t.descriptor(9), t.descriptor(9) + kDim);
  auto ctx = cpu_context();
  const auto n2 = nearest_two(ctx, q, t);
  EXPECT_EQ(n2[0].best1, 9);
  EXPECT_EQ(n2[0].best2, 25);
  EXPECT_EQ(n2[0].distance1, 0.0f);
  EXPECT_EQ(n2[0].distance2, 0.0f);
  MatchOptions o;
  o.ratio = 1.0;
  EXPECT_TRUE(match_features(ctx, q, t, o).empty());  // 0 < 1.0 * 0 is false
}

TEST(Matcher, MutualCheckKeepsOnlyTwoWayBest) {
  // Two queries whose nearest train is 0; query 1 is closer to it.
  Features t;
  t.keypoints.resize(2);
  t.descriptors.assign(2 * kDim, 0.0f);
  for (int k = 0; k < kDim; ++k) t.descriptors[kDim + k] = 100.0f;  // train 1 far away
  Features q;
  q.keypoints.resize(2);
  q.descriptors.assign(2 * kDim, 0.0f);
  q.descriptors[0] = 10.0f;  // query 0 at distance 10 from train 0
  q.descriptors[kDim] = 3.0f;  // query 1 at distance 3
  auto ctx = cpu_context();
  const auto plain = match_features(ctx, q, t);
  ASSERT_EQ(plain.size(), 2u);
  MatchOptions o;
  o.mutual = true;
  const auto mutual = match_features(ctx, q, t, o);
  ASSERT_EQ(mutual.size(), 1u);
  EXPECT_EQ(mutual[0].query, 1);
  EXPECT_EQ(mutual[0].train, 0);
  // On random data: the mutual set is exactly the plain matches whose reverse best agrees.
  const Features a = random_features(120, 8, true), b = random_features(90, 9, true);
  MatchOptions loose;
  loose.ratio = 1.0;
  const auto all = match_features(ctx, a, b, loose);
  loose.mutual = true;
  const auto two_way = match_features(ctx, a, b, loose);
  const auto rev = reference(b, a);
  std::vector<Match> expect;
  for (const auto& x : all)
    if (rev[std::size_t(x.train)].i1 == x.query) expect.push_back(x);
  ASSERT_EQ(two_way.size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(two_way[i].query, expect[i].query);
    EXPECT_EQ(two_way[i].train, expect[i].train);
  }
  EXPECT_GT(expect.size(), 0u);
  EXPECT_LT(expect.size(), all.size());
}

TEST(Matcher, MaxDistanceDropsFarMatches) {
  const Features q = random_features(100, 10, true), t = random_features(100, 11, true);
  auto ctx = cpu_context();
  MatchOptions o;
  o.ratio = 1.0;
  const auto all = match_features(ctx, q, t, o);
  std::vector<float> d;
  for (const auto& x : all) d.push_back(x.distance);
  std::sort(d.begin(), d.end());
  o.max_distance = d[d.size() / 2];
  const auto some = match_features(ctx, q, t, o);
  std::size_t expect = 0;
  for (float v : d) expect += double(v) <= o.max_distance;
  EXPECT_EQ(some.size(), expect);
  for (const auto& x : some) EXPECT_LE(x.distance, o.max_distance);
}

TEST(Matcher, SameResultForAnyThreadCount) {
  const Features q = random_features(257, 12, false), t = random_features(1000, 13, false);
  auto c1 = cpu_context(1);
  auto c2 = cpu_context(2);
  auto c3 = cpu_context(3);
  const auto a = nearest_two(c1, q, t), b = nearest_two(c2, q, t), c = nearest_two(c3, q, t);
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].best1, b[i].best1);
    ASSERT_EQ(a[i].best2, c[i].best2);
    ASSERT_EQ(a[i].distance1, c[i].distance1);  // bit for bit
    ASSERT_EQ(a[i].distance2, b[i].distance2);
  }
}

TEST(Matcher, EverySimdBuildGivesIdenticalResults) {
  // The CPU kernel exists as AVX-512, AVX2 and SSE2 builds; the test hook set_cpu_isa_cap caps the choice
  // (a build the CPU lacks is never picked).
  const Features q = random_features(61, 17, false), t = random_features(203, 18, false);
  auto ctx = cpu_context();
  std::vector<std::vector<Top2>> results;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    set_cpu_isa_cap(isa);
    results.push_back(nearest_two(ctx, q, t));
  }
  set_cpu_isa_cap(CpuIsa::kAvx512);
  for (std::size_t k = 1; k < results.size(); ++k)
    for (std::size_t i = 0; i < q.size(); ++i) {
      ASSERT_EQ(results[k][i].best1, results[0][i].best1);
      ASSERT_EQ(results[k][i].best2, results[0][i].best2);
      ASSERT_EQ(results[k][i].distance1, results[0][i].distance1);  // bit for bit
      ASSERT_EQ(results[k][i].distance2, results[0][i].distance2);
    }
}

TEST(Matcher, EmptyAndSingleTrain) {
  auto ctx = cpu_context();
  const Features none, q = random_features(5, 14, true), one = random_features(1, 15, true);
  EXPECT_TRUE(match_features(ctx, none, q).empty());
  EXPECT_TRUE(match_features(ctx, q, none).empty());
  const auto m = match_features(ctx, q, one);  // no second neighbour: the ratio test passes
  ASSERT_EQ(m.size(), 5u);
  for (const auto& x : m) {
    EXPECT_EQ(x.train, 0);
    EXPECT_TRUE(std::isinf(x.second_distance));
  }
  EXPECT_EQ(nearest_two(ctx, q, none)[0].best1, -1);
}

TEST(Matcher, RejectsBadArguments) {
  auto ctx = cpu_context();
  Features q = random_features(5, 16, true);
  MatchOptions o;
  o.ratio = 0;
  EXPECT_THROW(match_features(ctx, q, q, o), Error);
  o.ratio = 1.5;
  EXPECT_THROW(match_features(ctx, q, q, o), Error);
  o = {};
  o.max_distance = -1;
  EXPECT_THROW(match_features(ctx, q, q, o), Error);
  o.max_distance = std::nan("");
  EXPECT_THROW(match_features(ctx, q, q, o), Error);
  q.descriptors.pop_back();
  try {
    match_features(ctx, q, q);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("descriptor"), std::string::npos);
  }
  // u8 features: the bytes must be there, the float array empty, the type known.
  const Features good = random_features(5, 16, true).to_u8();
  EXPECT_NO_THROW(match_features(ctx, good, good));
  Features u = good;
  u.descriptor_bytes.pop_back();
  EXPECT_THROW(match_features(ctx, u, good), Error);
  u = good;
  u.descriptors.assign(5 * 128, 1.0f);
  EXPECT_THROW(match_features(ctx, good, u), Error);
  u = good;
  u.descriptor_type = DescriptorType(3);
  EXPECT_THROW(match_features(ctx, u, good), Error);
  u = good;
  u.descriptor_type = DescriptorType::kF32;  // says floats, holds bytes
  EXPECT_THROW(nearest_two(ctx, u, good), Error);
}

TEST(DrawMatches, SideBySideWithColouredLines) {
  Image a = Image::allocate(50, 40, 1, PixelType::kU8), b = Image::allocate(60, 30, 3, PixelType::kU16);
  Features fa, fb;
  fa.keypoints = {Keypoint{10, 10, 2, 0, 1, 0, 1, 0}, Keypoint{20, 30, 2, 0, 1, 0, 1, 0}};
  fb.keypoints = {Keypoint{5, 5, 2, 0, 1, 0, 1, 0}, Keypoint{40, 20, 2, 0, 1, 0, 1, 0}};
  const std::vector<Match> m{{0, 0, 1, 2}, {1, 1, 1, 2}};
  const std::vector<std::uint8_t> mask{1, 0};
  const Image pic = draw_matches(a, fa, b, fb, m, &mask, DrawMatchesOptions{0, false});
  ASSERT_EQ(pic.width, 110);
  ASSERT_EQ(pic.height, 40);
  ASSERT_EQ(pic.channels, 3);
  auto px = [&](int x, int y) { return pic.data.data() + (std::size_t(y) * pic.width + x) * 3; };
  // Line ends sit on the keypoints: the inlier's in yellow (255, 225, 0), the outlier's in magenta (255, 40, 220).
  EXPECT_GT(px(10, 10)[0], 200);
  EXPECT_GT(px(10, 10)[1], 200);
  EXPECT_LT(px(10, 10)[2], 50);
  EXPECT_GT(px(50 + 5, 5)[1], 200);
  EXPECT_GT(px(20, 30)[0], 200);
  EXPECT_LT(px(20, 30)[1], 80);
  EXPECT_GT(px(20, 30)[2], 200);
  EXPECT_GT(px(50 + 40, 20)[2], 200);
  // Away from the drawing, the (black) images show through.
  EXPECT_EQ(px(45, 2)[0], 0);
  // With the legend: a strip below the images, the images unchanged above it.
  const Image with_legend = draw_matches(a, fa, b, fb, m, &mask);
  EXPECT_GT(with_legend.height, 40);
  EXPECT_TRUE(std::equal(pic.data.begin(), pic.data.end(), with_legend.data.begin()));
  const std::vector<std::uint8_t> bad{1};
  EXPECT_THROW(draw_matches(a, fa, b, fb, m, &bad), Error);
}

TEST(DrawMatches, AtMostMaxMatchesSpreadOverTheImageBestFirst) {
  // 2000 matches on a 100 x 100 query image, keypoint i at (i % 100, (i / 20) % 100), distance i; every
  // fifth an outlier.
  Features q;
  std::vector<Match> m;
  std::vector<std::uint8_t> mask;
  for (int i = 0; i < 2000; ++i) {
    q.keypoints.push_back(Keypoint{float(i % 100), float((i / 20) % 100), 2, 0, 1, 0, 1, 0});
    m.push_back(Match{i, 0, float(i), 0});
    mask.push_back(i % 5 != 0);
  }
  const auto all = select_matches_to_draw(q, 100, 100, m, &mask, 0);
  EXPECT_EQ(all.size(), 2000u);
  const auto few = select_matches_to_draw(q, 100, 100, m, &mask, 128);
  ASSERT_EQ(few.size(), 128u);
  EXPECT_TRUE(std::is_sorted(few.begin(), few.end()));
  std::size_t outliers = 0;
  std::set<int> cells;
  for (std::size_t i : few) {
    outliers += mask[i] == 0;
    cells.insert(int(q.keypoints[i].y * 8 / 100) * 8 + int(q.keypoints[i].x * 8 / 100));
  }
  EXPECT_EQ(outliers, 26u);        // 400 of 2000 outliers: a fifth of 128, rounded
  EXPECT_EQ(cells.size(), 64u);    // every cell of the 8 x 8 grid has some
  // Best first: each cell's first pick is its smallest distance.
  EXPECT_EQ(few.front(), 0u);
  // Fewer matches than the budget: all of them.
  EXPECT_EQ(select_matches_to_draw(q, 100, 100, std::vector<Match>(m.begin(), m.begin() + 10), nullptr, 128).size(), 10u);
  // Few outliers keep a tenth of the budget.
  std::vector<std::uint8_t> rare(2000, 1);
  for (int i = 0; i < 30; ++i) rare[std::size_t(i) * 7] = 0;
  std::size_t rare_drawn = 0;
  for (std::size_t i : select_matches_to_draw(q, 100, 100, m, &rare, 100)) rare_drawn += rare[i] == 0;
  EXPECT_EQ(rare_drawn, 10u);
}
