/* nc_nir_import_graph.c — NIR import, the graph: a NIR document (nested
 * graphs included) flattened into one list of nodes and edges, then its
 * structure: the entry and exit, what is reachable, recurrent edges found by
 * cutting cycles, and a topological order. */
#include "nc_nir_import_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the flattened graph ---------------------------------------------------- */

static const char *const known_types[] = {"Input", "Output", "Affine", "Linear", "Scale", "Conv1d", "Conv2d",
                                          "SumPool2d", "AvgPool2d", "Flatten", "IF", "LIF", "LI", "CubaLIF",
                                          "CubaLI", "I", "Integrator", "Threshold", "Delay", "NIRGraph", NULL};

int nirimp_is_type(const fnode *f, const char *t) { return strcmp(f->type, t) == 0; }

int nirimp_is_neuron_type(const char *t)
{
    static const char *const list[] = {"IF", "LIF", "LI", "CubaLIF", "CubaLI", "I", "Integrator", "Threshold",
                                       "Delay", NULL};
    for (int k = 0; list[k]; k++)
        if (strcmp(t, list[k]) == 0)
            return 1;
    return 0;
}

/* Stateful nodes: the preferred place to cut a cycle (their output of the
 * previous step is what a recurrent connection means). */
static int is_stateful(const char *t) { return nirimp_is_neuron_type(t) && strcmp(t, "Threshold") != 0; }

nc_status nirimp_node_fail(imp *c, const fnode *f, nc_status code, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nc_fail(c->err, code, "node '%s' (%s): %s", f->name, f->type, what);
}

static int add_fnode(imp *c, const char *name, const nir_node *nn, const char *type, int role)
{
    fnode *nodes = nc_grow(c->n, c->count, &c->cap, 32, sizeof *nodes);
    if (!nodes)
        return -1;
    c->n = nodes;
    fnode *f = &c->n[c->count];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->type, sizeof f->type, "%s", type);
    f->nn = nn;
    f->role = role;
    f->ir = f->prev_ir = -1;
    return c->count++;
}

static int add_fedge(imp *c, int from, int to)
{
    if (c->ne == c->cape) {
        int64_t cap = c->cape ? 2 * c->cape : 64;
        fedge *grown = realloc(c->e, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        c->e = grown;
        c->cape = cap;
    }
    c->e[c->ne++] = (fedge){from, to, 0};
    return 0;
}

typedef struct local_name {
    const char *name;
    int index;
} local_name;

static int cmp_local(const void *a, const void *b)
{
    return strcmp(((const local_name *)a)->name, ((const local_name *)b)->name);
}

/* "input, lif1, lin, output" (at most 8) for messages. */
static const char *node_list(const nir_graph *g, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < g->n_nodes && used + 1 < size; k++) {
        if (k == 8) {
            snprintf(buf + used, size - used, ", ...");
            break;
        }
        used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? ", " : "", g->nodes[k].name);
    }
    return buf;
}

/* Adds the nodes and edges of graph g (nested: prefix "name.") to the flat
 * graph.  Nested: its Input and Output become identities, returned in
 * *entry and *exit. */
nc_status nirimp_flatten_graph(imp *c, const nir_graph *g, const char *prefix, const char *gname, int nested,
                               int *entry, int *exit)
{
    nc_status st = NC_OK;
    int n = g->n_nodes;
    int *first = malloc((size_t)(n ? n : 1) * sizeof(int)), *last = malloc((size_t)(n ? n : 1) * sizeof(int));
    local_name *names = malloc((size_t)(n ? n : 1) * sizeof *names);
    int inputs = 0, outputs = 0;
    *entry = *exit = -1;
    if (!first || !last || !names) {
        st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
        goto done;
    }
    for (int k = 0; k < n && st == NC_OK; k++) {
        const nir_node *nn = &g->nodes[k];
        char full[NC_NAME_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s%s", prefix, nn->name) >= sizeof full) {
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED, "node '%s%s': the name is longer than %d bytes", prefix,
                         nn->name, NC_NAME_MAX - 1);
            break;
        }
        names[k] = (local_name){nn->name, k};
        int known = 0;
        for (int t = 0; known_types[t]; t++)
            known |= strcmp(nn->type, known_types[t]) == 0;
        if (!known) {
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                         "node '%s': field 'type' is '%s', which is not a NIR node type (known: Input, Output, "
                         "Affine, Linear, Scale, Conv1d, Conv2d, SumPool2d, AvgPool2d, Flatten, IF, LIF, LI, "
                         "CubaLIF, CubaLI, I, Threshold, Delay, NIRGraph)",
                         full, nn->type);
            break;
        }
        if (strcmp(nn->type, "NIRGraph") == 0) {
            char sub_prefix[NC_NAME_MAX];
            snprintf(sub_prefix, sizeof sub_prefix, "%s.", full);
            if (!nn->graph) {
                st = nc_fail(c->err, NC_ERR_FORMAT, "node '%s' (NIRGraph): has no nodes", full);
                break;
            }
            st = nirimp_flatten_graph(c, nn->graph, sub_prefix, full, 1, &first[k], &last[k]);
            continue;
        }
        int role = F_NODE;
        if (strcmp(nn->type, "Input") == 0) {
            role = nested ? F_IDENT : F_INPUT;
            inputs++;
        } else if (strcmp(nn->type, "Output") == 0) {
            role = nested ? F_IDENT : F_OUTPUT;
            outputs++;
        }
        int idx = add_fnode(c, full, nn, nn->type, role);
        if (idx < 0) {
            st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            break;
        }
        first[k] = last[k] = idx;
        if (nested && role == F_IDENT && strcmp(nn->type, "Input") == 0)
            *entry = idx;
        if (nested && role == F_IDENT && strcmp(nn->type, "Output") == 0)
            *exit = idx;
    }
    if (st != NC_OK)
        goto done;
    if (nested && (inputs != 1 || outputs != 1)) {
        st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                     "node '%s' (NIRGraph): a nested graph needs exactly one Input and one Output node, it has %d "
                     "and %d",
                     gname, inputs, outputs);
        goto done;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_local);
    for (int k = 1; k < n; k++)
        if (strcmp(names[k - 1].name, names[k].name) == 0) {
            st = nc_fail(c->err, NC_ERR_FORMAT, "graph '%s': two nodes are named '%s'", gname, names[k].name);
            goto done;
        }
    for (int64_t k = 0; k < g->n_edges; k++) {
        const char *a = g->edges[2 * k], *b = g->edges[2 * k + 1];
        local_name key = {a, 0}, *pa = bsearch(&key, names, (size_t)n, sizeof *names, cmp_local);
        key.name = b;
        local_name *pb = bsearch(&key, names, (size_t)n, sizeof *names, cmp_local);
        if (!pa || !pb) {
            char list[512];
            st = nc_fail(c->err, NC_ERR_FORMAT,
                         "graph '%s', field 'edges', edge %lld ('%s' -> '%s'): there is no node '%s' in this graph "
                         "(its nodes: %s)",
                         gname, (long long)k, a, b, pa ? b : a, node_list(g, list, sizeof list));
            goto done;
        }
        if (add_fedge(c, last[pa->index], first[pb->index]) != 0) {
            st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            goto done;
        }
    }
done:
    free(first);
    free(last);
    free(names);
    return st;
}

/* ---- graph structure: entry, exit, reachability, cycles, order ---------------------------- */

/* Adjacency (CSR) over the edges that are not recurrent. */
typedef struct adj {
    int *start; /* count + 1 */
    int *to;    /* edge targets                                              */
    int64_t *edge;
} adj;

static void adj_free(adj *a)
{
    free(a->start);
    free(a->to);
    free(a->edge);
    memset(a, 0, sizeof *a);
}

/* The Input (output = 0) in front of node `next`, or the Output after it,
 * that a graph without one gets, with a note saying so. */
static nc_status add_end_node(imp *c, int output, int next)
{
    int k = add_fnode(c, output ? "output" : "input", NULL, output ? "Output" : "Input", output ? F_OUTPUT : F_INPUT);
    if (k < 0 || (output ? add_fedge(c, next, k) : add_fedge(c, k, next)) != 0)
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    if (output)
        c->output = k;
    else
        c->input = k;
    nir_note(c->notes, NC_NIR_NOTE_WARNING, c->n[next].name,
             output ? "the graph has no Output node: one is added after this node"
                    : "the graph has no Input node: one is added in front of this node");
    return NC_OK;
}

static int adj_build(const imp *c, adj *a)
{
    memset(a, 0, sizeof *a);
    a->start = calloc((size_t)c->count + 1, sizeof(int));
    a->to = malloc((size_t)(c->ne ? c->ne : 1) * sizeof(int));
    a->edge = malloc((size_t)(c->ne ? c->ne : 1) * sizeof(int64_t));
    if (!a->start || !a->to || !a->edge)
        return -1;
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            a->start[c->e[k].from + 1]++;
    for (int k = 0; k < c->count; k++)
        a->start[k + 1] += a->start[k];
    int *fill = calloc((size_t)c->count + 1, sizeof(int));
    if (!fill)
        return -1;
    for (int64_t k = 0; k < c->ne; k++) {
        if (c->e[k].recurrent)
            continue;
        int u = c->e[k].from, slot = a->start[u] + fill[u]++;
        a->to[slot] = c->e[k].to;
        a->edge[slot] = k;
    }
    free(fill);
    return 0;
}

/* Finds one cycle among the non-recurrent edges of nodes reachable from the
 * input, by an iterative DFS; marks one of its edges recurrent (preferably
 * one leaving a stateful node, the last such on the cycle).  Returns 1 if a
 * cycle was cut, 0 if none is left, −1 on out of memory. */
int nirimp_cut_one_cycle(imp *c, int64_t *cut_edge)
{
    adj a = {0}; /* adj_free() is safe on it when an allocation before adj_build() fails */
    int n = c->count, rc = 0;
    int *state = calloc((size_t)n, sizeof(int)); /* 0 new, 1 on stack, 2 done */
    int *stack = malloc((size_t)(n ? n : 1) * sizeof(int)), *pos = malloc((size_t)(n ? n : 1) * sizeof(int));
    int64_t *via = malloc((size_t)(n ? n : 1) * sizeof(int64_t)); /* edge into stack[d] */
    if (!state || !stack || !pos || !via || adj_build(c, &a) != 0) {
        rc = -1;
        goto done;
    }
    /* roots first (the input, nodes fed only by recurrent edges), then any
     * node not visited yet (a cycle entered only through a recurrent edge) */
    for (int root = 0; root < 2 * n && rc == 0; root++) {
        int r0 = root % n;
        if (state[r0] || (root < n && !(r0 == c->input || c->n[r0].n_pred == 0)))
            continue;
        int start = r0;
        int depth = 0;
        stack[0] = start;
        pos[0] = a.start[start];
        via[0] = -1;
        state[start] = 1;
        while (depth >= 0 && rc == 0) {
            int u = stack[depth];
            if (pos[depth] >= a.start[u + 1]) {
                state[u] = 2;
                depth--;
                continue;
            }
            int slot = pos[depth]++;
            int v = a.to[slot];
            if (state[v] == 0) {
                depth++;
                stack[depth] = v;
                pos[depth] = a.start[v];
                via[depth] = a.edge[slot];
                state[v] = 1;
            } else if (state[v] == 1) {
                /* cycle: stack[d..depth] then the edge back to v = stack[d] */
                int d = depth;
                while (stack[d] != v)
                    d--;
                int64_t best = a.edge[slot];
                if (!is_stateful(c->n[u].type)) {
                    for (int k = depth; k > d; k--) /* via[k] leaves stack[k-1] */
                        if (is_stateful(c->n[stack[k - 1]].type)) {
                            best = via[k];
                            break;
                        }
                }
                c->e[best].recurrent = 1;
                *cut_edge = best;
                rc = 1;
            }
        }
    }
done:
    adj_free(&a);
    free(state);
    free(stack);
    free(pos);
    free(via);
    return rc;
}

void nirimp_count_preds(imp *c)
{
    for (int k = 0; k < c->count; k++)
        c->n[k].n_pred = 0;
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            c->n[c->e[k].to].n_pred++;
}

/* Marks the nodes reachable from the input (through all edges). */
nc_status nirimp_mark_reachable(imp *c)
{
    int *queue = malloc((size_t)(c->count ? c->count : 1) * sizeof(int));
    if (!queue)
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    int head = 0, tail = 0;
    queue[tail++] = c->input;
    c->n[c->input].reach = 1;
    while (head < tail) {
        int u = queue[head++];
        for (int64_t k = 0; k < c->ne; k++)
            if (c->e[k].from == u && !c->n[c->e[k].to].reach) {
                c->n[c->e[k].to].reach = 1;
                queue[tail++] = c->e[k].to;
            }
    }
    free(queue);
    for (int k = 0; k < c->count; k++)
        if (!c->n[k].reach)
            return nc_fail(c->err, NC_ERR_FORMAT,
                           "node '%s' (%s) cannot be reached from the Input node '%s' (a part of the graph, or a cycle, "
                           "that nothing feeds)",
                           c->n[k].name, c->n[k].type, c->n[c->input].name);
    return NC_OK;
}

/* Finds the Input and the Output, adding implicit ones where NIR would. */
nc_status nirimp_find_ends(imp *c)
{
    int inputs = 0, outputs = 0;
    c->input = c->output = -1;
    for (int k = 0; k < c->count; k++) {
        if (c->n[k].role == F_INPUT) {
            inputs++;
            c->input = k;
        } else if (c->n[k].role == F_OUTPUT) {
            outputs++;
            c->output = k;
        }
    }
    if (inputs > 1)
        return nc_fail(c->err, NC_ERR_UNSUPPORTED, "the graph has %d Input nodes; this program runs graphs with one input",
                       inputs);
    if (outputs > 1)
        return nc_fail(c->err, NC_ERR_UNSUPPORTED,
                       "the graph has %d Output nodes; this program runs graphs with one output", outputs);
    int *in_deg = calloc((size_t)c->count + 1, sizeof(int)), *out_deg = calloc((size_t)c->count + 1, sizeof(int));
    if (!in_deg || !out_deg) {
        free(in_deg);
        free(out_deg);
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    }
    for (int64_t k = 0; k < c->ne; k++) {
        out_deg[c->e[k].from]++;
        in_deg[c->e[k].to]++;
    }
    nc_status st = NC_OK;
    if (c->input < 0) {
        /* NIR ≥ 1.0.6 adds an Input before a node that nothing feeds */
        int root = -1, roots = 0;
        for (int k = 0; k < c->count; k++)
            if (in_deg[k] == 0 && c->n[k].role != F_OUTPUT) {
                root = k;
                roots++;
            }
        if (roots == 0)
            st = nc_fail(c->err, NC_ERR_FORMAT,
                         "the graph has no Input node and every node has an incoming edge: it cannot start (a cycle "
                         "with no Input)");
        else if (roots > 1)
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                         "the graph has no Input node and %d nodes that nothing feeds ('%s', ...); add an Input node",
                         roots, c->n[root].name);
        else
            st = add_end_node(c, 0, root);
    }
    if (st == NC_OK && c->output < 0) {
        int leaf = -1, leaves = 0;
        for (int k = 0; k < c->count; k++)
            if (out_deg[k] == 0 && c->n[k].role != F_INPUT && k != c->input) {
                leaf = k;
                leaves++;
            }
        if (leaves != 1)
            st = nc_fail(c->err, leaves ? NC_ERR_UNSUPPORTED : NC_ERR_FORMAT,
                         "the graph has no Output node and %d nodes that feed nothing; add an Output node", leaves);
        else
            st = add_end_node(c, 1, leaf);
    }
    free(in_deg);
    free(out_deg);
    if (st != NC_OK)
        return st;
    for (int64_t k = 0; k < c->ne; k++) {
        if (c->e[k].to == c->input)
            return nc_fail(c->err, NC_ERR_FORMAT, "field 'edges': the edge '%s' -> '%s' leads into the Input node",
                           c->n[c->e[k].from].name, c->n[c->input].name);
        if (c->e[k].from == c->output)
            return nc_fail(c->err, NC_ERR_FORMAT, "field 'edges': the edge '%s' -> '%s' leaves the Output node",
                           c->n[c->output].name, c->n[c->e[k].to].name);
    }
    return NC_OK;
}

/* Kahn's order over non-recurrent edges; the output last.  order[] gets the
 * node indices. */
nc_status nirimp_topo_order(imp *c, int *order)
{
    adj a = {0}; /* adj_free() is safe on it when an allocation before adj_build() fails */
    int *deg = calloc((size_t)c->count, sizeof(int)), *queue = malloc((size_t)c->count * sizeof(int));
    if (!deg || !queue || adj_build(c, &a) != 0) {
        free(deg);
        free(queue);
        adj_free(&a);
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    }
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            deg[c->e[k].to]++;
    int head = 0, tail = 0, n = 0;
    for (int k = 0; k < c->count; k++) /* the input first, then other roots in file order */
        if (k == c->input)
            queue[tail++] = k;
    for (int k = 0; k < c->count; k++)
        if (deg[k] == 0 && k != c->input && k != c->output)
            queue[tail++] = k;
    while (head < tail) {
        int u = queue[head++];
        order[n++] = u;
        for (int s = a.start[u]; s < a.start[u + 1]; s++) {
            int v = a.to[s];
            if (--deg[v] == 0 && v != c->output)
                queue[tail++] = v;
        }
    }
    nc_status st = NC_OK;
    if (deg[c->output] != 0 || n != c->count - 1)
        st = nc_fail(c->err, NC_ERR_INTERNAL, "NIR import: the graph could not be ordered after cutting its cycles");
    else
        order[n++] = c->output;
    adj_free(&a);
    free(deg);
    free(queue);
    return st;
}
