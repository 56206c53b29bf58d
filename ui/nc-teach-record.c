/* nc-teach-record.c — one image with every spike kept (see header). */
#include "nc-teach-record.h"

#include <string.h>

const char *const nc_fashion_mnist_classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

typedef struct {
    NcTeachData *teach;
    int *layer_of_node;      /* [n_nodes]: teach layer or −1 */
    int *steps_seen;         /* [n_layers]                   */
} Recorder;

/* Observer: rows = T·1 (one image, time-major); the steps of a node may come
 * in several calls, in order. */
static void observe(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    Recorder *r = user;
    int layer = r->layer_of_node[node];
    if (layer < 0)
        return;
    NcTeachLayer *L = &r->teach->layers[layer];
    if (per_row != L->neurons)
        return;
    for (int64_t k = 0; k < rows && r->steps_seen[layer] < r->teach->T; k++, r->steps_seen[layer]++) {
        uint8_t *dst = L->spikes + (size_t)r->steps_seen[layer] * L->neurons;
        for (int64_t i = 0; i < per_row; i++)
            dst[i] = data[k * per_row + i] != 0.0f;
    }
}

static void add_layers(NcTeachData *t, const nc_net *net, int *layer_of_node)
{
    size_t budget = NC_TEACH_MAX_BYTES;
    t->layers = g_new0(NcTeachLayer, net->n_nodes);
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        layer_of_node[i] = -1;
        size_t bytes = (size_t)nc_node_numel(n) * (size_t)t->T;
        if (n->kind != NC_NODE_NEURON || n->neuron.model != NC_NEURON_IF || bytes > budget)
            continue;
        budget -= bytes;
        NcTeachLayer *L = &t->layers[t->n_layers];
        L->name = g_strdup(n->name);
        L->node = i, L->ndim = n->ndim, L->neurons = nc_node_numel(n);
        memcpy(L->shape, n->shape, sizeof L->shape);
        L->spikes = g_malloc0(bytes);
        layer_of_node[i] = t->n_layers++;
    }
}

/* Evidence after t steps = Σ_{s≤t} output_s (the output node accumulates). */
static void set_evidence(NcTeachData *t, const nc_tensor *out)
{
    t->classes = (int)(nc_tensor_numel(out) / t->T);
    t->evidence = g_new0(double, (size_t)t->T * t->classes);
    for (int s = 0; s < t->T; s++)
        for (int k = 0; k < t->classes; k++)
            t->evidence[s * t->classes + k] =
                (s ? t->evidence[(s - 1) * t->classes + k] : 0) + out->data[(size_t)s * t->classes + k];
}

nc_status nc_teach_record(nc_engine *engine, const nc_net *net, const nc_dataset *ds, int T, nc_encoding encoding,
                          nc_progress_fn progress, void *progress_user, NcTeachData **out, nc_error *err)
{
    NcTeachData *t = nc_teach_data_new();
    t->T = T;
    t->channels = ds->channels, t->height = ds->height, t->width = ds->width;
    int64_t shape[4] = {1, ds->channels, ds->height, ds->width};
    nc_tensor *input = nc_tensor_new(4, shape), *output = NULL;
    int32_t label = 0;
    Recorder r = {t, g_new0(int, net->n_nodes), NULL};
    add_layers(t, net, r.layer_of_node);
    r.steps_seen = g_new0(int, MAX(t->n_layers, 1));
    nc_status st = input ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory for the teaching image");
    if (st == NC_OK) {
        nc_dataset_batch(ds, 0, 1, input->data, &label);
        t->label = label;
        t->image = g_memdup2(input->data, (size_t)nc_tensor_numel(input) * sizeof(float));
        nc_observer ob = {observe, NULL, &r};
        nc_run_options ro = {.mode = NC_MODE_SNN, .T = T, .encoding = encoding, .seed = 1, .observer = &ob,
                             .progress = progress, .progress_user = progress_user};
        st = nc_engine_forward(engine, input, &ro, &output, err);
    }
    if (st == NC_OK)
        set_evidence(t, output);
    nc_tensor_free(input);
    nc_tensor_free(output);
    g_free(r.layer_of_node);
    g_free(r.steps_seen);
    if (st != NC_OK) {
        nc_teach_data_unref(t);
        return st;
    }
    *out = t;
    return NC_OK;
}
