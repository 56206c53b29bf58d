/* nc_nir_import.c — NIR file → network IR (see nc_nir.h for what is read
 * how; specs/nir.md for the format).
 *
 * A file this program wrote is restored exactly from its own tables
 * (nc_nir_restore.c); any other file takes the foreign path below: flatten
 * the graph and order it (nc_nir_import_graph.c), infer and check shapes
 * (nc_nir_import_shapes.c), build the IR (nc_nir_import_build.c). */
#include "nc_nir_import_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the foreign path ----------------------------------------------------------------------------- */

static nc_status import_graph(imp *c, const nir_node *root)
{
    int entry, exit;
    nc_status st = nirimp_flatten_graph(c, root->graph, "", "node", 0, &entry, &exit);
    if (st != NC_OK)
        return st;
    if ((st = nirimp_find_ends(c)) != NC_OK)
        return st;
    if ((st = nirimp_mark_reachable(c)) != NC_OK)
        return st;
    /* cut the cycles */
    for (;;) {
        nirimp_count_preds(c);
        int64_t cut = -1;
        int rc = nirimp_cut_one_cycle(c, &cut);
        if (rc < 0)
            return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
        if (rc == 0)
            break;
        const fedge *e = &c->e[cut];
        nir_note(c->notes, NC_NIR_NOTE_INFO, c->n[e->to].name,
                 "the edge '%s' -> '%s' closes a cycle: '%s' reads the output of '%s' from the previous step (0 at "
                 "the first)",
                 c->n[e->from].name, c->n[e->to].name, c->n[e->to].name, c->n[e->from].name);
    }
    nirimp_count_preds(c);
    int *order = malloc((size_t)c->count * sizeof(int));
    if (!order)
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    if ((st = nirimp_topo_order(c, order)) != NC_OK) {
        free(order);
        return st;
    }
    /* shapes, in order; then every edge, recurrent ones too */
    for (int k = 0; k < c->count && st == NC_OK; k++)
        st = nirimp_infer_fnode(c, order[k]);
    for (int64_t k = 0; k < c->ne && st == NC_OK; k++) {
        const fedge *e = &c->e[k];
        const fnode *a = &c->n[e->from], *b = &c->n[e->to];
        if (b->has_in && nc_shape_numel(a->ndim, a->shape) != nc_shape_numel(b->in_ndim, b->in_shape))
            st = nirimp_mismatch(c, a, b, "input", b->in_ndim, b->in_shape);
        else if (e->recurrent && b->has_in && !nirimp_same_shape(a->ndim, a->shape, b->in_ndim, b->in_shape) &&
                 !(nirimp_is_type(b, "Affine") || nirimp_is_type(b, "Linear")))
            st = nirimp_mismatch(c, a, b, "input", b->in_ndim, b->in_shape);
    }
    /* the IR: input, recurrent nodes, then everything in order */
    for (int k = 0; k < c->count && st == NC_OK; k++) {
        fnode *f = &c->n[order[k]];
        if (order[k] == c->input) {
            st = nirimp_build_node(c, f, -1);
            for (int64_t j = 0; j < c->ne && st == NC_OK; j++) {
                fnode *s = &c->n[c->e[j].from];
                if (!c->e[j].recurrent || s->prev_ir >= 0)
                    continue;
                char name[NC_NAME_MAX + 8];
                snprintf(name, sizeof name, "%.*s.prev", NC_NAME_MAX - 8, s->name);
                int r = nirimp_add_ir(c, NC_NODE_RECURRENT, name, 0, NULL);
                if (r < 0) {
                    st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
                    break;
                }
                c->net->nodes[r].ndim = s->ir_ndim;
                memcpy(c->net->nodes[r].shape, s->ir_shape, sizeof s->ir_shape);
                s->prev_ir = r;
            }
            continue;
        }
        int inputs[64], n_in = 0;
        for (int64_t j = 0; j < c->ne && st == NC_OK; j++) {
            const fedge *e = &c->e[j];
            if (e->to != order[k])
                continue;
            if (n_in == 64) {
                st = nirimp_node_fail(c, f, NC_ERR_UNSUPPORTED, "more than 64 incoming edges");
                break;
            }
            inputs[n_in++] = e->recurrent ? c->n[e->from].prev_ir : c->n[e->from].ir;
        }
        if (st != NC_OK)
            break;
        int in = inputs[0];
        if (n_in > 1) {
            char name[NC_NAME_MAX + 8];
            snprintf(name, sizeof name, "%.*s.sum", NC_NAME_MAX - 8, f->name);
            in = nirimp_add_ir(c, NC_NODE_ADD, name, n_in, inputs);
            if (in < 0) {
                st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
                break;
            }
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name, "%d edges meet here: their sum is its input (an add node)",
                     n_in);
        }
        st = nirimp_build_node(c, f, in);
    }
    free(order);
    if (st != NC_OK)
        return st;
    for (int k = 0; k < c->count; k++)
        if (c->n[k].prev_ir >= 0)
            c->net->nodes[c->n[k].prev_ir].recur_source = c->n[k].ir;
    for (int k = 0; k < c->count; k++) {
        const fnode *f = &c->n[k];
        if (f->prev_ir >= 0 && f->ir <= f->prev_ir)
            return nc_fail(c->err, NC_ERR_UNSUPPORTED,
                           "node '%s': a recurrent edge leaves a node that is only an alias of an earlier one", f->name);
    }
    return NC_OK;
}

nc_status nc_nir_load(const char *path, const nc_nir_load_options *opts_in, nc_net **out, nc_nir_notes *notes,
                      nc_error *err)
{
    nc_nir_load_options opts = {.dt = 1e-3};
    if (opts_in)
        opts = *opts_in;
    if (!(opts.dt > 0) || !isfinite(opts.dt))
        opts.dt = 1e-3;
    *out = NULL;
    nir_node root;
    char version[64];
    nc_status st = nir_read_file(path, &root, version, sizeof version, notes, err);
    if (st != NC_OK)
        return st;
    int ours = 0;
    if (!opts.ignore_ours) {
        st = nirimp_restore_ours(&root, &opts, out, notes, err, &ours);
        if (ours || st != NC_OK) {
            nir_node_clear(&root);
            if (st != NC_OK)
                nc_error_prefix(err, "%s", path);
            else
                snprintf((*out)->source_path, sizeof (*out)->source_path, "%s", path);
            return st;
        }
    }
    imp c = {.opts = &opts, .notes = notes, .err = err};
    if (!(c.net = nc_net_new())) {
        nir_node_clear(&root);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    }
    st = import_graph(&c, &root);
    if (st == NC_OK) {
        st = nc_net_infer_shapes(c.net, err);
        if (st != NC_OK)
            nc_error_prefix(err, "NIR import");
    }
    if (st == NC_OK) {
        nirimp_neuron_notes(&c);
        snprintf(c.net->source_path, sizeof c.net->source_path, "%s", path);
        snprintf(c.net->source_format, sizeof c.net->source_format, "nir");
        if (version[0])
            nir_note(notes, NC_NIR_NOTE_INFO, "", "NIR file version %s, %d nodes read into %d network nodes", version,
                     c.count, c.net->n_nodes);
        *out = c.net;
        c.net = NULL;
    } else {
        nc_error_prefix(err, "%s", path);
    }
    nc_net_free(c.net);
    free(c.n);
    free(c.e);
    nir_node_clear(&root);
    return st;
}
