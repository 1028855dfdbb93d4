// Probe (not part of the build): how a file in the page cache gets to the GPU fastest through pinned staging
// (docs/performance/spectral.md, 'Host staging copies'). It measures, on the raw bytes only (no kernels):
//   1. the machine: CPU model, caches, the pinned upload of the file alone;
//   2. the host copy (16 threads, fresh mapping -> pinned) alone and during a concurrent upload, by store kind;
//      2b. copy kernels (memcpy, 16/64-byte non-temporal stores, software prefetch, pread) and thread scaling;
//      2c. the upload while the other threads only read, only write, only fault or copy (what slows the DMA);
//   3. the upload of lines just written by the copy threads, by store kind (plain lines sit in the cores' L2);
//   4. whole pipelines, end to end (fresh mapping -> every byte on the device): the library's blocking copy per
//      16 MiB chunk (as of commit 2e3df29), and streamed copies (workers copy pieces in order in the background;
//      the calling thread enqueues an upload whenever enough bytes are ready) with several store policies,
//      staging rings and upload sizes.
// Variants alternate in rounds (median of the rounds). Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/staging_pipeline_probe.cu -o /tmp/spp -lpthread && /tmp/spp FILE [rounds]
// FILE: ~140 MB in the page cache (the step used 140.8 MB of /dev/urandom). Without a GPU (--no-gpu) the uploads
// are skipped, which checks the pipeline logic only; --wc makes the staging buffer write-combined pinned memory.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
constexpr std::size_t MiB = std::size_t(1) << 20;
bool g_gpu = true;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

enum Stores { kPlain = 0, kDemote = 1, kStream = 2, kNt64 = 3, kPlain64 = 4, kDemote64 = 5 };
const char* store_name(int s) {
  const char* n[] = {"plain", "demote", "nt", "nt 64-byte", "plain 64-byte + pf", "64-byte + pf + demote a page behind"};
  return n[s];
}
std::size_t g_pf = 4096;  // prefetch distance of kNt64

__attribute__((target("cldemote"))) void copy_demote(char* d, const char* s, std::size_t n) {
  std::memcpy(d, s, n);
  for (std::size_t i = 0; i < n; i += 64) __builtin_ia32_cldemote(d + i);
}
void copy_nt(char* d, const char* s, std::size_t n) {  // d 16-byte aligned, n multiple of 64 (pieces are)
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + i + 32)), e = _mm_loadu_si128((const __m128i*)(s + i + 48));
    _mm_stream_si128((__m128i*)(d + i), a); _mm_stream_si128((__m128i*)(d + i + 16), b);
    _mm_stream_si128((__m128i*)(d + i + 32), c); _mm_stream_si128((__m128i*)(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
}
// 64-byte non-temporal stores (one whole line per store), with an optional software prefetch `pf` bytes ahead of
// the source: the hardware streamer stops at every 4 KiB page of the mapping.
__attribute__((target("avx512f"))) void copy_nt512(char* d, const char* s, std::size_t n, std::size_t pf, int hint = 0) {
  std::size_t i = 0;
  const std::size_t head = std::min(n, std::size_t((64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63));
  std::memcpy(d, s, head);
  i = head;
  for (; i + 256 <= n; i += 256) {
    if (pf) {
      if (hint == 1) { _mm_prefetch(s + i + pf, _MM_HINT_T1); _mm_prefetch(s + i + pf + 64, _MM_HINT_T1);
                            _mm_prefetch(s + i + pf + 128, _MM_HINT_T1); _mm_prefetch(s + i + pf + 192, _MM_HINT_T1); }
      else if (hint == 2) { _mm_prefetch(s + i + pf, _MM_HINT_NTA); _mm_prefetch(s + i + pf + 64, _MM_HINT_NTA);
                            _mm_prefetch(s + i + pf + 128, _MM_HINT_NTA); _mm_prefetch(s + i + pf + 192, _MM_HINT_NTA); }
      else { _mm_prefetch(s + i + pf, _MM_HINT_T0); _mm_prefetch(s + i + pf + 64, _MM_HINT_T0);
             _mm_prefetch(s + i + pf + 128, _MM_HINT_T0); _mm_prefetch(s + i + pf + 192, _MM_HINT_T0); }
    }
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
    __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512((__m512i*)(d + i), a); _mm512_stream_si512((__m512i*)(d + i + 64), b);
    _mm512_stream_si512((__m512i*)(d + i + 128), c); _mm512_stream_si512((__m512i*)(d + i + 192), e);
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
}
// Two halves of the range copied page by page in alternation (two streams of misses per thread).
__attribute__((target("avx512f"))) void copy_nt512_2(char* d, const char* s, std::size_t n, std::size_t pf) {
  const std::size_t h = n / 2 / 4096 * 4096;
  if (h == 0) { copy_nt512(d, s, n, pf); return; }
  for (std::size_t i = 0; i < h; i += 4096) {
    copy_nt512(d + i, s + i, 4096, pf);
    copy_nt512(d + h + i, s + h + i, 4096, pf);
  }
  copy_nt512(d + 2 * h, s + 2 * h, n - 2 * h, 0);
}
// Plain 64-byte stores with the source prefetched a page ahead; `demote`: each 4 KiB page of the destination
// is pushed to the shared cache (CLDEMOTE) once the next page is written (the stores have left the core by then).
__attribute__((target("avx512f,cldemote"))) void copy_plain512(char* d, const char* s, std::size_t n, bool demote) {
  std::size_t i = 0;
  for (; i + 4096 <= n; i += 4096) {
    for (std::size_t j = 0; j < 4096; j += 256) {
      _mm_prefetch(s + i + j + 4096, _MM_HINT_T0); _mm_prefetch(s + i + j + 4096 + 64, _MM_HINT_T0);
      _mm_prefetch(s + i + j + 4096 + 128, _MM_HINT_T0); _mm_prefetch(s + i + j + 4096 + 192, _MM_HINT_T0);
      __m512i a = _mm512_loadu_si512(s + i + j), b = _mm512_loadu_si512(s + i + j + 64);
      __m512i c = _mm512_loadu_si512(s + i + j + 128), e = _mm512_loadu_si512(s + i + j + 192);
      _mm512_storeu_si512(d + i + j, a); _mm512_storeu_si512(d + i + j + 64, b);
      _mm512_storeu_si512(d + i + j + 128, c); _mm512_storeu_si512(d + i + j + 192, e);
    }
    if (demote && i >= 4096)
      for (std::size_t j = 0; j < 4096; j += 64) __builtin_ia32_cldemote(d + i - 4096 + j);
  }
  std::memcpy(d + i, s + i, n - i);
  if (demote) {
    for (std::size_t j = i >= 4096 ? i - 4096 : 0; j < n; j += 64) __builtin_ia32_cldemote(d + j);
  }
}
void copy_with(int st, char* d, const char* s, std::size_t n) {
  if (st == kNt64) copy_nt512(d, s, n, g_pf);
  else if (st == kPlain64) copy_plain512(d, s, n, false);
  else if (st == kDemote64) copy_plain512(d, s, n, true);
  else if (st == kDemote) copy_demote(d, s, n);
  else if (st == kStream) copy_nt(d, s, n);
  else std::memcpy(d, s, n);
}

// A spinning pool: job(i, worker) for i in [0, n) handed out by an atomic counter; run() returns when done.
struct Pool {
  std::vector<std::thread> t;
  std::atomic<unsigned> gen{0};
  std::atomic<bool> stop{false};
  std::atomic<int> next{0}, done{0}, active{0};
  int n = 0;
  std::function<void(int)> job;
  bool caller_works = true;
  explicit Pool(int workers) {
    for (int w = 0; w < workers; ++w) t.emplace_back([this] { loop(); });
  }
  ~Pool() { stop = true; for (auto& x : t) x.join(); }
  void loop() {
    unsigned seen = 0;
    while (!stop.load()) {
      if (gen.load() == seen) { _mm_pause(); continue; }
      seen = gen.load();
      active.fetch_add(1);
      drain();
      active.fetch_sub(1);
    }
  }
  void drain() {
    for (;;) {
      int i = next.fetch_add(1);
      if (i >= n) break;
      job(i);
      done.fetch_add(1);
    }
  }
  // Starts the job; the caller may work too (finish()) or do something else and finish() later.
  void start(int count, std::function<void(int)> fn) {
    while (active.load() > 0) _mm_pause();
    n = count; job = std::move(fn); next = 0; done = 0;
    gen.fetch_add(1);
  }
  void finish(bool help) {
    if (help) drain();
    while (done.load() < n) _mm_pause();
    while (active.load() > 0) _mm_pause();
  }
  void run(int count, std::function<void(int)> fn) { start(count, std::move(fn)); finish(true); }
};

struct Map {
  char* p = nullptr; std::size_t n = 0;
  Map(const char* f, std::size_t bytes, bool populate) : n(bytes) {
    int fd = open(f, O_RDONLY);
    p = (char*)mmap(nullptr, n, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    close(fd);
    if (p == MAP_FAILED) { std::perror("mmap"); std::exit(1); }
  }
  ~Map() { munmap(p, n); }
};

double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0 : v[v.size() / 2]; }

struct Gpu {
  char* dev = nullptr; char* stage = nullptr; char* other = nullptr;
  cudaStream_t s = nullptr, s2 = nullptr;
  std::vector<cudaEvent_t> ev;
  void upload(std::size_t dst_off, const char* src, std::size_t n, cudaStream_t st) {
    if (g_gpu) CK(cudaMemcpyAsync(dev + dst_off, src, n, cudaMemcpyHostToDevice, st));
  }
  void record(int i, cudaStream_t st) { if (g_gpu) CK(cudaEventRecord(ev[i], st)); }
  bool query(int i) { return !g_gpu || cudaEventQuery(ev[i]) == cudaSuccess; }
  void wait(int i) { if (g_gpu) CK(cudaEventSynchronize(ev[i])); }
  void sync(cudaStream_t st) { if (g_gpu) CK(cudaStreamSynchronize(st)); }
};

// ---- pipelines ----------------------------------------------------------------------------------------
struct Variant {
  std::string name;
  bool streamed = true;
  std::size_t piece = 256 << 10;   // copy piece (streamed) / split (blocking)
  std::size_t head = 0;             // bytes from the front copied with head_stores and uploaded as copied (streamed)
  std::size_t tail = 0;             // bytes before the end copied with tail_stores (streamed; blocking: last chunk if > 0)
  std::size_t lag = 0;              // a plain line is uploaded once the copy is this many bytes past it
  std::size_t first = 1 * MiB;      // first upload at least this big; next ones x growth, up to umax
  double growth = 1.5;
  std::size_t umax = 16 * MiB;
  std::size_t ring = 0;             // pinned staging ring (0: the whole file)
  int mid = kPlain;                 // stores between head and tail
  bool populate = false;            // MAP_POPULATE the mapping (inside the timing)
  std::size_t pf = 4096;            // prefetch distance of kNt64
  int copy_threads = 0;             // streamed: threads that copy (0: all workers)
  int head_stores = kDemote;        // stores of the head
  int tail_stores = kDemote;        // stores of the tail (blocking: of the last chunk when tail > 0)
  std::size_t chunk_gate = 0;       // streamed: past the head, upload whole chunks of this size once copied (0: off)
};

struct Result { double total = 0, first_upload_at = 0, copy_done_at = 0; };

Result run_blocking(Gpu& g, Pool& pool, const char* file, std::size_t total, const Variant& v) {
  const std::size_t chunk = 16 * MiB, ring = 4 * chunk;
  const int nchunks = int((total + chunk - 1) / chunk);
  Result r;
  const auto t0 = Clock::now();
  Map m(file, total, v.populate);
  for (int c = 0; c < nchunks; ++c) {
    const std::size_t off = std::size_t(c) * chunk, n = std::min(chunk, total - off);
    if (c >= 4) g.wait(c - 4);
    char* dst = g.stage + (off % ring);
    const int st = (c + 1 == nchunks && v.tail) ? v.tail_stores : v.mid;
    const std::size_t sp = v.piece;
    const int np = int((n + sp - 1) / sp);
    pool.run(np, [&](int i) {
      const std::size_t o = std::size_t(i) * sp;
      copy_with(st, dst + o, m.p + off + o, std::min(sp, n - o));
    });
    if (c == 0) r.first_upload_at = ms_since(t0);
    g.upload(off, dst, n, g.s);
    g.record(c, g.s);
  }
  r.copy_done_at = ms_since(t0);
  g.sync(g.s);
  r.total = ms_since(t0);
  return r;
}

Result run_streamed(Gpu& g, Pool& pool, const char* file, std::size_t total, const Variant& v) {
  const std::size_t P = v.piece;
  const int np = int((total + P - 1) / P);
  const std::size_t ring = v.ring ? v.ring : (total + P - 1) / P * P;
  static std::vector<std::atomic<unsigned char>> done_v(4096);
  if (std::size_t(np) > done_v.size()) { std::fprintf(stderr, "too many pieces\n"); std::exit(1); }
  for (int i = 0; i < np; ++i) done_v[i].store(0, std::memory_order_relaxed);
  std::atomic<std::size_t> freed{0};  // bytes whose uploads completed (ring reuse)
  Result r;
  const auto t0 = Clock::now();
  Map m(file, total, v.populate);
  auto piece_job = [&](int i) {
    const std::size_t off = std::size_t(i) * P, n = std::min(P, total - off);
    if (off + n > ring) while (freed.load(std::memory_order_acquire) < off + n - ring) _mm_pause();
    const int st = off < v.head ? v.head_stores : off + n > total - std::min(total, v.tail) ? v.tail_stores : v.mid;
    copy_with(st, g.stage + (off % ring), m.p + off, n);
    done_v[i].store(1, std::memory_order_release);
  };
  std::atomic<int> limited_next{0};
  if (v.copy_threads) {
    pool.start(v.copy_threads, [&](int) { for (int i; (i = limited_next.fetch_add(1)) < np;) piece_job(i); });
  } else {
    pool.start(np, piece_job);
  }
  // Calling thread: enqueue uploads as bytes become ready.
  std::size_t issued = 0, U = v.first;
  int prefix = 0;  // pieces done in order
  struct Up { std::size_t end; int ev; };
  std::vector<Up> ups;
  std::size_t ups_done = 0;
  int nev = 0;
  bool first = true;
  while (issued < total) {
    while (prefix < np && done_v[prefix].load(std::memory_order_acquire)) ++prefix;
    const std::size_t pre = std::min(total, std::size_t(prefix) * P);
    std::size_t allowed = pre;
    if (pre < total && v.lag) {
      // Plain lines (between head and tail) need the copy `lag` bytes past them.
      const std::size_t lagged = pre > v.lag ? pre - v.lag : 0;
      allowed = std::max(std::min(pre, v.head), lagged);
    }
    if (pre < total && v.chunk_gate && pre > v.head) allowed = std::max(v.head, pre / v.chunk_gate * v.chunk_gate);
    // Never across the ring's wrap.
    std::size_t want = allowed;
    if (v.ring) want = std::min(want, (issued / ring + 1) * ring);
    if (want > issued && (want - issued >= U || want == total || (v.ring && want % ring == 0))) {
      const std::size_t n = want - issued;
      if (first) { r.first_upload_at = ms_since(t0); first = false; }
      g.upload(issued, g.stage + (issued % ring), n, g.s);
      g.record(nev, g.s);
      ups.push_back({want, nev});
      ++nev;
      issued = want;
      U = std::min<std::size_t>(v.umax, std::size_t(double(U) * v.growth));
    }
    while (ups_done < ups.size() && g.query(ups[ups_done].ev)) freed.store(ups[ups_done++].end, std::memory_order_release);
    if (prefix == np) r.copy_done_at = r.copy_done_at ? r.copy_done_at : ms_since(t0);
    _mm_pause();
  }
  pool.finish(false);
  if (!r.copy_done_at) r.copy_done_at = ms_since(t0);
  g.sync(g.s);
  r.total = ms_since(t0);
  return r;
}

std::string cpu_info() {
  std::string out;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  bool model = false, flags = false;
  while (std::getline(f, line)) {
    if (!model && line.rfind("model name", 0) == 0) { out += line + "\n"; model = true; }
    if (!flags && line.rfind("flags", 0) == 0) {
      flags = true;
      for (const char* fl : {"cldemote", "clwb", "avx512f", "movdir64b", "hypervisor"})
        out += std::string("  ") + fl + ": " + (line.find(std::string(" ") + fl) != std::string::npos ? "yes" : "no") + "\n";
    }
  }
  for (int i = 0; i < 5; ++i) {
    std::ifstream lv("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/level");
    std::ifstream sz("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::ifstream ty("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/type");
    std::string a, b, c;
    if (lv >> a && sz >> b && ty >> c) out += "  cache L" + a + " " + c + " " + b + "\n";
  }
  out += "  threads: " + std::to_string(std::thread::hardware_concurrency()) + "\n";
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: spp FILE [rounds] [--no-gpu]\n"); return 2; }
  const char* file = argv[1];
  int rounds = argc > 2 && argv[2][0] != '-' ? std::atoi(argv[2]) : 7;
  bool wc = false;  // --wc: the staging buffer is write-combined pinned memory (cudaHostAllocWriteCombined)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-gpu")) g_gpu = false;
    if (!std::strcmp(argv[i], "--wc")) wc = true;
  }
  struct stat sb {};
  if (stat(file, &sb) != 0) { std::perror(file); return 1; }
  const std::size_t total = std::size_t(sb.st_size) / 4096 * 4096;
  std::printf("# staging pipeline probe: %s, %.1f MB, %d rounds%s\n%s", file, total / 1e6, rounds, g_gpu ? "" : " (no GPU)",
              cpu_info().c_str());
  Gpu g;
  const std::size_t cap = total + 16 * MiB;
  if (g_gpu) {
    CK(cudaMalloc(&g.dev, cap));
    if (wc) CK(cudaHostAlloc(reinterpret_cast<void**>(&g.stage), cap, cudaHostAllocWriteCombined));
    else CK(cudaMallocHost(&g.stage, cap));
    CK(cudaMallocHost(&g.other, cap));
    CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g.s2, cudaStreamNonBlocking));
    g.ev.resize(1024);
    for (auto& e : g.ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    g.stage = (char*)aligned_alloc(4096, cap);
    g.other = (char*)aligned_alloc(4096, cap);
  }
  std::memset(g.stage, 1, cap);
  std::memset(g.other, 2, cap);
  { Map warm(file, total, false); volatile long s = 0; for (std::size_t i = 0; i < total; i += 4096) s += warm.p[i]; }
  Pool pool(int(std::thread::hardware_concurrency()) - 1);
  const int threads = int(pool.t.size()) + 1;

  // 1. pinned upload alone
  if (g_gpu) {
    std::vector<double> t;
    for (int r = 0; r < 10; ++r) {
      const auto t0 = Clock::now();
      g.upload(0, g.other, total, g.s);
      g.sync(g.s);
      t.push_back(ms_since(t0));
    }
    std::printf("pinned upload of %.1f MB alone: %.3f ms (%.1f GB/s)\n", total / 1e6, median(t), total / 1e6 / median(t));
    t.clear();
    for (int r = 0; r < 10; ++r) {
      const auto t0 = Clock::now();
      g.upload(0, g.stage, total, g.s);
      g.sync(g.s);
      t.push_back(ms_since(t0));
    }
    std::printf("upload of %.1f MB from the staging buffer (%s) alone: %.3f ms (%.1f GB/s)\n", total / 1e6,
                wc ? "write-combined" : "cudaMallocHost", median(t), total / 1e6 / median(t));
  }
  // 2. copy alone / with a concurrent upload, fresh mapping -> pinned, %d threads, 256 KiB pieces
  std::printf("\nhost copy of the file, %d threads, 256 KiB pieces (median of %d):\n| stores | mapping | alone (GB/s) | during an upload (GB/s) | that upload (GB/s) |\n|---|---|---|---|---|\n",
              threads, rounds);
  for (int st : {kPlain, kDemote, kStream})
    for (bool pop : {false, true}) {
      std::vector<double> alone, with, upl;
      for (int r = 0; r < rounds; ++r)
        for (bool concurrent : {false, true}) {
          Map m(file, total, pop);
          if (concurrent) g.upload(0, g.other, total, g.s);
          const auto t0 = Clock::now();
          const std::size_t P = 256 << 10;
          pool.run(int((total + P - 1) / P), [&](int i) {
            const std::size_t o = std::size_t(i) * P;
            copy_with(st, g.stage + o, m.p + o, std::min(P, total - o));
          });
          const double c = ms_since(t0);
          g.sync(g.s);
          const double u = ms_since(t0);
          (concurrent ? with : alone).push_back(total / 1e6 / c);
          if (concurrent) upl.push_back(total / 1e6 / u);
        }
      std::printf("| %s | %s | %.1f | %.1f | %.1f (the upload ends after the copy) |\n", store_name(st), pop ? "populated (MAP_POPULATE, not timed)" : "fresh",
                  median(alone), median(with), median(upl));
    }
  // 2b. copy kernels, fresh mapping, alone and during an upload
  {
    const int fd = open(file, O_RDONLY);
    struct K { std::string name; std::function<void(char*, const char*, std::size_t, std::size_t)> f; };
    std::vector<K> ks = {
      {"memcpy", [](char* d, const char* s, std::size_t n, std::size_t) { std::memcpy(d, s, n); }},
      {"nt 64-byte", [](char* d, const char* s, std::size_t n, std::size_t) { copy_nt512(d, s, n, 0); }},
      {"nt 64-byte, 2 streams, prefetch 4 KiB", [](char* d, const char* s, std::size_t n, std::size_t) { copy_nt512_2(d, s, n, 4096); }},
      {"pread (kernel copy)", [fd](char* d, const char*, std::size_t n, std::size_t off) { if (pread(fd, d, n, off) != ssize_t(n)) std::abort(); }},
    };
    for (int hint : {0, 1, 2})
      for (std::size_t pf : {1024, 2048, 4096, 8192, 16384, 32768}) {
        if (hint && pf != 4096 && pf != 16384) continue;
        ks.push_back({"nt 64-byte + prefetch" + std::string(hint == 0 ? "t0 " : hint == 1 ? "t1 " : "nta ") + std::to_string(pf),
                      [pf, hint](char* d, const char* s, std::size_t n, std::size_t) { copy_nt512(d, s, n, pf, hint); }});
      }
    std::printf("\ncopy kernels, %d threads, fresh mapping -> pinned (median of %d):\n| kernel | piece | alone (GB/s) | during an upload (GB/s) |\n|---|---|---|---|\n", threads, rounds);
    for (const K& k : ks)
      for (std::size_t P : {std::size_t(256) << 10, std::size_t(1) << 20, std::size_t(4) << 20}) {
        if (P != (1u << 20) && k.name.find("nt 64-byte + prefetcht0 4096") != 0) continue;
        std::vector<double> alone, with;
        for (int r = 0; r < rounds; ++r)
          for (bool concurrent : {false, true}) {
            Map m(file, total, false);
            if (concurrent) g.upload(0, g.other, total, g.s);
            const auto t0 = Clock::now();
            pool.run(int((total + P - 1) / P), [&](int i) {
              const std::size_t o = std::size_t(i) * P;
              k.f(g.stage + o, m.p + o, std::min(P, total - o), o);
            });
            (concurrent ? with : alone).push_back(total / 1e6 / ms_since(t0));
            g.sync(g.s);
          }
        std::printf("| %s | %zu KiB | %.1f | %.1f |\n", k.name.c_str(), P >> 10, median(alone), median(with));
      }
    std::printf("\nthreads scaling (nt 64-byte, 256 KiB pieces, alone, fresh mapping):");
    for (int nt : {1, 2, 4, 8, 12, 16}) {
      if (nt > threads) break;
      std::vector<double> v;
      for (int r = 0; r < rounds; ++r) {
        Map m(file, total, false);
        const std::size_t P = 256 << 10;
        const int np = int((total + P - 1) / P);
        std::atomic<int> nx{0};
        const auto t0 = Clock::now();
        pool.run(threads, [&](int w) {
          if (w >= nt) return;
          for (int i; (i = nx.fetch_add(1)) < np;) {
            const std::size_t o = std::size_t(i) * P;
            copy_nt512(g.stage + o, m.p + o, std::min(P, total - o), 0);
          }
        });
        v.push_back(total / 1e6 / ms_since(t0));
      }
      std::printf(" %d: %.1f GB/s;", nt, median(v));
    }
    std::printf("\n");
    close(fd);
  }
  // 2c. the upload while the workers do one kind of memory work (looped until the upload is done)
  if (g_gpu) {
    char* anon = (char*)aligned_alloc(4096, cap);
    std::memset(anon, 3, cap);
    struct W { const char* name; int kind; };
    const W ws[] = {{"nothing (workers spin)", 0}, {"read the mapping (fresh, sum)", 1}, {"read the mapping (populated)", 2},
                    {"nt 64-byte stores into the staging, no reads", 3}, {"nt 64-byte copy anonymous -> staging", 4},
                    {"nt 64-byte copy fresh mapping -> staging", 5}, {"memcpy fresh mapping -> staging", 6},
                    {"touch one byte per page of a fresh mapping (faults only)", 7}, {"nt 64-byte copy anonymous -> anonymous", 8},
                    {"memcpy fresh mapping -> 16 MiB ring", 9}, {"memcpy fresh mapping -> 32 MiB ring", 10},
                    {"memcpy fresh mapping -> 64 MiB ring", 11}, {"plain 64-byte + pf -> 32 MiB ring", 12},
                    {"64-byte + pf + demote -> 32 MiB ring", 13}, {"memcpy + cldemote (library) -> 32 MiB ring", 14},
                    {"nt 64-byte -> 32 MiB ring", 15}, {"64-byte + pf + demote -> 64 MiB ring", 16}};
    std::printf("\nupload of %.1f MB from a pinned buffer while %d workers loop over one kind of memory work (median of %d):\n| work | upload (ms) | GB/s | work rate (GB/s) |\n|---|---|---|---|\n",
                total / 1e6, threads - 1, rounds);
    for (const W& w : ws) {
      std::vector<double> up, rate;
      for (int r = 0; r < rounds; ++r) {
        Map m(file, total, w.kind == 2);
        std::atomic<bool> stop{false};
        std::atomic<std::size_t> bytes{0};
        const std::size_t P = 1 * MiB;
        const int np = int(total / P);
        std::atomic<int> nx{0};
        pool.start(threads - 1, [&](int) {
          volatile char sink = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            const int i = nx.fetch_add(1) % np;
            const std::size_t o = std::size_t(i) * P;
            switch (w.kind) {
              case 0: _mm_pause(); continue;
              case 1: case 2: { long acc = 0; for (std::size_t j = 0; j < P; j += 64) acc += m.p[o + j]; sink = char(acc); break; }
              case 3: { __m128i z = _mm_set1_epi8(1); for (std::size_t j = 0; j < P; j += 16) _mm_stream_si128((__m128i*)(g.stage + o + j), z); _mm_sfence(); break; }
              case 4: copy_nt512(g.stage + o, anon + o, P, 4096); break;
              case 5: copy_nt512(g.stage + o, m.p + o, P, 4096); break;
              case 6: std::memcpy(g.stage + o, m.p + o, P); break;
              case 7: { for (std::size_t j = 0; j < P; j += 4096) sink = m.p[o + j]; break; }
              case 8: copy_nt512(anon + (o + 70 * MiB) % (total - P), anon + o, P, 4096); break;
              case 9: std::memcpy(g.stage + o % (16 * MiB), m.p + o, P); break;
              case 10: std::memcpy(g.stage + o % (32 * MiB), m.p + o, P); break;
              case 11: std::memcpy(g.stage + o % (64 * MiB), m.p + o, P); break;
              case 12: copy_plain512(g.stage + o % (32 * MiB), m.p + o, P, false); break;
              case 13: copy_plain512(g.stage + o % (32 * MiB), m.p + o, P, true); break;
              case 14: copy_demote(g.stage + o % (32 * MiB), m.p + o, P); break;
              case 15: copy_nt512(g.stage + o % (32 * MiB), m.p + o, P, 4096); break;
              case 16: copy_plain512(g.stage + o % (64 * MiB), m.p + o, P, true); break;
            }
            bytes.fetch_add(P, std::memory_order_relaxed);
          }
          (void)sink;
        });
        // let the work start, then time the upload
        const auto tw = Clock::now();
        while (ms_since(tw) < 0.3) _mm_pause();
        const std::size_t b0 = bytes.load();
        const auto t0 = Clock::now();
        g.upload(0, g.other, total, g.s);
        g.sync(g.s);
        const double u = ms_since(t0);
        const std::size_t b1 = bytes.load();
        stop = true;
        pool.finish(false);
        up.push_back(u);
        rate.push_back((b1 - b0) / 1e6 / u);
      }
      std::printf("| %s | %.3f | %.1f | %.1f |\n", w.name, median(up), total / 1e6 / median(up), median(rate));
    }
    free(anon);
  }
  // 3. upload of lines just written
  if (g_gpu) {
    std::printf("\nupload of N bytes right after %d threads copied them (median of %d):\n| stores | N (MiB) | copy (ms) | upload (ms) | upload GB/s | upload of cold lines (GB/s) |\n|---|---|---|---|---|---|\n",
                threads, rounds);
    Map m(file, total, true);
    for (std::size_t mb : {1, 4, 8, 16})
      for (int st : {kPlain, kDemote, kStream, kPlain64, kDemote64}) {
        std::vector<double> cp, up, cold;
        const std::size_t N = mb * MiB, P = std::max<std::size_t>(64 << 10, N / std::size_t(2 * threads));
        for (int r = 0; r < rounds; ++r) {
          const std::size_t off = (std::size_t(r) * 17 * MiB) % (total - N);
          const auto t0 = Clock::now();
          pool.run(int((N + P - 1) / P), [&](int i) {
            const std::size_t o = std::size_t(i) * P;
            copy_with(st, g.stage + off + o, m.p + off + o, std::min(P, N - o));
          });
          cp.push_back(ms_since(t0));
          const auto t1 = Clock::now();
          g.upload(0, g.stage + off, N, g.s);
          g.sync(g.s);
          up.push_back(ms_since(t1));
          const auto t2 = Clock::now();
          g.upload(0, g.other + off, N, g.s);
          g.sync(g.s);
          cold.push_back(N / 1e6 / ms_since(t2));
        }
        std::printf("| %s | %zu | %.3f | %.3f | %.1f | %.1f |\n", store_name(st), mb, median(cp), median(up), N / 1e6 / median(up), median(cold));
      }
  }
  // 4. pipelines
  std::vector<Variant> vs;
  auto add = [&](Variant v) { vs.push_back(v); };
  { Variant b; b.streamed = false; b.name = "blocking 16 MiB chunks, plain, last demoted (library)"; b.tail = 1; add(b); }
  { Variant v; v.mid = kNt64; v.name = "streamed, nt 64 + pf 4K, first 1 MiB (whole staging)"; add(v); }
  { Variant v; v.mid = kPlain; v.ring = 64 * MiB; v.head = 16 * MiB; v.head_stores = kNt64; v.tail = 16 * MiB; v.chunk_gate = 8 * MiB;
    v.name = "hybrid: ring 64, head 16 nt64, memcpy in 8 MiB gates, last 16 demoted"; add(v); }
  for (std::size_t ring : {32 * MiB, 48 * MiB, 64 * MiB})
    for (std::size_t lag : {8 * MiB, 16 * MiB}) {
      Variant v; v.mid = kPlain; v.ring = ring; v.head = 16 * MiB; v.head_stores = kNt64; v.tail = 16 * MiB; v.lag = lag; v.umax = 8 * MiB;
      v.name = "lagged: ring " + std::to_string(ring / MiB) + ", head 16 nt64, memcpy uploaded " + std::to_string(lag / MiB) +
               " MiB behind the copy, last 16 demoted";
      add(v);
    }
  { Variant v; v.mid = kPlain; v.ring = 48 * MiB; v.head = 24 * MiB; v.head_stores = kNt64; v.tail = 16 * MiB; v.lag = 16 * MiB; v.umax = 8 * MiB;
    v.name = "lagged: ring 48, head 24 nt64, lag 16, last 16 demoted"; add(v); }
  { Variant v; v.mid = kPlain; v.ring = 48 * MiB; v.head = 16 * MiB; v.head_stores = kDemote64; v.tail = 16 * MiB; v.lag = 16 * MiB; v.umax = 8 * MiB;
    v.name = "lagged: ring 48, head 16 demote64, lag 16, last 16 demoted"; add(v); }
  { Variant v; v.mid = kPlain; v.ring = 48 * MiB; v.head = 16 * MiB; v.head_stores = kNt64; v.tail = 8 * MiB; v.lag = 16 * MiB; v.umax = 8 * MiB;
    v.name = "lagged: ring 48, head 16 nt64, lag 16, last 8 demoted"; add(v); }
  { Variant v; v.mid = kPlain; v.ring = 48 * MiB; v.head = 16 * MiB; v.head_stores = kNt64; v.tail = 16 * MiB; v.tail_stores = kNt64; v.lag = 16 * MiB; v.umax = 8 * MiB;
    v.name = "lagged: ring 48, head 16 nt64, lag 16, last 16 nt64"; add(v); }
  { Variant v; v.mid = kDemote64; v.umax = 8 * MiB; v.name = "streamed, all demote64, first 1 MiB to 8 MiB (whole staging)"; add(v); }
  for (int ct : {8, 10}) {
    Variant v; v.mid = kNt64; v.copy_threads = ct;
    v.name = "streamed, nt 64 + pf 4K, first 1 MiB, " + std::to_string(ct) + " copy threads"; add(v);
  }
  { Variant b; b.streamed = false; b.tail = 1; b.populate = true; b.name = "blocking, last demoted, MAP_POPULATE (timed)"; add(b); }
  std::vector<std::vector<Result>> res(vs.size());
  for (int r = 0; r < rounds + 1; ++r)
    for (std::size_t i = 0; i < vs.size(); ++i) {
      g_pf = vs[i].pf;
      const Result x = vs[i].streamed ? run_streamed(g, pool, file, total, vs[i]) : run_blocking(g, pool, file, total, vs[i]);
      if (r > 0) res[i].push_back(x);
    }
  std::printf("\nend to end, fresh mapping -> every byte on the device (median of %d, alternating):\n| pipeline | end to end (ms) | min | max | first upload at | copy done at |\n|---|---|---|---|---|---|\n", rounds);
  for (std::size_t i = 0; i < vs.size(); ++i) {
    std::vector<double> t, f, c;
    for (const auto& x : res[i]) { t.push_back(x.total); f.push_back(x.first_upload_at); c.push_back(x.copy_done_at); }
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f |\n", vs[i].name.c_str(), median(t), *std::min_element(t.begin(), t.end()),
                *std::max_element(t.begin(), t.end()), median(f), median(c));
  }
  // Bytes check of the last streamed run: the staging (whole-file variants) holds the file.
  {
    Variant v; v.mid = kNt64; v.ring = 32 * MiB;
    run_streamed(g, pool, file, total, v);
    Map m(file, total, false);
    std::printf("\nring staging holds the file's last bytes after a streamed run: %s\n",
                std::memcmp(g.stage + ((total - 4 * MiB) % (32 * MiB)), m.p + total - 4 * MiB, 4 * MiB) == 0 ? "yes" : "NO");
    Variant w; w.mid = kNt64;
    run_streamed(g, pool, file, total, w);
    std::printf("staging equals the file after a streamed run: %s\n", std::memcmp(g.stage, m.p, total) == 0 ? "yes" : "NO");
  }
  return 0;
}
