// Transitional: the SIFT pool is the library's one WorkPool now (core/thread_pool.hpp).
#pragma once
#include "core/thread_pool.hpp"
namespace spectrasift::cpu { using SiftThreadPool = WorkPool; }
