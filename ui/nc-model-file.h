/* nc-model-file.h — opening a model in a worker thread: ONNX (.onnx), a NIR
 * graph (.nir) or a converted project (.ncsnn), the same readers the CLI
 * uses.  Large models
 * take a while to parse; the window stays responsive meanwhile. */
#pragma once

#include <gio/gio.h>

#include "../core/nc_dataset.h"
#include "../core/nc_net.h"

G_BEGIN_DECLS

typedef struct {
    char *path;
    nc_net *net;          /* owned */
    gboolean has_pp;      /* a project stores its preprocessing           */
    nc_preprocess pp;
} NcModelFile;

void nc_model_file_free(NcModelFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NcModelFile, nc_model_file_free)

/* Patterns of the files the workbench opens, for file choosers and drops. */
gboolean nc_model_file_is_supported(const char *path);

void nc_model_file_load_async(const char *path, GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data);
/* NULL with an error that names the file and says what to do. */
NcModelFile *nc_model_file_load_finish(GAsyncResult *result, GError **error);

G_END_DECLS
