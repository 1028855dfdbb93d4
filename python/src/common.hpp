// Pieces shared by the binding's files: the Context as Python holds it (with the lock that turns use from two
// threads into RuntimeError), NumPy arrays that own a vector's memory, and the record of the input buffer
// that the no-copy test reads.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::python {

namespace nb = nanobind;

/// A Context and its lock. Every call on it takes the lock with try_lock while it holds the GIL, so a second
/// thread that comes while a call runs gets RuntimeError at once instead of sharing the Context.
struct PyContext {
  std::unique_ptr<Context> context;  ///< null once closed
  std::mutex busy;
};

/// The lock of one call on a PyContext (throws RuntimeError when it is taken or the Context is closed).
class ContextCall {
 public:
  explicit ContextCall(PyContext& c, const char* operation);
  ~ContextCall() { lock_.unlock(); }
  ContextCall(const ContextCall&) = delete;
  ContextCall& operator=(const ContextCall&) = delete;
  Context& ctx() { return *ctx_; }

 private:
  std::unique_lock<std::mutex> lock_;
  Context* ctx_ = nullptr;
};

/// A NumPy array that owns `values` (moved to the heap, freed with the array).
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& values, std::initializer_list<std::size_t> shape) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(heap->data(), shape, owner);
}

/// An image array as the binding takes it: C-contiguous (H, W) or (H, W, C), uint8, uint16 or float32.
using ImageArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
/// An Image copied from an image array (for the calls that take an owning Image: warp, masks).
Image image_copy(const ImageArray& a);
/// The matches as an owned (N, 16) uint8 array (the package views it as MATCH_DTYPE).
nb::ndarray<nb::numpy, std::uint8_t> match_bytes(const std::vector<Match>& matches);
/// A NumPy array (H, W) or (H, W, C) that owns `image`.
nb::object image_to_numpy(Image&& image);

/// The address of the last input buffer handed to the library by sift() or spectral() (the test that proves
/// that a C-contiguous array is used in place compares it with the array's own address).
void record_input(const void* data) noexcept;
std::uintptr_t last_input() noexcept;

/// Measures the library call of sift() and spectral() (the Python overhead figure: the package's wall time
/// against this one, docs/performance/python.md); the last one is read by _core._last_call_ms().
class CallTimer {
 public:
  CallTimer() : t0_(std::chrono::steady_clock::now()) {}
  ~CallTimer();
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point t0_;
};
double last_call_ms() noexcept;

/// Each part of the module.
void bind_context(nb::module_& m);
void bind_features(nb::module_& m);
void bind_geometry(nb::module_& m);
void bind_spectral(nb::module_& m);

}  // namespace spectrasift::python
