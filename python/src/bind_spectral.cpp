// EnviCube (memory-mapped, its samples as a NumPy view), open_envi(), spectral matching of an ENVI cube or of
// an array (a CubeRef on the array's memory: no copy), reference helpers and spectral libraries.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "spectrasift/cube.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::python {

namespace {

nb::dlpack::dtype native_dtype(SampleType t) {
  switch (t) {
    case SampleType::kU8:
      return nb::dtype<std::uint8_t>();
    case SampleType::kI16:
      return nb::dtype<std::int16_t>();
    case SampleType::kI32:
      return nb::dtype<std::int32_t>();
    case SampleType::kF32:
      return nb::dtype<float>();
    case SampleType::kF64:
      return nb::dtype<double>();
    case SampleType::kU16:
      return nb::dtype<std::uint16_t>();
    case SampleType::kU32:
      return nb::dtype<std::uint32_t>();
    case SampleType::kI64:
      return nb::dtype<std::int64_t>();
    case SampleType::kU64:
      return nb::dtype<std::uint64_t>();
  }
  throw Error(ErrorCode::kInternal, "unknown sample type");
}

SampleType sample_type(int envi_code) {
  switch (envi_code) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 12:
    case 13:
    case 14:
    case 15:
      return static_cast<SampleType>(envi_code);
    default:
      throw Error(ErrorCode::kInvalidArgument, "ENVI data type " + std::to_string(envi_code) + " is not supported");
  }
}

nb::dict header_dict(const EnviHeader& h) {
  nb::dict d;
  d["samples"] = h.samples;
  d["lines"] = h.lines;
  d["bands"] = h.bands;
  d["data type"] = int(h.data_type);
  d["interleave"] = to_string(h.interleave);
  d["byte order"] = h.big_endian ? 1 : 0;
  d["header offset"] = h.header_offset;
  d["file type"] = h.file_type;
  d["wavelength"] = h.wavelength;
  d["wavelength units"] = h.wavelength_units;
  d["fwhm"] = h.fwhm;
  d["bbl"] = h.bbl;
  d["data ignore value"] = h.data_ignore_value ? nb::cast(*h.data_ignore_value) : nb::none();
  d["reflectance scale factor"] = h.reflectance_scale_factor ? nb::cast(*h.reflectance_scale_factor) : nb::none();
  d["band names"] = h.band_names;
  d["spectra names"] = h.spectra_names;
  d["description"] = h.description;
  nb::dict fields;
  for (const auto& [k, v] : h.fields) fields[nb::str(k.c_str())] = v;
  d["fields"] = fields;
  return d;
}

using Refs = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

SpectralLibrary library_from(const Refs& refs, const std::vector<std::string>& names) {
  SpectralLibrary lib;
  lib.count = int(refs.shape(0));
  lib.bands = int(refs.shape(1));
  lib.spectra.assign(refs.data(), refs.data() + refs.size());
  lib.names = names;
  while (lib.names.size() < std::size_t(lib.count))
    lib.names.push_back("reference " + std::to_string(lib.names.size()));
  return lib;
}

SpectralOptions spectral_options(const std::string& metric, const std::string& reduction, int top_k, double threshold,
                                 int chunk_lines, bool tensor_cores) {
  SpectralOptions o;
  o.metric = parse_metric(metric);
  if (reduction == "all")
    o.reduction = Reduction::kAll;
  else if (reduction == "best")
    o.reduction = Reduction::kBest;
  else if (reduction == "top")
    o.reduction = Reduction::kTopK;
  else if (reduction == "threshold")
    o.reduction = Reduction::kThreshold;
  else
    throw Error(ErrorCode::kInvalidArgument, "reduction must be all, best, top or threshold");
  o.top_k = top_k;
  o.threshold = threshold;
  o.chunk_lines = chunk_lines;
  o.allow_tensor_cores = tensor_cores;
  return o;
}

nb::dict result_dict(SpectralResult&& r) {
  nb::dict d;
  const std::size_t k = std::size_t(r.k), lines = std::size_t(r.lines), samples = std::size_t(r.samples);
  d["scores"] = owned_array(std::move(r.scores), {k, lines, samples});
  d["index"] = r.index.empty() ? nb::none() : nb::cast(owned_array(std::move(r.index), {k, lines, samples}));
  nb::dict t;
  t["upload"] = r.times.upload_ms;
  t["compute"] = r.times.compute_ms;
  t["download"] = r.times.download_ms;
  t["match_total"] = r.times.total_ms;
  d["times_ms"] = t;
  d["backend"] = r.backend;
  d["references"] = r.references;
  return d;
}

}  // namespace

void bind_spectral(nb::module_& m) {
  nb::class_<EnviCube>(m, "EnviCube")
      .def_prop_ro("header", [](const EnviCube& c) { return header_dict(c.header()); })
      .def_prop_ro("header_path", [](const EnviCube& c) { return c.header_path().string(); })
      .def_prop_ro("data_path", [](const EnviCube& c) { return c.data_path().string(); })
      .def_prop_ro("big_endian", [](const EnviCube& c) { return c.header().big_endian; })
      .def_prop_ro("raw_array", [](nb::handle self) {
        // (lines, samples, bands) over the mapping, in the file's interleave (strides), native-order dtype: the
        // package turns it into the file's byte order with a view.
        const EnviCube& c = nb::cast<const EnviCube&>(self);
        const auto& h = c.header();
        const std::size_t shape[3] = {std::size_t(h.lines), std::size_t(h.samples), std::size_t(h.bands)};
        const std::int64_t strides[3] = {std::int64_t(c.line_stride()), std::int64_t(c.sample_stride()),
                                         std::int64_t(c.band_stride())};
        return nb::ndarray<nb::numpy, nb::ro>(c.data(), 3, shape, self, strides, native_dtype(h.data_type));
      });

  m.def(
      "open_envi",
      [](const std::string& path, std::uint64_t max_pixels) {
        nb::gil_scoped_release release;
        return open_envi(path, max_pixels);
      },
      nb::arg("path"), nb::arg("max_pixels"));

  m.def(
      "spectral_envi",
      [](PyContext& c, const EnviCube& cube, Refs refs, const std::vector<std::string>& names,
         const std::string& metric, const std::string& reduction, int top_k, double threshold, int chunk_lines,
         bool tensor_cores) {
        ContextCall call(c, "spectral");
        const SpectralLibrary lib = library_from(refs, names);
        const SpectralOptions o = spectral_options(metric, reduction, top_k, threshold, chunk_lines, tensor_cores);
        record_input(cube.data());
        SpectralResult r;
        {
          nb::gil_scoped_release release;
          const CallTimer timer;
          r = spectral_match(call.ctx(), cube, lib, o);
          cube.check_intact();
        }
        return result_dict(std::move(r));
      },
      nb::arg("ctx"), nb::arg("cube"), nb::arg("refs"), nb::arg("names"), nb::arg("metric"), nb::arg("reduction"),
      nb::arg("top_k"), nb::arg("threshold"), nb::arg("chunk_lines"), nb::arg("tensor_cores"));

  m.def(
      "spectral_array",
      [](PyContext& c, nb::ndarray<nb::ro, nb::device::cpu> data, int envi_type, bool big_endian,
         std::vector<std::int64_t> strides, std::vector<double> wavelength, std::vector<int> bbl,
         std::optional<double> data_ignore_value, std::optional<double> reflectance_scale_factor, Refs refs,
         const std::vector<std::string>& names, const std::string& metric, const std::string& reduction, int top_k,
         double threshold, int chunk_lines, bool tensor_cores) {
        ContextCall call(c, "spectral");
        if (data.ndim() != 3 || strides.size() != 3)
          throw Error(ErrorCode::kInvalidArgument, "the cube must have 3 dimensions (lines, samples, bands)");
        CubeRef v;
        v.data = data.data();
        v.type = sample_type(envi_type);
        v.size_bytes = data.size() * sample_size(v.type);
        v.lines = int(data.shape(0));
        v.samples = int(data.shape(1));
        v.bands = int(data.shape(2));
        for (auto s : strides)
          if (s <= 0) throw Error(ErrorCode::kInvalidArgument, "the cube's strides must be positive");
        v.line_stride = std::size_t(strides[0]);
        v.sample_stride = std::size_t(strides[1]);
        v.band_stride = std::size_t(strides[2]);
        v.big_endian = big_endian;
        v.wavelength = std::move(wavelength);
        v.bbl = std::move(bbl);
        v.data_ignore_value = data_ignore_value;
        v.reflectance_scale_factor = reflectance_scale_factor;
        v.name = "NumPy cube";
        const SpectralLibrary lib = library_from(refs, names);
        const SpectralOptions o = spectral_options(metric, reduction, top_k, threshold, chunk_lines, tensor_cores);
        record_input(v.data);
        SpectralResult r;
        {
          nb::gil_scoped_release release;
          const CallTimer timer;
          r = spectral_match(call.ctx(), v, lib, o);
        }
        return result_dict(std::move(r));
      },
      nb::arg("ctx"), nb::arg("data"), nb::arg("envi_type"), nb::arg("big_endian"), nb::arg("strides"),
      nb::arg("wavelength"), nb::arg("bbl"), nb::arg("data_ignore_value").none(),
      nb::arg("reflectance_scale_factor").none(), nb::arg("refs"), nb::arg("names"), nb::arg("metric"),
      nb::arg("reduction"), nb::arg("top_k"), nb::arg("threshold"), nb::arg("chunk_lines"), nb::arg("tensor_cores"));

  m.def(
      "reference_from_pixels",
      [](const EnviCube& cube, const std::vector<std::pair<int, int>>& xy) {
        SpectralLibrary lib = reference_from_pixels(cube, xy);
        const std::size_t count = std::size_t(lib.count), bands = std::size_t(lib.bands);
        return std::make_pair(owned_array(std::move(lib.spectra), {count, bands}), lib.names);
      },
      nb::arg("cube"), nb::arg("xy"));

  m.def(
      "read_library",
      [](const std::string& path) {
        SpectralLibrary lib;
        {
          nb::gil_scoped_release release;
          lib = read_library(path);
        }
        nb::dict d;
        const std::size_t count = std::size_t(lib.count), bands = std::size_t(lib.bands);
        d["spectra"] = owned_array(std::move(lib.spectra), {count, bands});
        d["names"] = lib.names;
        d["wavelength"] = lib.wavelength;
        d["wavelength_units"] = lib.wavelength_units;
        d["fwhm"] = lib.fwhm;
        return d;
      },
      nb::arg("path"));

  m.def(
      "resample_library",
      [](Refs spectra, const std::vector<double>& wavelength, const std::vector<double>& fwhm,
         const std::vector<double>& to_wavelength, const std::vector<double>& to_fwhm) {
        SpectralLibrary lib = library_from(spectra, {});
        lib.wavelength = wavelength;
        lib.fwhm = fwhm;
        SpectralLibrary r = resample_library(lib, to_wavelength, to_fwhm);
        const std::size_t count = std::size_t(r.count), bands = std::size_t(r.bands);
        return owned_array(std::move(r.spectra), {count, bands});
      },
      nb::arg("spectra"), nb::arg("wavelength"), nb::arg("fwhm"), nb::arg("to_wavelength"), nb::arg("to_fwhm"));
}

}  // namespace spectrasift::python
