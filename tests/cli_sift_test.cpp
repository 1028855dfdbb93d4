// `spectrasift sift` end to end: runs the built CLI (SPECTRASIFT_CLI) and checks exit codes, messages,
// output files (and that failures leave none behind).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

const fs::path kData = SPECTRASIFT_TEST_DATA;

using test::CliRun;
using test::quote;
using test::slurp;

class CliSift : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("spectrasift_cli_sift_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Runs `spectrasift <args>` with stdout and stderr captured in files.
  CliRun run(const std::string& args) const { return test::run_captured(quote(SPECTRASIFT_CLI), args, dir_); }

  /// Skips the test when the SIFT implementation is not there yet (a run reported "not implemented").
  void skip_if_no_sift(const CliRun& r) {
    if (r.status != 0 && r.err.find("not implemented") != std::string::npos)
      GTEST_SKIP() << "detect_and_compute is not implemented in this build: " << r.err;
  }

  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }

  fs::path p(const std::string& name) const { return dir_ / name; }
  fs::path dir_;
};

std::size_t line_count(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_F(CliSift, HelpAndVersion) {
  CliRun h = run("sift --help");
  EXPECT_EQ(h.status, 0);
  for (const char* opt : {"IMAGE", "--output", "--format", "--mask", "--max-features", "--octave-layers", "--sigma",
                          "--contrast-threshold", "--edge-threshold", "--no-upsample", "--root-sift",
                          "--descriptor-type", "--draw", "--json",
                          "--backend", "--device", "--threads"})
    EXPECT_NE(h.out.find(opt), std::string::npos) << opt;
  CliRun v = run("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("spectrasift ", 0), 0u) << v.out;
}

TEST_F(CliSift, MissingFileFailsWithOneLineAndNoOutput) {
  CliRun r = run("sift " + quote(p("absent.png").string()) + " -o " + quote(p("out.key").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("absent.png"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 1u) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(entries(), 0u);
}

TEST_F(CliSift, UnreadableImagesFailWithoutOutput) {
  {
    std::ofstream(p("notes.png")) << "this is not an image\n";
    CliRun r = run("sift " + quote(p("notes.png").string()) + " -o " + quote(p("out.json").string()));
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("notes.png: unknown image format"), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1u) << r.err;
  }
  {
    const std::string full = slurp(kData / "box.png");
    std::ofstream(p("half.png"), std::ios::binary) << full.substr(0, full.size() / 2);
    CliRun r = run("sift " + quote(p("half.png").string()) + " -o " + quote(p("out.key").string()) + " --draw " +
                quote(p("kp.png").string()));
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("half.png"), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1u) << r.err;
  }
  EXPECT_FALSE(fs::exists(p("out.json")));
  EXPECT_FALSE(fs::exists(p("out.key")));
  EXPECT_FALSE(fs::exists(p("kp.png")));
  EXPECT_EQ(entries(), 2u);  // only the two inputs
}

TEST_F(CliSift, BadOptionsAreRejectedBeforeAnyWork) {
  const std::string img = quote((kData / "box.png").string());
  const std::string out = " -o " + quote(p("o.key").string());
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"--format xml" + out, "xml"},
      {"--octave-layers 0" + out, "octave_layers"},
      {"--sigma -1" + out, "sigma"},
      {"--contrast-threshold -0.5" + out, "contrast_threshold"},
      {"--max-features -3" + out, "max_features"},
      {"--backend quantum" + out, "quantum"},
      {"--draw " + quote(p("pic.jpg").string()), "pic.jpg"},
      {"--mask " + quote(p("nomask.png").string()), "nomask.png"},
      {"--format key", "-o"},
      {"--descriptor-type f16" + out, "f16"},
      {"--descriptor-type u8 --root-sift" + out, "--root-sift needs --descriptor-type f32"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    CliRun r = run("sift " + img + " " + c.args);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1u) << r.err;
  }
  EXPECT_EQ(entries(), 0u);
}

TEST_F(CliSift, SummaryLineAndJson) {
  const std::string img = (kData / "box.png").string();
  CliRun s = run("sift " + quote(img));
  skip_if_no_sift(s);
  ASSERT_EQ(s.status, 0) << s.err;
  // "IMAGE: WxH, N keypoints, T ms"
  EXPECT_EQ(s.out.rfind(img + ": 324x223, ", 0), 0u) << s.out;
  EXPECT_NE(s.out.find(" keypoints, "), std::string::npos);
  EXPECT_NE(s.out.find(" ms\n"), std::string::npos);
  EXPECT_EQ(line_count(s.out), 1u);

  CliRun j = run("sift " + quote(img) + " --json --backend cpu");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("command"), "sift");
  EXPECT_EQ(doc.at("image").at("path"), img);
  EXPECT_EQ(doc.at("image").at("width"), 324);
  EXPECT_EQ(doc.at("image").at("height"), 223);
  EXPECT_EQ(doc.at("backend"), "cpu");
  EXPECT_TRUE(doc.at("device").is_string());
  for (const char* stage : {"read", "sift", "write", "total"}) EXPECT_GE(doc.at("times_ms").at(stage).get<double>(), 0.0);
  EXPECT_GT(doc.at("image").at("features").get<int>(), 100);  // box.png has several hundred SIFT keypoints
  // The summary line and the JSON agree on the count.
  EXPECT_NE(s.out.find(", " + std::to_string(doc.at("image").at("features").get<int>()) + " keypoints"), std::string::npos);
}

TEST_F(CliSift, WritesReadableFeatureFilesInEveryFormat) {
  const std::string img = quote((kData / "box.png").string());
  CliRun first = run("sift " + img + " -o " + quote(p("f.bin").string()) + " --json");
  skip_if_no_sift(first);
  ASSERT_EQ(first.status, 0) << first.err;
  const std::size_t n = nlohmann::json::parse(first.out).at("image").at("features").get<std::size_t>();
  const Features bin = read_features(p("f.bin"));
  ASSERT_EQ(bin.size(), n);
  EXPECT_EQ(bin.image_width, 324);
  EXPECT_EQ(bin.image_height, 223);
  for (const auto& k : bin.keypoints) {
    EXPECT_GE(k.x, -0.5f);
    EXPECT_LE(k.x, 323.5f);
    EXPECT_GE(k.y, -0.5f);
    EXPECT_LE(k.y, 222.5f);
    EXPECT_GT(k.size, 0.0f);
  }
  // The same features through the other formats; --format overrides the extension.
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("f.key").string())).status, 0);
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("f.txt").string()) + " --format json").status, 0);
  const Features key = read_features(p("f.key"));
  const Features json = read_features_json(p("f.txt"));
  ASSERT_EQ(key.size(), n);
  ASSERT_EQ(json.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(json.keypoints[i].x, bin.keypoints[i].x);
    EXPECT_EQ(key.keypoints[i].x, bin.keypoints[i].x);
    EXPECT_EQ(key.keypoints[i].y, bin.keypoints[i].y);
  }
  EXPECT_TRUE(json.descriptors == bin.descriptors);
  EXPECT_TRUE(key.descriptors == bin.descriptors);  // default descriptors are integers 0..255
  // Deterministic: a second run gives the same bytes.
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("g.bin").string()) + " --threads 1").status, 0);
  EXPECT_TRUE(slurp(p("f.bin")) == slurp(p("g.bin")));
  // No temporaries left.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(CliSift, OptionsChangeTheResult) {
  const std::string img = quote((kData / "box.png").string());
  CliRun all = run("sift " + img + " --json");
  skip_if_no_sift(all);
  ASSERT_EQ(all.status, 0) << all.err;
  const int n_all = nlohmann::json::parse(all.out).at("image").at("features").get<int>();
  CliRun capped = run("sift " + img + " --json --max-features 50");
  ASSERT_EQ(capped.status, 0) << capped.err;
  const int n_capped = nlohmann::json::parse(capped.out).at("image").at("features").get<int>();
  EXPECT_GE(n_capped, 50);
  EXPECT_LT(n_capped, n_all);
  CliRun strict = run("sift " + img + " --json --contrast-threshold 0.1");
  ASSERT_EQ(strict.status, 0);
  EXPECT_LT(nlohmann::json::parse(strict.out).at("image").at("features").get<int>(), n_all);

  // A mask that is zero on the left half: every keypoint lies in the right half.
  Image mask = Image::allocate(324, 223, 1, PixelType::kU8);
  for (int y = 0; y < 223; ++y)
    for (int x = 162; x < 324; ++x) mask.data[std::size_t(y) * 324 + std::size_t(x)] = 255;
  write_png(p("mask.png"), mask);
  CliRun masked = run("sift " + img + " --mask " + quote(p("mask.png").string()) + " -o " + quote(p("m.bin").string()));
  ASSERT_EQ(masked.status, 0) << masked.err;
  const Features m = read_features(p("m.bin"));
  EXPECT_GT(m.size(), 0u);
  EXPECT_LT(m.size(), std::size_t(n_all));
  for (const auto& k : m.keypoints) EXPECT_GE(k.x, 161.5f);
  // A mask of the wrong size is an error.
  write_png(p("small.png"), Image::allocate(10, 10, 1, PixelType::kU8));
  CliRun bad = run("sift " + img + " --mask " + quote(p("small.png").string()));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("small.png"), std::string::npos) << bad.err;
}

TEST_F(CliSift, DrawsKeypoints) {
  const std::string img = quote((kData / "box.png").string());
  CliRun r = run("sift " + img + " --draw " + quote(p("kp.png").string()));
  skip_if_no_sift(r);
  ASSERT_EQ(r.status, 0) << r.err;
  const Image pic = read_image(p("kp.png"));
  EXPECT_EQ(pic.width, 324);
  EXPECT_EQ(pic.height, 223);
  EXPECT_EQ(pic.channels, 3);
  // The input is grey: coloured pixels can only come from the drawing.
  std::size_t coloured = 0;
  for (std::size_t i = 0; i < pic.pixel_count(); ++i) {
    const std::uint8_t* q = pic.data.data() + i * 3;
    coloured += !(q[0] == q[1] && q[1] == q[2]);
  }
  EXPECT_GT(coloured, 1000u);
}

// A folder of images (issue 19, item 1): its images in name order through the batch call, other files skipped,
// one JSON line per image (with its place in its batch call) and one error line, naming the file, for an image
// that cannot be read; the others go on and the exit code is the bad file's. Each image's outputs are those of
// the single-image command (the same bytes), named after it in the output folder; the bad one leaves none.
TEST_F(CliSift, FolderRunsInBatchesAndReportsABadFile) {
  const fs::path in = p("in");
  fs::create_directories(in);
  fs::copy_file(kData / "box.png", in / "box.png");
  fs::copy_file(kData / "graf1_gray.png", in / "graf1_gray.png");
  fs::copy_file(kData / "graf3_gray.png", in / "graf3_gray.png");
  fs::copy_file(kData / "box.png", in / "z_box.png");
  { std::ofstream(in / "c_bad.png") << "not a png"; }
  { std::ofstream(in / "notes.txt") << "skipped"; }
  CliRun r = run("sift " + quote(in.string()) + " -o " + quote(p("out").string()) + " --json --backend cpu");
  skip_if_no_sift(r);
  EXPECT_EQ(r.status, 1) << r.err;  // the bad file's error (bad format); the others done
  EXPECT_NE(r.err.find("c_bad.png"), std::string::npos) << r.err;
  std::vector<nlohmann::json> lines;
  std::istringstream ss(r.out);
  for (std::string line; std::getline(ss, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 5u) << r.out;
  const std::vector<std::string> names{"box.png", "c_bad.png", "graf1_gray.png", "graf3_gray.png", "z_box.png"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const nlohmann::json& j = lines[i];
    if (names[i] == "c_bad.png") {
      EXPECT_TRUE(j.contains("error")) << j;
      EXPECT_EQ(j.at("image"), (in / "c_bad.png").string());
      continue;
    }
    EXPECT_EQ(j.at("image").at("path"), (in / names[i]).string()) << j;
    EXPECT_GT(j.at("image").at("features").get<int>(), 100);
  }
  // graf1 and graf3 (one size) share a batch call; box and z_box are each alone in theirs.
  EXPECT_EQ(lines[2].at("batch"), (nlohmann::json{{"index", 0}, {"images", 2}}));
  EXPECT_EQ(lines[3].at("batch"), (nlohmann::json{{"index", 1}, {"images", 2}}));
  EXPECT_EQ(lines[4].at("batch"), (nlohmann::json{{"index", 0}, {"images", 1}}));
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(p("out"))) written.insert(e.path().filename().string());
  EXPECT_EQ(written, (std::set<std::string>{"box.bin", "graf1_gray.bin", "graf3_gray.bin", "z_box.bin"}));
  // The same bytes as the single-image command.
  ASSERT_EQ(run("sift " + quote((kData / "graf3_gray.png").string()) + " -o " + quote(p("one.bin").string()) +
                " --backend cpu").status, 0);
  EXPECT_TRUE(slurp(p("one.bin")) == slurp(p("out") / "graf3_gray.bin"));
  EXPECT_TRUE(slurp(p("out") / "box.bin") == slurp(p("out") / "z_box.bin"));
}

// A folder without images is an error naming it, before any work; a folder of one image still writes into the
// output folder (a folder's images are always "several").
TEST_F(CliSift, FolderWithoutImagesOrWithOne) {
  fs::create_directories(p("empty"));
  { std::ofstream(p("empty") / "readme.txt") << "no image here"; }
  CliRun e = run("sift " + quote(p("empty").string()) + " -o " + quote(p("out").string()));
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.err.find("holds no image"), std::string::npos) << e.err;
  EXPECT_FALSE(fs::exists(p("out")));
  fs::create_directories(p("one"));
  fs::copy_file(kData / "box.png", p("one") / "box.png");
  CliRun one = run("sift " + quote(p("one").string()) + " -o " + quote(p("out").string()) + " --backend cpu");
  skip_if_no_sift(one);
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_TRUE(fs::exists(p("out") / "box.bin"));
}

// --descriptor-type u8 (OpenCV's CV_8U): the same features with byte descriptors, in every format (binary version
// 2, JSON with its "descriptor_type", Lowe's .key as always); --json says which; the default stays f32 (version 1).
TEST_F(CliSift, U8DescriptorsInEveryFormat) {
  const std::string img = quote((kData / "box.png").string());
  CliRun f32 = run("sift " + img + " -o " + quote(p("f.bin").string()) + " --json --backend cpu");
  skip_if_no_sift(f32);
  ASSERT_EQ(f32.status, 0) << f32.err;
  EXPECT_EQ(nlohmann::json::parse(f32.out).at("options").at("descriptor_type"), "f32");
  CliRun u8 = run("sift " + img + " -o " + quote(p("u.bin").string()) + " --descriptor-type u8 --json --backend cpu");
  ASSERT_EQ(u8.status, 0) << u8.err;
  const auto j = nlohmann::json::parse(u8.out);
  EXPECT_EQ(j.at("options").at("descriptor_type"), "u8");
  EXPECT_EQ(j.at("format"), "bin");

  const Features f = read_features(p("f.bin"));
  const Features u = read_features(p("u.bin"));
  ASSERT_EQ(f.descriptor_type, DescriptorType::kF32);
  ASSERT_EQ(u.descriptor_type, DescriptorType::kU8);
  ASSERT_EQ(u.size(), f.size());
  ASSERT_GT(u.size(), 100u);
  for (std::size_t i = 0; i < u.size(); ++i) {
    EXPECT_EQ(u.keypoints[i].x, f.keypoints[i].x);
    EXPECT_EQ(u.keypoints[i].y, f.keypoints[i].y);
    EXPECT_EQ(u.keypoints[i].response, f.keypoints[i].response);
  }
  EXPECT_TRUE(u.descriptor_bytes == f.descriptors_u8());  // the same integer values, as bytes
  EXPECT_TRUE(u.descriptors_f32() == f.descriptors);
  // Version 1 for floats, version 2 (a quarter of the descriptor bytes) for bytes.
  const std::string fb = slurp(p("f.bin")), ub = slurp(p("u.bin"));
  EXPECT_EQ(fb[4], 1);
  EXPECT_EQ(ub[4], 2);
  EXPECT_EQ(ub[24], 1);
  EXPECT_EQ(fb.size(), 24 + f.size() * (28 + 128 * 4));
  EXPECT_EQ(ub.size(), 28 + u.size() * (28 + 128));

  // JSON keeps the type; .key holds the same text as the f32 run's (it reads back as f32); --format wins over the
  // extension, the name is case-insensitive.
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("u.txt").string()) + " --format json --descriptor-type U8").status, 0);
  const Features uj = read_features_json(p("u.txt"));
  EXPECT_EQ(uj.descriptor_type, DescriptorType::kU8);
  EXPECT_TRUE(uj.descriptor_bytes == u.descriptor_bytes);
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("u.key").string()) + " --descriptor-type u8").status, 0);
  ASSERT_EQ(run("sift " + img + " -o " + quote(p("f.key").string())).status, 0);
  EXPECT_TRUE(slurp(p("u.key")) == slurp(p("f.key")));
  CliRun text = run("sift " + img + " -o " + quote(p("v.bin").string()) + " --descriptor-type u8 --backend cpu");
  EXPECT_NE(text.out.find("(bin, u8 descriptors)"), std::string::npos) << text.out;
  EXPECT_TRUE(slurp(p("v.bin")) == ub);  // deterministic

  // A folder of images: every file in the chosen type, the same bytes as the single-image command.
  fs::create_directories(p("in"));
  fs::copy_file(kData / "box.png", p("in") / "a.png");
  fs::copy_file(kData / "box.png", p("in") / "b.png");
  CliRun several = run("sift " + quote(p("in").string()) + " -o " + quote(p("out").string()) +
                       " --descriptor-type u8 --backend cpu");
  ASSERT_EQ(several.status, 0) << several.err;
  EXPECT_TRUE(slurp(p("out") / "a.bin") == ub);
  EXPECT_TRUE(slurp(p("out") / "b.bin") == ub);
}

// --root-sift with --descriptor-type u8 is refused before any work: one error line (or a JSON error), exit 2, no
// output file and no output folder.
TEST_F(CliSift, RootSiftWithU8DescriptorsIsRefused) {
  const std::string img = quote((kData / "box.png").string());
  for (const std::string& out : {"-o " + quote(p("r.bin").string()), "-o " + quote(p("r.json").string()),
                                 "-o " + quote(p("r.key").string()) + " --draw " + quote(p("kp.png").string())}) {
    SCOPED_TRACE(out);
    CliRun r = run("sift " + img + " " + out + " --root-sift --descriptor-type u8");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("--root-sift needs --descriptor-type f32"), std::string::npos) << r.err;
    EXPECT_EQ(line_count(r.err), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  CliRun j = run("sift " + img + " -o " + quote(p("r.bin").string()) + " --root-sift --descriptor-type u8 --json");
  EXPECT_EQ(j.status, 2);
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("code"), "invalid_argument");
  EXPECT_EQ(doc.at("exit_code"), 2);
  fs::create_directories(p("in"));
  fs::copy_file(kData / "box.png", p("in") / "a.png");
  CliRun folder = run("sift " + quote(p("in").string()) + " -o " + quote(p("out").string()) +
                      " --root-sift --descriptor-type u8");
  EXPECT_EQ(folder.status, 2) << folder.err;
  EXPECT_FALSE(fs::exists(p("out")));
  EXPECT_EQ(entries(), 1u);  // only the input folder
  // RootSIFT stays available with the default type.
  CliRun ok = run("sift " + img + " -o " + quote(p("r.bin").string()) + " --root-sift --descriptor-type f32");
  skip_if_no_sift(ok);
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// `spectrasift match` on u8 feature files (binary and JSON, either side, mixed with f32 ones) finds exactly the
// matches of the f32 files: the descriptors hold the same values. Its JSON names each side's type.
TEST_F(CliSift, MatchReadsU8FeatureFiles) {
  const std::string box = quote((kData / "box.png").string());
  const std::string scene = quote((fs::path(SPECTRASIFT_DATA_DIR) / "box_in_scene.png").string());
  CliRun first = run("sift " + box + " -o " + quote(p("q.bin").string()) + " --backend cpu");
  skip_if_no_sift(first);
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_EQ(run("sift " + scene + " -o " + quote(p("t.bin").string()) + " --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + box + " -o " + quote(p("qu.bin").string()) + " --descriptor-type u8 --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + scene + " -o " + quote(p("tu.json").string()) + " --descriptor-type u8 --backend cpu").status, 0);
  auto match = [&](const std::string& a, const std::string& b) {
    CliRun r = run("match " + quote(p(a).string()) + " " + quote(p(b).string()) + " --json --backend cpu");
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto ref = match("q.bin", "t.bin");
  EXPECT_EQ(ref.at("query").at("descriptor_type"), "f32");
  ASSERT_GT(ref.at("matches").size(), 30u);
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"qu.bin", "tu.json"}, {"qu.bin", "t.bin"}, {"q.bin", "tu.json"}}) {
    SCOPED_TRACE(a + " " + b);
    const auto j = match(a, b);
    EXPECT_EQ(j.at("query").at("descriptor_type"), a == "qu.bin" ? "u8" : "f32");
    EXPECT_EQ(j.at("train").at("descriptor_type"), b == "tu.json" ? "u8" : "f32");
    EXPECT_EQ(j.at("matches"), ref.at("matches"));
  }
  // From images, --descriptor-type u8 gives the same matches too.
  CliRun images = run("match " + box + " " + scene + " --descriptor-type u8 --json --backend cpu");
  ASSERT_EQ(images.status, 0) << images.err;
  const auto ji = nlohmann::json::parse(images.out);
  EXPECT_EQ(ji.at("query").at("descriptor_type"), "u8");
  EXPECT_EQ(ji.at("matches"), ref.at("matches"));
  CliRun bad = run("match " + box + " " + scene + " --descriptor-type u8 --root-sift");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--root-sift needs --descriptor-type f32"), std::string::npos) << bad.err;
}
