// nc_gpu_train_graph.h — the GPU trainer's steps as recorded CUDA graphs
// (C++, gpu/ only): the table behind the backend's step_begin / step_end
// (sim/nc_train_backend.h), kept by nc_gpu_train.cu.
//
// A step of one trainer at one batch size queues the same kernels, cuDNN and
// cuBLAS calls on the same memory every time.  Its first step runs as
// queued (cuDNN plans its convolutions then, and the work buffers reach
// their size); the second is captured from the stream and run as one graph,
// and every later one replays it: one launch for the hundreds of nodes of a
// step.  A graph holds the addresses its step used, so it is valid only
// while none of the backend's memory has been freed since it was recorded:
// the backend reports each free (nc_step_graphs_freed, and a count of its
// own at begin), and after a free every graph is dropped (each shape starts
// again from a step as queued).
#ifndef NC_GPU_TRAIN_GRAPH_H
#define NC_GPU_TRAIN_GRAPH_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

struct nc_step_graphs;

nc_step_graphs *nc_step_graphs_new(void);       // NULL when out of memory
void nc_step_graphs_free(nc_step_graphs *s);    // NULL is a no-op; the stream must be idle

// What to do with the work of the step of (owner, batch) that follows:
// NC_STEP_RUN, NC_STEP_RECORD (the stream is now capturing) or
// NC_STEP_REPLAY (sim/nc_train_backend.h).  other_frees: a count of freed
// buffers kept elsewhere (the cuDNN convolutions').
int nc_step_graphs_begin(nc_step_graphs *s, cudaStream_t stream, uintptr_t owner, int64_t batch,
                         uint64_t other_frees);

// After the step's work.  Returns 1 when the recording failed (the caller
// queues the work again; this shape is not recorded again until a free
// starts every shape over), else 0; *launch
// gets the error of the graph's launch (cudaSuccess when it ran or nothing
// was due).
int nc_step_graphs_end(nc_step_graphs *s, cudaStream_t stream, cudaError_t *launch);

// A buffer of the backend was freed (s may be NULL).
void nc_step_graphs_freed(nc_step_graphs *s);

// While a step is recorded, a failure voids the recording instead of the
// backend (nothing ran: the step runs again as queued, where the failure, if
// it is one, is recorded as usual): keeps the first message and returns
// true.  False when no step is being recorded (s may be NULL).
bool nc_step_graphs_spoil(nc_step_graphs *s, const char *message);

// One line per shape: its graph (nodes, replays) or why it runs as queued.
void nc_step_graphs_describe(const nc_step_graphs *s, char *buf, size_t size);

#endif
