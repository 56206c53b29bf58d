// nc_gpu_faults.cu — fault injection for the tests (NC_GPU_FAULT, see
// nc_gpu.h): every device allocation of the engine goes through
// nc_gpu_fault_malloc and every checked launch through nc_gpu_fault_launch.
#include "gpu/nc_gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace {


struct fault_plan {
    long oom_at = 0, launch_at = 0; // 0 = never
    bool oom_after = false;         // "oom:N+": the N-th allocation and every later one
    bool refuse_graph = false;      // "graph": cuDNN's graph API refuses every plan
    bool spoil_capture = false;     // "capture": every CUDA graph capture of a pass fails
    long allocs = 0, launches = 0;
    std::string text;               // the NC_GPU_FAULT the counts belong to
};

// The plan of NC_GPU_FAULT ("oom:N", "launch:N" or both, comma-separated);
// counting starts again whenever the variable changes (tests set it per case).
fault_plan &faults()
{
    static fault_plan f;
    const char *env = nc_gpu_options_get().fault;
    std::string text = env ? env : "";
    if (text != f.text) {
        f = fault_plan();
        f.text = text;
        for (size_t at = 0; at < text.size();) {
            size_t end = text.find(',', at);
            std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
            if (item.compare(0, 4, "oom:") == 0) {
                char *end = nullptr;
                f.oom_at = strtol(item.c_str() + 4, &end, 10);
                f.oom_after = end && *end == '+';
            }
            else if (item.compare(0, 7, "launch:") == 0)
                f.launch_at = strtol(item.c_str() + 7, nullptr, 10);
            else if (item == "graph")
                f.refuse_graph = true;
            else if (item == "capture")
                f.spoil_capture = true;
            at = end == std::string::npos ? text.size() : end + 1;
        }
    }
    return f;
}

} // namespace


cudaError_t nc_gpu_fault_malloc(void **p, size_t bytes)
{
    fault_plan &f = faults();
    ++f.allocs;
    if (f.oom_at > 0 && (f.allocs == f.oom_at || (f.oom_after && f.allocs > f.oom_at))) {
        *p = nullptr;
        return cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, bytes);
}

int nc_gpu_fault_graph(void) { return faults().refuse_graph; }

int nc_gpu_fault_capture(void) { return faults().spoil_capture; }

cudaError_t nc_gpu_fault_launch(cudaError_t e)
{
    fault_plan &f = faults();
    if (e == cudaSuccess && f.launch_at > 0 && ++f.launches == f.launch_at)
        return cudaErrorLaunchFailure;
    return e;
}
