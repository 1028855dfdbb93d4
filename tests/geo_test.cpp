// Georeferenced rasters through GDAL (issue 22): GeoTIFF round trip against gdalinfo -json, registration of two
// gdal_translate -srcwin crops of a real Landsat scene (data/olinda_l7.tif) against their geotransforms, a cube
// from a multiband GeoTIFF against the same data in ENVI, and a 16-bit scene with 12-bit content against its 8-bit
// stretch. Every test needs GDAL in the build and its tools (found at configure time); without them it is skipped
// and says why. The build without GDAL is checked too: its readers and writers refuse with a message saying how to
// get them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/spectral.hpp"

namespace fs = std::filesystem;
namespace ss = spectrasift;
using ss::test::quote;
using ss::test::run_captured;

namespace {

const fs::path kScene = fs::path(SPECTRASIFT_DATA_DIR) / "olinda_l7.tif";  // 256 x 256 x 6, UTM 25S, 28.5 m

#ifdef SPECTRASIFT_HAVE_GDAL
const std::string kGdalinfo = SPECTRASIFT_GDALINFO, kTranslate = SPECTRASIFT_GDAL_TRANSLATE, kWarp = SPECTRASIFT_GDALWARP;
#else
const std::string kGdalinfo, kTranslate, kWarp;
#endif

#define SKIP_WITHOUT_GDAL_TOOLS()                                                                                  \
  do {                                                                                                           \
    if (!ss::gdal_supported()) GTEST_SKIP() << "this build has no GDAL (install libgdal-dev and reconfigure)";    \
    if (kGdalinfo.empty() || kTranslate.empty())                                                                 \
      GTEST_SKIP() << "gdalinfo / gdal_translate were not found at configure time (install gdal-bin)";           \
  } while (0)

/// A scratch folder, removed at the end.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) {
    dir = fs::temp_directory_path() / ("spectrasift_geo_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

/// Runs a tool; fails the test (and returns "") when it fails.
std::string run(const std::string& program, const std::string& args, const Scratch& s) {
  const auto r = run_captured(program, args, s.dir);
  EXPECT_EQ(r.status, 0) << program << " " << args << "\n" << r.err;
  return r.out;
}

nlohmann::json gdalinfo(const std::string& file, const Scratch& s) {
  return nlohmann::json::parse(run(kGdalinfo, "-json " + quote(file), s));
}

std::vector<double> geotransform(const nlohmann::json& info) { return info.at("geoTransform").get<std::vector<double>>(); }

}  // namespace

TEST(Geo, WithoutGdalEveryGdalFeatureSaysHowToGetIt) {
  if (ss::gdal_supported()) GTEST_SKIP() << "this build has GDAL (the refusals are those of a build without it)";
  try {
    ss::read_raster_image(kScene.string());
    FAIL() << "read_raster_image worked without GDAL";
  } catch (const ss::Error& e) {
    EXPECT_EQ(e.code(), ss::ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("libgdal-dev"), std::string::npos) << e.what();
  }
  const float v = 1;
  ss::RasterBands b{&v, ss::SampleType::kF32, 1, 1, 1, true, {}};
  EXPECT_THROW(ss::write_geotiff(fs::temp_directory_path() / "x.tif", b, {}), ss::Error);
  EXPECT_FALSE(ss::read_georeference(kScene.string()).georeferenced());
}

TEST(Geo, GeoTiffRoundTripMatchesGdalinfo) {
  SKIP_WITHOUT_GDAL_TOOLS();
  Scratch s("roundtrip");
  const ss::GeoImage scene = ss::read_raster_image(kScene.string(), 4);
  ASSERT_TRUE(scene.georef.georeferenced());
  EXPECT_EQ(scene.band_count, 6);
  // Two float bands with a nodata value, in the scene's georeferencing moved by a window.
  const int w = 300, h = 170;  // not a multiple of the 256 x 256 tiles
  std::vector<float> data(std::size_t(2) * w * h);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = float(i % 977) * 0.25f - 7.0f;
  data[5] = -9999.0f;
  ss::GeoReference g = scene.georef.window(13, 21);
  g.nodata = -9999.0;
  const std::string out = s / "out.tif";
  ss::write_geotiff(out, ss::RasterBands{data.data(), ss::SampleType::kF32, w, h, 2, true, {"first", "second"}}, g);

  const nlohmann::json info = gdalinfo(out, s);
  EXPECT_EQ(info.at("size"), nlohmann::json({w, h}));
  const std::vector<double> gt = geotransform(info);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(gt[std::size_t(i)], g.geotransform[std::size_t(i)]) << i;
  EXPECT_DOUBLE_EQ(gt[0], scene.georef.geotransform[0] + 13 * 28.499999999274539);
  ASSERT_EQ(info.at("bands").size(), 2u);
  EXPECT_EQ(info.at("bands")[0].at("noDataValue").get<double>(), -9999.0);
  EXPECT_EQ(info.at("bands")[1].at("description"), "second");
  EXPECT_EQ(info.at("bands")[0].at("block"), nlohmann::json({256, 256}));
  EXPECT_EQ(info.at("metadata").at("IMAGE_STRUCTURE").at("COMPRESSION"), "DEFLATE");
  // The CRS gdalinfo reports is the one we read back, and the one we wrote (the same EPSG:31985).
  const ss::RasterCube back = ss::read_raster_cube(out);
  EXPECT_EQ(back.georef().crs_wkt, g.crs_wkt);
  EXPECT_NE(info.at("coordinateSystem").at("wkt").get<std::string>().find("UTM zone 25S"), std::string::npos);
  EXPECT_EQ(back.georef().geotransform, g.geotransform);
  ASSERT_TRUE(back.georef().nodata.has_value());
  EXPECT_EQ(*back.georef().nodata, -9999.0);
  ASSERT_EQ(back.ref().type, ss::SampleType::kF32);
  ASSERT_EQ(back.ref().size_bytes, data.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(back.ref().data, data.data(), back.ref().size_bytes), 0);
  EXPECT_EQ(back.band_names(), (std::vector<std::string>{"first", "second"}));
}

TEST(Geo, PixelAndMapCoordinatesFollowGdalConvention) {
  ss::GeoReference g;
  g.geotransform = {1000, 30, 0, 5000, 0, -30};
  g.has_geotransform = true;
  // spectrasift's (0, 0) is the centre of the top-left pixel: GDAL's (0.5, 0.5).
  const ss::Point2 m = g.pixel_to_map({0, 0});
  EXPECT_DOUBLE_EQ(m.x, 1015);
  EXPECT_DOUBLE_EQ(m.y, 4985);
  const ss::Point2 p = g.map_to_pixel({1000 + 30 * 10.25, 5000 - 30 * 3.5});
  EXPECT_DOUBLE_EQ(p.x, 9.75);
  EXPECT_DOUBLE_EQ(p.y, 3.0);
  EXPECT_DOUBLE_EQ(g.window(4, 2).geotransform[0], 1120);
  EXPECT_DOUBLE_EQ(g.window(4, 2).geotransform[3], 4940);
}

TEST(Geo, CropsRegisterAtTheirGeotransformOffset) {
  SKIP_WITHOUT_GDAL_TOOLS();
  Scratch s("crops");
  // Two overlapping 200 x 200 crops of the real scene (band 4, near infrared) made by GDAL itself.
  run(kTranslate, "-q -b 4 -srcwin 0 0 200 200 " + quote(kScene.string()) + " " + quote(s / "fixed.tif"), s);
  run(kTranslate, "-q -b 4 -srcwin 37 21 200 200 " + quote(kScene.string()) + " " + quote(s / "moving.tif"), s);
  const std::vector<double> gf = geotransform(gdalinfo(s / "fixed.tif", s));
  const std::vector<double> gm = geotransform(gdalinfo(s / "moving.tif", s));
  const double dx = (gm[0] - gf[0]) / gf[1], dy = (gm[3] - gf[3]) / gf[5];  // MOVING's origin in FIXED's pixels
  const auto r = run_captured(SPECTRASIFT_CLI,
                              "register --json --quiet --model similarity " + quote(s / "fixed.tif") + " " +
                                  quote(s / "moving.tif") + " -o " + quote(s / "warped.tif") + " --gcp " +
                                  quote(s / "gcps.vrt") + " --geojson " + quote(s / "matches.geojson"),
                              s.dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& h = j.at("matrix");
  EXPECT_NEAR(h[0][2].get<double>(), dx, 0.1) << r.out;
  EXPECT_NEAR(h[1][2].get<double>(), dy, 0.1) << r.out;
  EXPECT_NEAR(h[0][0].get<double>(), 1.0, 1e-3);
  EXPECT_GE(j.at("inliers").get<int>(), 20);
  // The model on the ground: the same CRS, residuals in metres well under a pixel (28.5 m).
  ASSERT_TRUE(j.contains("map")) << r.out;
  EXPECT_TRUE(j.at("map").at("same_crs").get<bool>());
  EXPECT_EQ(j.at("map").at("crs_unit"), "metre");
  EXPECT_LT(j.at("map").at("rms_m").get<double>(), 0.1 * 28.5);
  EXPECT_TRUE(j.at("fixed").at("georeferenced").get<bool>());
  // The warped output is in FIXED's frame: FIXED's geotransform and CRS.
  const nlohmann::json wi = gdalinfo(s / "warped.tif", s);
  EXPECT_EQ(geotransform(wi), gf);
  EXPECT_EQ(wi.at("coordinateSystem").at("wkt"), gdalinfo(s / "fixed.tif", s).at("coordinateSystem").at("wkt"));
  // The GCP VRT: one GCP per inlier, which GDAL reads; gdalwarp georeferences MOVING with it at its true place.
  const nlohmann::json vi = gdalinfo(s / "gcps.vrt", s);
  EXPECT_EQ(vi.at("gcps").at("gcpList").size(), std::size_t(j.at("inliers").get<int>()));
  if (!kWarp.empty()) {
    run(kWarp, "-q -order 1 " + quote(s / "gcps.vrt") + " " + quote(s / "georeferenced.tif"), s);
    const std::vector<double> gg = geotransform(gdalinfo(s / "georeferenced.tif", s));
    EXPECT_NEAR(gg[0], gm[0], 0.1 * gf[1]);
    EXPECT_NEAR(gg[3], gm[3], 0.1 * gf[1]);
  }
  const nlohmann::json geo = nlohmann::json::parse(ss::test::slurp(s.dir / "matches.geojson"));
  EXPECT_EQ(geo.at("type"), "FeatureCollection");
  EXPECT_EQ(geo.at("features").size(), j.at("match_count").get<std::size_t>());
  const auto lonlat = geo.at("features")[0].at("geometry").at("coordinates");
  EXPECT_NEAR(lonlat[0].get<double>(), -34.87, 0.05);  // Olinda, Brazil
  EXPECT_NEAR(lonlat[1].get<double>(), -7.98, 0.05);
}

TEST(Geo, CubeFromMultibandGeoTiffScoresAsEnvi) {
  SKIP_WITHOUT_GDAL_TOOLS();
  Scratch s("cube");
  run(kTranslate, "-q -of ENVI " + quote(kScene.string()) + " " + quote(s / "scene.img"), s);
  const ss::RasterCube tif = ss::read_raster_cube(kScene.string());
  const ss::EnviCube envi = ss::open_envi(s / "scene.hdr");
  ASSERT_EQ(tif.ref().bands, 6);
  ss::Context ctx(ss::ContextOptions{});
  for (ss::Metric metric : {ss::Metric::kSpectralAngle, ss::Metric::kEuclidean}) {
    ss::SpectralOptions o;
    o.metric = metric;
    const ss::SpectralLibrary refs_tif = ss::reference_from_pixels(tif.ref(), {{120, 80}, {30, 200}});
    const ss::SpectralLibrary refs_envi = ss::reference_from_pixels(envi, {{120, 80}, {30, 200}});
    ASSERT_EQ(refs_tif.spectra, refs_envi.spectra);
    const ss::SpectralResult a = ss::spectral_match(ctx, tif.ref(), refs_tif, o);
    const ss::SpectralResult b = ss::spectral_match(ctx, envi, refs_envi, o);
    ASSERT_EQ(a.scores.size(), b.scores.size());
    EXPECT_EQ(std::memcmp(a.scores.data(), b.scores.data(), a.scores.size() * sizeof(float)), 0);
  }
  // The command line: the GeoTIFF cube in, a GeoTIFF out with the cube's georeferencing, the same scores as ENVI.
  for (const std::string& in : {kScene.string(), s / "scene.hdr"}) {
    const std::string out = s / ("best_" + fs::path(in).extension().string().substr(1) + ".tif");
    const auto r = run_captured(SPECTRASIFT_CLI,
                                "spectral --quiet " + quote(in) + " --ref-pixel 120,80 --ref-pixel 30,200 --best -o " + quote(out),
                                s.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json info = gdalinfo(out, s);
    // The cube's georeferencing as GDAL reads it (the ENVI copy's "map info" holds fewer digits than the GeoTIFF).
    const std::string as_gdal_reads = fs::path(in).extension() == ".hdr" ? s / "scene.img" : in;
    EXPECT_EQ(geotransform(info), geotransform(gdalinfo(as_gdal_reads, s)));
    const nlohmann::json& nd = info.at("bands")[0].at("noDataValue");  // gdalinfo -json writes NaN as "nan"
    EXPECT_TRUE(nd.is_string() ? (nd == "NaN" || nd == "nan") : std::isnan(nd.get<double>())) << nd.dump();
    EXPECT_EQ(gdalinfo(fs::path(out).replace_filename(fs::path(out).stem().string() + "_index.tif").string(), s)
                  .at("bands")[0]
                  .at("noDataValue")
                  .get<double>(),
              -1.0);
  }
  // ENVI output of the GeoTIFF cube: "map info" and "coordinate system string" carry its georeferencing.
  const auto r = run_captured(SPECTRASIFT_CLI,
                              "spectral --quiet " + quote(kScene.string()) + " --ref-pixel 120,80 -o " + quote(s / "sam.hdr"),
                              s.dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json envi_info = gdalinfo(s / "sam.img", s);
  EXPECT_EQ(geotransform(envi_info), geotransform(gdalinfo(kScene.string(), s)));
  EXPECT_EQ(envi_info.at("coordinateSystem").at("wkt"), gdalinfo(kScene.string(), s).at("coordinateSystem").at("wkt"));
  const ss::RasterCube x = ss::read_raster_cube(s / "best_tif.tif"), y = ss::read_raster_cube(s / "best_hdr.tif");
  ASSERT_EQ(x.ref().size_bytes, y.ref().size_bytes);
  EXPECT_EQ(std::memcmp(x.ref().data, y.ref().data, x.ref().size_bytes), 0);
}

namespace {

struct Registration {
  int status = -1;
  int inliers = 0;
  double dx = 0, dy = 0;
};

Registration register_pair(const std::string& fixed, const std::string& moving, const std::string& extra, const Scratch& s) {
  const auto r = run_captured(SPECTRASIFT_CLI,
                              "register --json --quiet --model similarity " + extra + " " + quote(fixed) + " " + quote(moving),
                              s.dir);
  Registration g;
  g.status = r.status;
  if (r.status != 0) return g;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  g.inliers = j.at("inliers").get<int>();
  g.dx = j.at("matrix")[0][2].get<double>();
  g.dy = j.at("matrix")[1][2].get<double>();
  return g;
}

}  // namespace

TEST(Geo, SixteenBitSceneWithTwelveBitContentRegistersAsItsEightBitStretch) {
  SKIP_WITHOUT_GDAL_TOOLS();
  Scratch s("bits");
  // A 16-bit scene holding 12-bit values (offset and gain as a Level-1 product's digital numbers), made from the real
  // red band, and its 8-bit rendering (gdal_translate's linear stretch of the same range).
  run(kTranslate, "-q -b 3 -ot UInt16 -scale 0 255 312 3897 " + quote(kScene.string()) + " " + quote(s / "dn16.tif"), s);
  run(kTranslate, "-q -ot Byte -scale 312 3897 0 255 " + quote(s / "dn16.tif") + " " + quote(s / "dn8.tif"), s);
  const ss::GeoImage dn16 = ss::read_raster_image(s / "dn16.tif");
  ASSERT_EQ(dn16.image.type, ss::PixelType::kU16);
  std::uint16_t hi = 0;
  for (std::size_t i = 0; i < dn16.image.pixel_count(); ++i) hi = std::max(hi, dn16.image.as<std::uint16_t>()[i]);
  EXPECT_LT(hi, 4096);  // 12-bit content
  Registration with[2];
  for (int k = 0; k < 2; ++k) {
    const std::string src = s / (k == 0 ? "dn16.tif" : "dn8.tif");
    run(kTranslate, "-q -srcwin 0 0 200 200 " + quote(src) + " " + quote(s / "f.tif"), s);
    run(kTranslate, "-q -srcwin 37 21 200 200 " + quote(src) + " " + quote(s / "m.tif"), s);
    with[k] = register_pair(s / "f.tif", s / "m.tif", "", s);
    ASSERT_EQ(with[k].status, 0) << (k == 0 ? "16-bit" : "8-bit");
    EXPECT_NEAR(with[k].dx, 37, 0.1);
    EXPECT_NEAR(with[k].dy, 21, 0.1);
    if (k == 0) {
      // Without the stretch the 12-bit content spans 1/16 of the grey range: far fewer matches, if any model.
      const Registration none = register_pair(s / "f.tif", s / "m.tif", "--stretch none --accept-weak", s);
      if (none.status == 0) {
        EXPECT_LT(none.inliers * 2, with[0].inliers);
      }
      std::printf("16-bit without stretch: exit %d, %d inliers\n", none.status, none.inliers);
    }
  }
  std::printf("inliers: 16-bit (stretched, default) %d, 8-bit rendering %d\n", with[0].inliers, with[1].inliers);
  EXPECT_GE(double(with[0].inliers), 0.9 * double(with[1].inliers));
}

TEST(Geo, NodataIsMaskedOutOfDetection) {
  ss::Image im = ss::Image::allocate(96, 96, 1, ss::PixelType::kU16);
  // Blobs on a ramp, with a hole of nodata (value 0): the square 14 <= x, y < 26.
  for (int y = 0; y < 96; ++y)
    for (int x = 0; x < 96; ++x) {
      const double b = std::exp(-((x - 60.0) * (x - 60.0) + (y - 40.0) * (y - 40.0)) / 18.0) +
                       std::exp(-((x - 20.0) * (x - 20.0) + (y - 60.0) * (y - 60.0)) / 18.0);
      im.as<std::uint16_t>()[y * 96 + x] = x >= 14 && x < 26 && y >= 14 && y < 26 ? 0 : std::uint16_t(1000 + 2000 * b + 5 * x);
    }
  ss::Context ctx(ss::ContextOptions{});
  ss::SiftOptions o;
  o.stretch = ss::SiftOptions::Stretch::kAuto;
  o.nodata = 0.0;
  const ss::Features f = ss::detect_and_compute(ctx, im, o);
  ASSERT_GT(f.size(), 0u);
  // The mask is read at the rounded position (as SiftOptions' mask): nodata pixels and a margin of 3 around them.
  const auto masked = [&](const ss::Keypoint& k) {
    const int x = int(k.x + 0.5f), y = int(k.y + 0.5f), m = o.nodata_margin;
    return x >= 14 - m && x < 26 + m && y >= 14 - m && y < 26 + m;
  };
  for (const auto& k : f.keypoints) EXPECT_FALSE(masked(k)) << k.x << "," << k.y;
  // Without the nodata value the hole is a dark blob: keypoints of its own.
  o.nodata.reset();
  const ss::Features all = ss::detect_and_compute(ctx, im, o);
  EXPECT_TRUE(std::any_of(all.keypoints.begin(), all.keypoints.end(), masked));
}

TEST(Geo, AutoStretchLeavesEightBitAndFullRangeImagesAlone) {
  ss::Image u8 = ss::Image::allocate(64, 64, 1, ss::PixelType::kU8);
  ss::Image u16 = ss::Image::allocate(64, 64, 1, ss::PixelType::kU16);
  for (int i = 0; i < 64 * 64; ++i) {
    const int x = i % 64, y = i / 64;
    const double v = 0.5 + 0.5 * std::sin(x * 0.31) * std::cos(y * 0.23);
    u8.data[std::size_t(i)] = std::uint8_t(std::lround(255 * v));
    u16.as<std::uint16_t>()[i] = std::uint16_t(std::lround(65535 * v));
  }
  ss::Context ctx(ss::ContextOptions{});
  ss::SiftOptions none, automatic;
  automatic.stretch = ss::SiftOptions::Stretch::kAuto;
  for (const ss::Image* im : {&u8, &u16}) {
    const ss::Features a = ss::detect_and_compute(ctx, *im, none), b = ss::detect_and_compute(ctx, *im, automatic);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a.descriptors, b.descriptors);
  }
}
