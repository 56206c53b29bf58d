/* test_raster_spill.c — the workbench's raster past the memory budget
 * (ui/nc-raster-spill.h): a record keeps 2 samples in memory and hands every
 * batch to a spill file; each spilled sample read back must equal what a
 * record keeping all of them in memory holds, also when a sample's bits do
 * not start on a byte (3 neurons × 5 steps = 15 bits); samples outside the
 * file are refused with a message.  No display needed. */
#include "nc_test.h"
#include "nc_test_util.h"

#include "nc-raster-spill.h"

enum { NEURONS = 3, T5 = 5, BATCH = 4, BATCHES = 5, KEPT = 18 };

/* input [3] → IF (θ = 1) → output */
static nc_net *if_net(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){NEURONS});
    int n = add_neuron(net, "if", x, NC_NEURON_IF);
    const float theta = 1.0f;
    nc_neuron_set_threshold(&net->nodes[n].neuron, 1, &theta, NULL);
    add1(net, NC_NODE_OUTPUT, "out", n);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

/* The sink makes the spill on the first batch, as the workbench's job does. */
typedef struct holder {
    NcRasterSpill *spill;
} holder;

static void to_spill(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons, int T,
                     const uint8_t *bits)
{
    holder *h = user;
    if (!h->spill)
        h->spill = nc_raster_spill_new(rec, nc_record_get_spec(rec)->raster_samples, 2 + KEPT);
    nc_raster_spill_sink(h->spill, rec, layer, first, n, neurons, T, bits);
}

/* One batch of random spikes, the same into both records. */
static void feed(nc_record *a, nc_record *b, int node)
{
    float spikes[T5][BATCH][NEURONS], out[T5][BATCH][2] = {{{0}}};
    int32_t labels[BATCH] = {0, 1, 0, 1};
    for (int t = 0; t < T5; t++)
        for (int s = 0; s < BATCH; s++)
            for (int j = 0; j < NEURONS; j++)
                spikes[t][s][j] = rnd() % 3 == 0 ? 1.0f : 0.0f;
    nc_record *recs[2] = {a, b};
    for (int r = 0; r < 2; r++) {
        nc_error err;
        NC_CHECK(nc_record_begin_batch(recs[r], BATCH, &err) == NC_OK, "%s", err.message);
        nc_record_observe_snn(recs[r], node, &spikes[0][0][0], T5 * BATCH, NEURONS);
        nc_record_observe_snn_input(recs[r], node, &spikes[0][0][0], T5 * BATCH, NEURONS);
        NC_CHECK(nc_record_end_batch(recs[r], labels, &out[0][0][0], 2, &err) == NC_OK, "%s", err.message);
    }
}

static void test_spilled_samples_read_back(void)
{
    nc_net *net = if_net();
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    holder h = {NULL};
    nc_record_spec small = {.raster_samples = 2, .raster_neurons = NEURONS, .raster_sink = to_spill,
                            .raster_sink_user = &h};
    nc_record_spec whole = {.raster_samples = BATCH * BATCHES, .raster_neurons = NEURONS};
    nc_record *rec = NULL, *ref = NULL;
    nc_error err;
    NC_CHECK(nc_record_new(net, T5, &small, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_new(net, T5, &whole, &ref, &err) == NC_OK, "%s", err.message);
    for (int b = 0; rec && ref && b < BATCHES; b++)
        feed(rec, ref, 1);
    NC_CHECK(h.spill && !nc_raster_spill_get_error(h.spill), "spill made: %s",
             h.spill ? nc_raster_spill_get_error(h.spill) : "none");
    if (!h.spill || nc_raster_spill_get_error(h.spill))
        goto done;
    NC_CHECK(nc_raster_spill_first(h.spill) == 2 && nc_raster_spill_samples(h.spill) == KEPT,
             "samples 2..19 in the file (%lld)", (long long)nc_raster_spill_samples(h.spill));
    NC_CHECK(nc_raster_spill_bytes(h.spill) == KEPT * 2, "one 15-bit block (2 bytes) per sample");
    nc_raster all;
    nc_record_raster(ref, 0, &all);
    int same = 1, spikes = 0;
    for (int64_t s = 2; s < 2 + KEPT; s++) {
        uint8_t bits[2] = {0, 0};
        g_autoptr(GError) error = NULL;
        NC_CHECK(nc_raster_spill_read(h.spill, 0, s, bits, &error), "read %lld: %s", (long long)s,
                 error ? error->message : "");
        for (int j = 0; j < NEURONS; j++)
            for (int t = 0; t < T5; t++) {
                int b = j * T5 + t, bit = (bits[b >> 3] >> (b & 7)) & 1;
                same &= bit == nc_raster_spike(&all, (int)s, j, t);
                spikes += bit;
            }
    }
    NC_CHECK(same && spikes > 0, "every spilled sample equals the in-memory raster (%d spikes)", spikes);
    g_autoptr(GError) before = NULL, after = NULL;
    uint8_t bits[2];
    NC_CHECK(!nc_raster_spill_read(h.spill, 0, 1, bits, &before) && before, "a sample kept in memory is refused");
    NC_CHECK(!nc_raster_spill_read(h.spill, 0, 2 + KEPT, bits, &after) && after, "a sample past the file: refused");
    if (after)
        printf("# %s\n", after->message);
done:
    nc_raster_spill_unref(h.spill);
    nc_record_free(rec);
    nc_record_free(ref);
    nc_net_free(net);
}

int main(void)
{
    NC_RUN(test_spilled_samples_read_back);
    return nc_test_done();
}
