/* nc-model-file.c — loading models off the main thread (see header). */
#include "nc-model-file.h"

#include "../core/nc_nir.h"
#include "../core/nc_onnx.h"
#include "../core/nc_project.h"
#include "nc-job.h"

void nc_model_file_free(NcModelFile *file)
{
    if (!file)
        return;
    nc_net_free(file->net);
    g_free(file->path);
    g_free(file);
}

gboolean nc_model_file_is_supported(const char *path)
{
    return g_str_has_suffix(path, ".onnx") || g_str_has_suffix(path, ".ncsnn") || g_str_has_suffix(path, ".nir");
}

static nc_status load_project(NcModelFile *file, nc_error *err)
{
    nc_project *p = NULL;
    nc_status st = nc_project_load(file->path, &p, err);
    if (st != NC_OK)
        return st;
    file->net = p->net;
    p->net = NULL; /* taken */
    file->has_pp = p->has_preprocess;
    file->pp = p->preprocess;
    nc_project_free(p);
    return NC_OK;
}

static void load_worker(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    NcModelFile *file = g_new0(NcModelFile, 1);
    file->path = g_strdup(task_data);
    nc_error err = {0};
    nc_status st;
    if (g_str_has_suffix(file->path, ".ncsnn"))
        st = load_project(file, &err);
    else if (g_str_has_suffix(file->path, ".onnx"))
        st = nc_onnx_load(file->path, NULL, &file->net, &err);
    else if (g_str_has_suffix(file->path, ".nir"))
        st = nc_nir_load(file->path, NULL, &file->net, NULL, &err);
    else
        st = nc_fail(&err, NC_ERR_UNSUPPORTED,
                     "%s: the workbench opens ONNX models (.onnx), NIR graphs (.nir) and projects (.ncsnn); export "
                     "the model from PyTorch with torch.onnx.export",
                     file->path);
    if (st != NC_OK) {
        nc_model_file_free(file);
        g_task_return_new_error(task, NC_JOB_ERROR, st, "%s", err.message);
        return;
    }
    g_task_return_pointer(task, file, (GDestroyNotify)nc_model_file_free);
}

void nc_model_file_load_async(const char *path, GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data)
{
    GTask *task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, nc_model_file_load_async);
    g_task_set_task_data(task, g_strdup(path), g_free);
    g_task_run_in_thread(task, load_worker);
    g_object_unref(task);
}

NcModelFile *nc_model_file_load_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}
