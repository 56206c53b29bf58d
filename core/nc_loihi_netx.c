/* nc_loihi_netx.c — the quantised network as a lava-dl netx HDF5 file
 * (conversion.md §5.4; see nc_loihi.h for what is written and why). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_h5util.h"
#include "nc_loihi.h"

typedef struct netx_ctx {
    const nc_loihi_net *q;
    const nc_loihi_netx_options *opts;
    nc_loihi_notes *notes;
    nc_error *err;
    hid_t layers;   /* the /layer group */
    int next;       /* next layer group index */
    int input_bits; /* fractional bits of the input payload netx's first layer expects */
} netx_ctx;

static nc_status export_fail(netx_ctx *c, int node, const char *what)
{
    const nc_node *n = &c->q->net->nodes[node];
    return nc_fail(c->err, NC_ERR_UNSUPPORTED, "netx export, node '%s' (%s): %s", n->name, nc_node_kind_name(n->kind),
                   what);
}

static nc_status write_scalar_i64(hid_t g, const char *name, int64_t v, nc_error *err)
{
    return nc_h5_write_i64(g, name, 0, NULL, &v, err);
}

static nc_status write_pair(hid_t g, const char *name, int64_t a, int64_t b, nc_error *err)
{
    int64_t shape[1] = {2}, v[2] = {a, b};
    return nc_h5_write_i64(g, name, 1, shape, v, err);
}

/* A node's shape as netx's (C, H, W) / (F,) array. */
static nc_status write_shape(hid_t g, const nc_node *n, nc_error *err)
{
    int64_t shape[1] = {n->ndim}, v[4];
    for (int d = 0; d < n->ndim; d++)
        v[d] = n->shape[d];
    return nc_h5_write_i64(g, "shape", 1, shape, v, err);
}

static nc_status new_layer(netx_ctx *c, const char *type, hid_t *g)
{
    char name[32];
    snprintf(name, sizeof name, "%d", c->next++);
    nc_status st = nc_h5_group_create(c->layers, name, g, c->err);
    if (st == NC_OK)
        st = nc_h5_write_string(*g, "type", type, c->err);
    return st;
}

/* The neuron group: CUBA configured as IF (iDecay 4096 → du = 4095, vDecay 0). */
static nc_status write_neuron(netx_ctx *c, hid_t layer, int64_t vth, int64_t v0, int graded)
{
    hid_t g = H5I_INVALID_HID;
    nc_status st = nc_h5_group_create(layer, "neuron", &g, c->err);
    if (st == NC_OK)
        st = nc_h5_write_string(g, "type", "CUBA", c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "iDecay", NC_LOIHI_IF_DU + 1, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "vDecay", NC_LOIHI_IF_DV, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "vThMant", vth, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "refDelay", 1, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "gradedSpike", graded, c->err);
    if (st == NC_OK)
        st = nc_h5_attr_string(g, "nc_reset", c->opts->reset == NC_RESET_ZERO ? "zero" : "subtract", c->err);
    if (st == NC_OK)
        st = nc_h5_attr_i64(g, "nc_v0", v0, c->err);
    nc_h5_close(&g);
    return st;
}

/* Weights over the pooled input → weights over the pool's input (the
 * transpose of a sum pool): in[c, y, x] += out[c, oy, ox] for each window
 * (c, oy, ox) that covers (y, x).  in/out: one row, [C, H, W] / [C, OH, OW]. */
static void unpool_row(const nc_node *pool, const nc_node *in_node, const int64_t *out_row, int64_t *in_row)
{
    int64_t C = in_node->shape[0], H = in_node->shape[1], W = in_node->shape[2];
    memset(in_row, 0, (size_t)(C * H * W) * sizeof *in_row);
    if (pool->kind == NC_NODE_GLOBAL_AVGPOOL) {
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t k = 0; k < H * W; k++)
                in_row[ch * H * W + k] = out_row[ch];
        return;
    }
    int64_t OH = pool->shape[1], OW = pool->shape[2];
    int dh = pool->dilation[0] > 0 ? pool->dilation[0] : 1, dw = pool->dilation[1] > 0 ? pool->dilation[1] : 1;
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int ky = 0; ky < pool->kernel[0]; ky++)
                    for (int kx = 0; kx < pool->kernel[1]; kx++) {
                        int64_t y = oy * pool->stride[0] - pool->pad[0] + (int64_t)ky * dh;
                        int64_t x = ox * pool->stride[1] - pool->pad[1] + (int64_t)kx * dw;
                        if (y >= 0 && y < H && x >= 0 && x < W)
                            in_row[(ch * H + y) * W + x] += out_row[(ch * OH + oy) * OW + ox];
                    }
}

/* The nodes on a layer's source path, nearest the population first. */
static int source_path(const nc_loihi_net *q, const nc_loihi_layer *L, int *path, int max)
{
    int n = 0;
    for (int i = q->net->nodes[L->node].inputs[0]; i != L->source && n < max; i = q->net->nodes[i].inputs[0])
        path[n++] = i;
    for (int a = 0, b = n - 1; a < b; a++, b--) {
        int t = path[a];
        path[a] = path[b];
        path[b] = t;
    }
    return n;
}

static int has_flatten(const nc_loihi_net *q, const int *path, int n)
{
    for (int k = 0; k < n; k++)
        if (q->net->nodes[path[k]].kind == NC_NODE_FLATTEN)
            return 1;
    return 0;
}

/* Dense weights over the source population: the source path's pools
 * unfolded (flattens keep the C, H, W order netx's flatten uses). */
static nc_status dense_weights(netx_ctx *c, const nc_loihi_layer *L, const int *path, int n_path, float **out,
                               int64_t *fin_out)
{
    const nc_net *net = c->q->net;
    const nc_node *w = &net->nodes[L->node];
    int64_t fout = w->weight->shape[0], fin = w->weight->shape[1], src_numel = nc_node_numel(&net->nodes[L->source]);
    int64_t big = src_numel > fin ? src_numel : fin;
    for (int k = 0; k < n_path; k++)
        big = nc_node_numel(&net->nodes[path[k]]) > big ? nc_node_numel(&net->nodes[path[k]]) : big;
    int64_t *a = malloc((size_t)big * sizeof *a), *b = malloc((size_t)big * sizeof *b);
    float *dst = malloc((size_t)(fout * src_numel) * sizeof *dst);
    if (!a || !b || !dst) {
        free(a), free(b), free(dst);
        return nc_fail(c->err, NC_ERR_MEMORY, "netx export: out of memory for the weights of '%s'", w->name);
    }
    for (int64_t o = 0; o < fout; o++) {
        for (int64_t j = 0; j < fin; j++)
            a[j] = L->weight[o * fin + j];
        for (int k = n_path - 1; k >= 0; k--) { /* from the dense's input back to the population */
            const nc_node *p = &net->nodes[path[k]];
            const nc_node *pin = &net->nodes[p->inputs[0]];
            if (p->kind == NC_NODE_FLATTEN)
                continue;
            unpool_row(p, pin, a, b);
            int64_t *t = a;
            a = b, b = t;
        }
        for (int64_t s = 0; s < src_numel; s++)
            dst[o * src_numel + s] = (float)a[s];
    }
    free(a), free(b);
    *out = dst;
    *fin_out = src_numel;
    return NC_OK;
}

/* Layer scale for netx's weight exponent 0: the engine computes
 * a_in = acc · 2^(weight_exp − input_shift); netx adds acc itself, so the
 * threshold, bias and v(0) scale by 2^s, s = input_shift − weight_exp. */
typedef struct netx_scale {
    int64_t vth;      /* vThMant                                           */
    double factor;    /* the layer's v scale against the engine's: 2^(s − weight_shift) */
    int weight_shift; /* weights divided by 2^weight_shift (0: exact)      */
} netx_scale;

/* The input payload's fractional bits for netx: the most (up to the
 * engine's) that keep the first layer's vThMant in 17 bits with its weights
 * exact: the engine's a_in = acc·2^(weight_exp − bits) becomes acc·2^(g − bits)
 * with payloads x·2^g, so vThMant = vth·2^(g − weight_exp). */
static int input_bits_for(const nc_loihi_layer *L)
{
    int k = 0;
    while (((int64_t)L->vth_mant << (k + 1)) <= NC_LOIHI_VTH_MAX)
        k++;
    int g = L->weight_exp + k;
    return g < 0 ? 0 : g > L->input_shift ? L->input_shift : g;
}

static netx_scale layer_scale(netx_ctx *c, const nc_loihi_layer *L)
{
    const nc_net *net = c->q->net;
    netx_scale s = {0};
    int sh = (L->input_shift ? c->input_bits : 0) - L->weight_exp;
    double vth = ldexp((double)L->vth_mant, sh);
    while (vth > NC_LOIHI_VTH_MAX && s.weight_shift < 16) {
        s.weight_shift++;
        vth /= 2;
    }
    s.vth = (int64_t)llround(vth);
    if (s.vth < 1)
        s.vth = 1;
    s.factor = ldexp(1.0, sh - s.weight_shift);
    if (s.weight_shift)
        nc_loihi_notes_add(c->notes, "layer '%s': netx stores no weight exponent; keeping vThMant in 17 bits "
                                     "divides its weights by 2^%d (coarser than the engine's)",
                           net->nodes[L->node].name, s.weight_shift);
    else if (sh < 0 && fabs(vth - (double)s.vth) > 1e-9)
        nc_loihi_notes_add(c->notes, "layer '%s': netx stores no weight exponent; vThMant %d·2^%d rounds to %lld",
                           net->nodes[L->node].name, L->vth_mant, sh, (long long)s.vth);
    return s;
}

static nc_status write_bias(netx_ctx *c, hid_t g, const nc_loihi_layer *L, const netx_scale *s)
{
    if (!L->n_bias)
        return NC_OK;
    float *b = malloc((size_t)L->n_bias * sizeof *b);
    if (!b)
        return nc_fail(c->err, NC_ERR_MEMORY, "netx export: out of memory");
    for (int o = 0; o < L->n_bias; o++) /* netx: bias_mant << 6 in v units */
        b[o] = (float)llround(ldexp((double)L->bias_mant[o], L->bias_exp) * s->factor / (1 << NC_LOIHI_VTH_SHIFT));
    int64_t shape[1] = {L->n_bias};
    nc_status st = nc_h5_write_f32(g, "bias", 1, shape, b, c->err);
    free(b);
    return st;
}

static float *scaled_weights(const int16_t *w, int64_t n, int shift)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    for (int64_t k = 0; f && k < n; k++)
        f[k] = (float)(shift ? 2 * llround(ldexp((double)w[k], -shift) / 2) : w[k]);
    return f;
}

static nc_status write_conv(netx_ctx *c, const nc_loihi_layer *L, const int *path, int n_path, hid_t g,
                            const netx_scale *s)
{
    const nc_net *net = c->q->net;
    const nc_node *w = &net->nodes[L->node];
    const nc_tensor *W = w->weight;
    int64_t k = 1; /* a folded average pool before the conv multiplies its kernel */
    if (n_path > 1)
        return export_fail(c, L->node, "more than one pool before a conv cannot be folded into its kernel");
    if (n_path == 1) {
        const nc_node *p = &net->nodes[path[0]], *pin = &net->nodes[p->inputs[0]];
        int ok = p->kind != NC_NODE_MAXPOOL && p->kind != NC_NODE_GLOBAL_AVGPOOL && p->kernel[0] == p->kernel[1] &&
                 p->stride[0] == p->kernel[0] && p->stride[1] == p->kernel[1] && !p->pad[0] && !p->pad[1] &&
                 !p->pad[2] && !p->pad[3] && pin->shape[1] % p->kernel[0] == 0 && pin->shape[2] % p->kernel[1] == 0 &&
                 w->dilation[0] == 1 && w->dilation[1] == 1;
        if (!ok)
            return export_fail(c, path[0], "this pool before a conv cannot be folded into the conv's kernel (it "
                                           "needs an average pool with kernel = stride, no padding, a size the "
                                           "kernel divides, and an undilated conv)");
        k = p->kernel[0];
        nc_loihi_notes_add(c->notes, "the average pool '%s' is folded into conv '%s': kernel %lldx%lld, stride %lld",
                           p->name, w->name, (long long)(W->shape[2] * k), (long long)(W->shape[3] * k),
                           (long long)(w->stride[0] * k));
    }
    if (w->pad[0] != w->pad[2] || w->pad[1] != w->pad[3])
        return export_fail(c, L->node, "netx convolutions pad symmetrically; this one pads top/left and "
                                       "bottom/right differently");
    int64_t cout = W->shape[0], cin_g = W->shape[1], kh = W->shape[2] * k, kw = W->shape[3] * k;
    int64_t n = cout * cin_g * kh * kw, shape[4] = {cout, cin_g, kh, kw};
    float *base = scaled_weights(L->weight, L->n_weight, s->weight_shift);
    float *f = calloc((size_t)n, sizeof *f);
    if (!base || !f) {
        free(base), free(f);
        return nc_fail(c->err, NC_ERR_MEMORY, "netx export: out of memory");
    }
    for (int64_t o = 0; o < cout * cin_g; o++)
        for (int64_t y = 0; y < kh; y++)
            for (int64_t x = 0; x < kw; x++)
                f[(o * kh + y) * kw + x] = base[(o * W->shape[2] + y / k) * W->shape[3] + x / k];
    free(base);
    nc_status st = nc_h5_write_f32(g, "weight", 4, shape, f, c->err);
    free(f);
    int groups = w->groups > 0 ? w->groups : 1;
    if (st == NC_OK)
        st = write_scalar_i64(g, "inChannels", cin_g * groups, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "outChannels", cout, c->err);
    if (st == NC_OK)
        st = write_pair(g, "kernelSize", kh, kw, c->err);
    if (st == NC_OK)
        st = write_pair(g, "stride", w->stride[0] * k, w->stride[1] * k, c->err);
    if (st == NC_OK)
        st = write_pair(g, "padding", w->pad[0] * k, w->pad[1] * k, c->err);
    if (st == NC_OK)
        st = write_pair(g, "dilation", w->dilation[0], w->dilation[1], c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "groups", groups, c->err);
    return st;
}

static nc_status write_dense(netx_ctx *c, const nc_loihi_layer *L, const int *path, int n_path, hid_t g,
                             const netx_scale *s)
{
    const nc_net *net = c->q->net;
    for (int k = 0; k < n_path; k++)
        if (net->nodes[path[k]].kind == NC_NODE_MAXPOOL && net->nodes[path[k]].maxpool_strategy != NC_MAXPOOL_AVG)
            return export_fail(c, path[k], "netx has no max pooling of spikes; convert with --maxpool avg");
    float *f = NULL;
    int64_t fin = 0, fout = net->nodes[L->node].weight->shape[0];
    nc_status st = dense_weights(c, L, path, n_path, &f, &fin);
    if (st != NC_OK)
        return st;
    for (int64_t k = 0; s->weight_shift && k < fout * fin; k++)
        f[k] = (float)(2 * llround(ldexp((double)f[k], -s->weight_shift) / 2));
    for (int64_t k = 0; k < fout * fin; k++)
        if (f[k] > NC_LOIHI_W_MAX || f[k] < NC_LOIHI_W_MIN) {
            nc_loihi_notes_add(c->notes, "layer '%s': overlapping pools sum weights past 8 bits (%g); netx clips "
                                         "them to [-256, 254]", net->nodes[L->node].name, (double)f[k]);
            break;
        }
    int64_t shape[2] = {fout, fin};
    st = nc_h5_write_f32(g, "weight", 2, shape, f, c->err);
    free(f);
    if (st == NC_OK)
        st = write_scalar_i64(g, "inFeatures", fin, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "outFeatures", fout, c->err);
    return st;
}

static nc_status write_layer(netx_ctx *c, const nc_loihi_layer *L)
{
    const nc_net *net = c->q->net;
    const nc_node *w = &net->nodes[L->node], *tgt = &net->nodes[L->target], *src = &net->nodes[L->source];
    for (int i = L->node + 1; i < L->target; i++)
        if (c->q->role[i] == NC_LOIHI_ROLE_TARGET && net->nodes[i].kind != NC_NODE_FLATTEN)
            return export_fail(c, i, net->nodes[i].kind == NC_NODE_MAXPOOL
                                         ? "netx has no max over synaptic currents (a pre-spike MaxPool); convert "
                                           "with --maxpool avg for a network netx can run"
                                         : "netx layers pool spikes, not currents: a pool between a weighted layer "
                                           "and its neurons cannot be written");
    int path[64];
    int n_path = source_path(c->q, L, path, 64);
    int dense = w->kind == NC_NODE_DENSE;
    nc_status st = NC_OK;
    hid_t g = H5I_INVALID_HID;
    if (dense && src->ndim > 1 && has_flatten(c->q, path, n_path)) {
        st = new_layer(c, "flatten", &g);
        if (st == NC_OK) {
            int64_t shape[1] = {1}, v[1] = {nc_node_numel(src)};
            st = nc_h5_write_i64(g, "shape", 1, shape, v, c->err);
        }
        nc_h5_close(&g);
    }
    netx_scale s = layer_scale(c, L);
    if (st == NC_OK)
        st = new_layer(c, dense ? "dense" : "conv", &g);
    if (st == NC_OK)
        st = write_shape(g, tgt, c->err);
    if (st == NC_OK)
        st = dense ? write_dense(c, L, path, n_path, g, &s) : write_conv(c, L, path, n_path, g, &s);
    if (st == NC_OK)
        st = write_bias(c, g, L, &s);
    int is_out = tgt->kind == NC_NODE_OUTPUT;
    if (st == NC_OK)
        st = write_neuron(c, g, is_out ? NC_LOIHI_VTH_MAX : s.vth, (int64_t)llround(L->v0 * s.factor), 0);
    if (st == NC_OK)
        st = nc_h5_attr_string(g, "nc_node", w->name, c->err);
    if (st == NC_OK)
        st = nc_h5_attr_i64(g, "nc_weight_exp", L->weight_exp, c->err);
    if (st == NC_OK)
        st = nc_h5_attr_i64(g, "nc_vth_mant", L->vth_mant, c->err);
    if (st == NC_OK)
        st = nc_h5_attr_i64(g, "nc_input_shift", L->input_shift, c->err);
    nc_h5_close(&g);
    if (st == NC_OK && is_out)
        nc_loihi_notes_add(c->notes, "the last layer '%s' drives the output: the engine reads its synaptic current "
                                     "each step; in netx it is a CUBA layer with vThMant %d, so read its voltage "
                                     "(not its spikes) to get the class scores", w->name, NC_LOIHI_VTH_MAX);
    return st;
}

static nc_status write_all(netx_ctx *c, hid_t file)
{
    const nc_loihi_net *q = c->q;
    const nc_net *net = q->net;
    nc_status st = nc_h5_group_create(file, "layer", &c->layers, c->err);
    hid_t g = H5I_INVALID_HID;
    const nc_node *in = &net->nodes[net->input];
    if (st == NC_OK)
        st = new_layer(c, "input", &g);
    if (st == NC_OK)
        st = write_shape(g, in, c->err);
    if (st == NC_OK)
        st = write_neuron(c, g, NC_LOIHI_VTH_MAX, 0, 1);
    if (st == NC_OK)
        st = write_scalar_i64(g, "weight", 1 << c->input_bits, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(g, "bias", 0, c->err);
    if (st == NC_OK)
        st = nc_h5_attr_i64(g, "nc_input_frac_bits", c->input_bits, c->err);
    nc_h5_close(&g);
    for (int l = 0; st == NC_OK && l < q->n_layers; l++)
        st = write_layer(c, &q->layers[l]);
    hid_t sim = H5I_INVALID_HID;
    if (st == NC_OK)
        st = nc_h5_group_create(file, "simulation", &sim, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(sim, "Ts", 1, c->err);
    if (st == NC_OK)
        st = write_scalar_i64(sim, "tSample", c->opts->T + q->max_depth, c->err);
    nc_h5_close(&sim);
    if (st == NC_OK)
        st = nc_h5_attr_string(file, "nc_format", "lava-dl netx (written by neurocuda)", c->err);
    nc_h5_close(&c->layers);
    return st;
}

nc_status nc_loihi_export_netx(const nc_loihi_net *q, const char *path, const nc_loihi_netx_options *opts,
                               nc_loihi_notes *notes, nc_error *err)
{
    if (!q || !path)
        return nc_fail(err, NC_ERR_ARGUMENT, "netx export: no network or no path");
    nc_loihi_netx_options o = opts ? *opts : (nc_loihi_netx_options){NC_RESET_SUBTRACT, 32};
    if (o.T < 1)
        o.T = 32;
    for (int l = 1; l < q->n_layers; l++)
        if (q->layers[l].source != q->layers[l - 1].target)
            return nc_fail(err, NC_ERR_UNSUPPORTED, "netx export: the layers do not form one chain");
    netx_ctx c = {q, &o, notes, err, H5I_INVALID_HID, 0, q->opts.input_frac_bits};
    for (int l = 0; l < q->n_layers; l++)
        if (q->layers[l].input_shift)
            c.input_bits = input_bits_for(&q->layers[l]);
    nc_h5_writer w;
    nc_status st = nc_h5_create(&w, path, err);
    if (st != NC_OK)
        return st;
    st = write_all(&c, w.file);
    if (st != NC_OK) {
        nc_h5_close(&c.layers);
        nc_h5_discard(&w);
        return st;
    }
    st = nc_h5_commit(&w, err);
    if (st != NC_OK)
        return st;
    if (o.reset == NC_RESET_SUBTRACT)
        nc_loihi_notes_add(notes, "netx cannot express reset by subtraction: its CUBA neurons (Lava's LIF) reset v "
                                  "to 0 after a spike.  The reset is kept as the attribute neuron.nc_reset = "
                                  "'subtract', which netx ignores; netx will run the network as `--loihi-reset zero`");
    nc_loihi_notes_add(notes, "netx cannot express v(0): Lava's LIF starts (and LIFReset restarts) at v = 0; the "
                              "engine's v(0) is kept as the attribute neuron.nc_v0 (v units)");
    nc_loihi_notes_add(notes, "the input layer: netx encodes the image with spiking input neurons (2·weight·x − "
                              "weight + bias); the first layer written here expects the graded payload x·2^%d "
                              "(weight = %d on layer 0; the engine uses x·2^%d: the netx input is coarser)",
                       c.input_bits, 1 << c.input_bits, q->opts.input_frac_bits);
    nc_loihi_notes_add(notes, "each layer adds one step of synaptic delay in Lava: read the output after T + %d "
                              "steps (tSample)", q->max_depth);
    return NC_OK;
}
