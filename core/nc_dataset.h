/* nc_dataset.h — labelled image datasets and their preprocessing.
 *
 * Formats: IDX (MNIST layout, gzip or plain: images `*-images-idx3-ubyte[.gz]`
 * with labels `*-labels-idx1-ubyte[.gz]`), NumPy `.npy` (float32 or uint8, C
 * order; labels in a sibling file, see nc_dataset_open), HDF5 (datasets `x`
 * and `y` in one file).  Every declared size is checked against the file's
 * real size before anything is allocated.
 *
 * Images are held as float32 [count, C, H, W] after preprocessing:
 *   x = (raw · scale − mean[c]) / std[c]
 * with scale = 1/255 for uint8 data and 1 for float data unless set. */
#ifndef NC_DATASET_H
#define NC_DATASET_H

#include "nc_tensor.h"

typedef enum nc_split { NC_SPLIT_TEST, NC_SPLIT_TRAIN } nc_split;

#define NC_MAX_CHANNELS 16

typedef struct nc_preprocess {
    float scale;               /* 0 = automatic: 1/255 for uint8, 1 for float */
    int n_mean, n_std;         /* 0, 1 (all channels) or C values             */
    float mean[NC_MAX_CHANNELS];
    float std[NC_MAX_CHANNELS];
} nc_preprocess;

typedef struct nc_dataset {
    int64_t count;             /* number of samples                          */
    int channels, height, width;
    float *images;             /* [count, C, H, W], preprocessed             */
    int32_t *labels;           /* [count]                                    */
    int num_classes;           /* max label + 1                              */
    char path[1024];           /* what was opened, for messages              */
    char format[16];           /* "idx", "npy", "hdf5", "stream"             */
    struct nc_dataset_stream *stream; /* a stream's state (images, labels NULL), else NULL */
} nc_dataset;

/* Opens a dataset.  `spec` is one of:
 *   - "fashion-mnist" (or "mnist"-style name): the folder
 *     /usr/share/datasets/fashion-mnist of Debian's dataset-fashion-mnist;
 *   - a folder holding IDX files (t10k-* for the test split, train-* for train);
 *   - an IDX images file (labels found by replacing "images-idx3" with "labels-idx1");
 *   - a `.npy` images file, labels in `<stem>_labels.npy` or `<stem>.labels.npy`
 *     (or, for x*.npy, the same name with y);
 *   - an HDF5 file (`.h5`, `.hdf5`) with datasets `x` and `y`.
 * `limit` > 0 keeps only the first `limit` samples.  pp may be NULL (defaults). */
nc_status nc_dataset_open(const char *spec, nc_split split, const nc_preprocess *pp, int64_t limit,
                          nc_dataset **out, nc_error *err);
void nc_dataset_free(nc_dataset *ds); /* NULL is a no-op */

/* Copies samples [first, first+n) into a batch tensor [n, C, H, W] (allocated
 * by the caller with at least that many elements) and labels (may be NULL). */
void nc_dataset_batch(const nc_dataset *ds, int64_t first, int64_t n, float *images, int32_t *labels);

/* ---- streams: samples the caller hands over batch by batch ----------------
 *
 * A stream is a dataset whose samples are not held: a caller (the Python
 * package's data loader, for one) gives them a batch at a time, and the
 * dataset keeps only the batches that the current read needs.  Every reader
 * of datasets goes through nc_dataset_batch and reads forward from the first
 * sample; a read before what is buffered starts the stream again (rewind).
 * A stream's `images` and `labels` are NULL.
 *
 * A failing stream (the caller's error, a NaN, a label out of range, a
 * batch of the wrong size, fewer samples than declared) keeps its first
 * failure; nc_dataset_batch then gives zeros, and whoever drives the job
 * asks nc_dataset_stream_status between batches (the pipeline runner does)
 * and stops with the stream's message. */
typedef struct nc_dataset_source {
    int64_t count;             /* samples in one pass                            */
    int channels, height, width;
    int num_classes;           /* labels must lie in [0, num_classes)            */
    const char *name;          /* for messages ("the Python loader")             */
    /* The next batch: sets *images ([n, C, H, W] float32, preprocessed) and
     * *labels ([n]) to memory that stays valid until the next call, and *n.
     * Returns 1 for a batch, 0 at the end of the pass, -1 on failure (the
     * message in err). */
    int (*next)(void *user, const float **images, const int32_t **labels, int64_t *n, nc_error *err);
    /* Starts a new pass from the first sample: 0, or -1 with the message. */
    int (*rewind)(void *user, nc_error *err);
    void *user;
} nc_dataset_source;

/* A stream over `src` (copied; src->user must outlive the dataset). */
nc_status nc_dataset_new_stream(const nc_dataset_source *src, nc_dataset **out, nc_error *err);
/* NC_OK, or the stream's first failure with its message.  Files: NC_OK. */
nc_status nc_dataset_stream_status(const nc_dataset *ds, nc_error *err);

/* Parses "0.5" or "0.485,0.456,0.406" into values; returns the count, or -1. */
int nc_parse_float_list(const char *text, float *values, int max_values);

/* Reads a NumPy .npy array (float32, float64, uint8, int32 or int64, C order,
 * little-endian) as float32 into a new tensor of the file's shape (≤ 5 dims). */
nc_status nc_npy_read(const char *path, nc_tensor **out, nc_error *err);
/* Writes a float32 tensor as .npy (temporary file, then rename). */
nc_status nc_npy_write(const char *path, const nc_tensor *t, nc_error *err);

/* The folder Debian's dataset-fashion-mnist installs. */
#define NC_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#endif
