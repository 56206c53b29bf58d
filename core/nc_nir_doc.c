/* nc_nir_doc.c — a NIR graph in memory, its HDF5 reader and writer
 * (see nc_nir_doc.h; the layout is specs/nir.md §1). */
#include "nc_nir_doc.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_h5util.h"

/* ---- memory ------------------------------------------------------------------ */

void nir_value_clear(nir_value *v)
{
    if (!v)
        return;
    free(v->f);
    free(v->i);
    if (v->s)
        for (int64_t k = 0; k < v->numel; k++)
            free(v->s[k]);
    free(v->s);
    memset(v, 0, sizeof *v);
}

void nir_node_clear(nir_node *n)
{
    if (!n)
        return;
    for (int k = 0; k < n->n_fields; k++)
        nir_value_clear(&n->fields[k]);
    for (int k = 0; k < n->n_meta; k++)
        nir_value_clear(&n->meta[k]);
    free(n->fields);
    free(n->meta);
    nir_graph_free(n->graph);
    memset(n, 0, sizeof *n);
}

void nir_graph_free(nir_graph *g)
{
    if (!g)
        return;
    for (int k = 0; k < g->n_nodes; k++)
        nir_node_clear(&g->nodes[k]);
    free(g->nodes);
    for (int64_t k = 0; k < 2 * g->n_edges; k++)
        free(g->edges[k]);
    free(g->edges);
    free(g);
}

nir_graph *nir_graph_new(void) { return calloc(1, sizeof(nir_graph)); }

nir_node *nir_graph_add(nir_graph *g, const char *name, const char *type)
{
    nir_node *nodes = nc_grow(g->nodes, g->n_nodes, &g->cap_nodes, 16, sizeof *nodes);
    if (!nodes)
        return NULL;
    g->nodes = nodes;
    nir_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->type, sizeof n->type, "%s", type);
    return n;
}

int nir_graph_edge(nir_graph *g, const char *from, const char *to)
{
    if (g->n_edges == g->cap_edges) {
        int64_t cap = g->cap_edges ? 2 * g->cap_edges : 16;
        char **grown = realloc(g->edges, (size_t)(2 * cap) * sizeof *grown);
        if (!grown)
            return -1;
        g->edges = grown;
        g->cap_edges = cap;
    }
    char *a = strdup(from), *b = strdup(to);
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    g->edges[2 * g->n_edges] = a;
    g->edges[2 * g->n_edges + 1] = b;
    g->n_edges++;
    return 0;
}

static nir_value *add_value(nir_node *n, int meta, const char *name)
{
    nir_value **list = meta ? &n->meta : &n->fields;
    int *count = meta ? &n->n_meta : &n->n_fields, *cap = meta ? &n->cap_meta : &n->cap_fields;
    for (int k = 0; k < *count; k++) /* replace an existing one */
        if (strcmp((*list)[k].name, name) == 0) {
            nir_value_clear(&(*list)[k]);
            snprintf((*list)[k].name, NIR_FIELD_NAME_MAX, "%s", name);
            return &(*list)[k];
        }
    nir_value *grown = nc_grow(*list, *count, cap, 8, sizeof *grown);
    if (!grown)
        return NULL;
    *list = grown;
    nir_value *v = &(*list)[(*count)++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    return v;
}

static nir_value *add_numeric(nir_node *n, int meta, const char *name, nir_value_kind kind, int ndim,
                              const int64_t *shape)
{
    if (ndim < 0 || ndim > NIR_MAX_NDIM)
        return NULL;
    int64_t numel = nc_shape_numel(ndim, shape);
    if (numel < 0)
        return NULL;
    nir_value *v = add_value(n, meta, name);
    if (!v)
        return NULL;
    v->kind = kind;
    v->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        v->shape[d] = shape[d];
    v->numel = numel;
    size_t elem = kind == NIR_FLOAT ? sizeof(float) : sizeof(int64_t);
    void *data = calloc(numel > 0 ? (size_t)numel : 1, elem);
    if (!data) {
        v->numel = 0;
        return NULL;
    }
    if (kind == NIR_FLOAT)
        v->f = data;
    else
        v->i = data;
    return v;
}

nir_value *nir_add_float(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape)
{
    return add_numeric(n, meta, name, NIR_FLOAT, ndim, shape);
}

nir_value *nir_add_int(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape)
{
    return add_numeric(n, meta, name, NIR_INT, ndim, shape);
}

nir_value *nir_add_string(nir_node *n, int meta, const char *name, const char *text)
{
    nir_value *v = add_value(n, meta, name);
    if (!v)
        return NULL;
    v->kind = NIR_STRING;
    v->ndim = 0;
    v->numel = 1;
    v->s = calloc(1, sizeof(char *));
    if (!v->s || !(v->s[0] = strdup(text ? text : ""))) {
        v->numel = 0;
        return NULL;
    }
    return v;
}

int nir_set_int(nir_node *n, int meta, const char *name, int64_t value)
{
    nir_value *v = nir_add_int(n, meta, name, 0, NULL);
    if (!v)
        return -1;
    v->i[0] = value;
    return 0;
}

int nir_set_float(nir_node *n, int meta, const char *name, float value)
{
    nir_value *v = nir_add_float(n, meta, name, 0, NULL);
    if (!v)
        return -1;
    v->f[0] = value;
    return 0;
}

int nir_set_ints(nir_node *n, int meta, const char *name, int count, const int64_t *values)
{
    int64_t shape[1] = {count};
    nir_value *v = nir_add_int(n, meta, name, 1, shape);
    if (!v)
        return -1;
    memcpy(v->i, values, (size_t)count * sizeof(int64_t));
    return 0;
}

int nir_set_strings(nir_node *n, int meta, const char *name, int64_t count, const char *const *texts)
{
    nir_value *v = add_value(n, meta, name);
    if (!v)
        return -1;
    v->kind = NIR_STRING;
    v->ndim = 1;
    v->shape[0] = count;
    if (!(v->s = calloc((size_t)(count ? count : 1), sizeof(char *))))
        return -1;
    v->numel = count;
    for (int64_t k = 0; k < count; k++)
        if (!(v->s[k] = strdup(texts[k] ? texts[k] : "")))
            return -1;
    return 0;
}

int nir_set_floats(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape, const float *data)
{
    nir_value *v = nir_add_float(n, meta, name, ndim, shape);
    if (!v)
        return -1;
    memcpy(v->f, data, (size_t)v->numel * sizeof(float));
    return 0;
}

nir_value *nir_get(const nir_node *n, int meta, const char *name)
{
    nir_value *list = meta ? n->meta : n->fields;
    int count = meta ? n->n_meta : n->n_fields;
    for (int k = 0; k < count; k++)
        if (strcmp(list[k].name, name) == 0)
            return &list[k];
    return NULL;
}

nir_node *nir_graph_find(const nir_graph *g, const char *name)
{
    for (int k = 0; k < g->n_nodes; k++)
        if (strcmp(g->nodes[k].name, name) == 0)
            return &g->nodes[k];
    return NULL;
}

/* ---- fingerprint ---------------------------------------------------------------- */

typedef struct { uint64_t h; } fnv;

static void fnv_bytes(fnv *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t k = 0; k < n; k++) {
        s->h ^= p[k];
        s->h *= 0x100000001b3ull;
    }
}

static void fnv_str(fnv *s, const char *text) { fnv_bytes(s, text, strlen(text) + 1); }

static void fnv_i64(fnv *s, int64_t v)
{
    unsigned char b[8];
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)((uint64_t)v >> (8 * k));
    fnv_bytes(s, b, 8);
}

static int cmp_value_ptr(const void *a, const void *b)
{
    return strcmp((*(const nir_value *const *)a)->name, (*(const nir_value *const *)b)->name);
}

static int cmp_node_ptr(const void *a, const void *b)
{
    return strcmp((*(const nir_node *const *)a)->name, (*(const nir_node *const *)b)->name);
}

static int cmp_edge_ptr(const void *a, const void *b)
{
    char *const *x = *(char *const *const *)a, *const *y = *(char *const *const *)b;
    int c = strcmp(x[0], y[0]);
    return c ? c : strcmp(x[1], y[1]);
}

static uint64_t node_print(const nir_node *n);

static uint64_t graph_print(const nir_graph *g)
{
    fnv s = {0xcbf29ce484222325ull};
    const nir_node **nodes = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *nodes);
    char **const *edges = malloc((size_t)(g->n_edges ? g->n_edges : 1) * sizeof *edges);
    if (!nodes || !edges) {
        free(nodes);
        free((void *)edges);
        return 0;
    }
    for (int k = 0; k < g->n_nodes; k++)
        nodes[k] = &g->nodes[k];
    qsort(nodes, (size_t)g->n_nodes, sizeof *nodes, cmp_node_ptr);
    for (int k = 0; k < g->n_nodes; k++)
        fnv_i64(&s, (int64_t)node_print(nodes[k]));
    char ***e = (char ***)edges;
    for (int64_t k = 0; k < g->n_edges; k++)
        e[k] = &g->edges[2 * k];
    qsort(e, (size_t)g->n_edges, sizeof *e, cmp_edge_ptr);
    for (int64_t k = 0; k < g->n_edges; k++) {
        fnv_str(&s, e[k][0]);
        fnv_str(&s, e[k][1]);
    }
    free(nodes);
    free((void *)edges);
    return s.h;
}

static uint64_t node_print(const nir_node *n)
{
    fnv s = {0xcbf29ce484222325ull};
    fnv_str(&s, n->name);
    fnv_str(&s, n->type);
    const nir_value **f = malloc((size_t)(n->n_fields ? n->n_fields : 1) * sizeof *f);
    if (!f)
        return 0;
    for (int k = 0; k < n->n_fields; k++)
        f[k] = &n->fields[k];
    qsort(f, (size_t)n->n_fields, sizeof *f, cmp_value_ptr);
    for (int k = 0; k < n->n_fields; k++) {
        const nir_value *v = f[k];
        fnv_str(&s, v->name);
        fnv_i64(&s, v->kind);
        fnv_i64(&s, v->ndim);
        for (int d = 0; d < v->ndim; d++)
            fnv_i64(&s, v->shape[d]);
        for (int64_t e = 0; e < v->numel; e++) {
            if (v->kind == NIR_FLOAT) {
                float x = v->f[e];
                uint32_t bits;
                memcpy(&bits, &x, 4);
                fnv_i64(&s, bits);
            } else if (v->kind == NIR_INT) {
                fnv_i64(&s, v->i[e]);
            } else {
                fnv_str(&s, v->s[e]);
            }
        }
    }
    free(f);
    if (n->graph)
        fnv_i64(&s, (int64_t)graph_print(n->graph));
    return s.h;
}

uint64_t nir_fingerprint(const nir_node *root) { return node_print(root); }

/* ---- writing ---------------------------------------------------------------------- */

static hid_t vlen_utf8(void)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    return type;
}

static nc_status write_edges(hid_t loc, const nir_graph *g, nc_error *err)
{
    hsize_t dims[2] = {(hsize_t)g->n_edges, 2};
    hid_t type = vlen_utf8(), space = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(loc, "edges", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    nc_status st = NC_OK;
    if (d < 0 || (g->n_edges > 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, g->edges) < 0)) {
        char why[256];
        st = nc_fail(err, NC_ERR_IO, "cannot write dataset 'edges': %s", nc_h5_error_text(why, sizeof why));
    }
    nc_h5_close(&d);
    nc_h5_close(&space);
    nc_h5_close(&type);
    return st;
}

/* Small arrays (and scalars) are written contiguous: a chunk index costs
 * more than they hold.  Larger ones go through nc_h5util: chunked with the
 * Fletcher-32 checksum, so that a damaged weight is reported on reading. */
#define NIR_SMALL_ARRAY 256

static nc_status write_small(hid_t loc, const nir_value *v, nc_error *err)
{
    hsize_t dims[NIR_MAX_NDIM];
    for (int d = 0; d < v->ndim; d++)
        dims[d] = (hsize_t)v->shape[d];
    hid_t space = v->ndim ? H5Screate_simple(v->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ftype = v->kind == NIR_FLOAT ? H5T_IEEE_F32LE : H5T_STD_I64LE;
    hid_t mtype = v->kind == NIR_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64;
    hid_t d = H5Dcreate2(loc, v->name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    nc_status st = NC_OK;
    const void *data = v->kind == NIR_FLOAT ? (const void *)v->f : (const void *)v->i;
    if (d < 0 || (v->numel > 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)) {
        char why[256];
        st = nc_fail(err, NC_ERR_IO, "cannot write dataset '%s': %s", v->name, nc_h5_error_text(why, sizeof why));
    }
    nc_h5_close(&d);
    nc_h5_close(&space);
    return st;
}

static nc_status write_value(hid_t loc, const nir_value *v, nc_error *err)
{
    if (v->kind != NIR_STRING && v->numel <= NIR_SMALL_ARRAY)
        return write_small(loc, v, err);
    switch (v->kind) {
    case NIR_FLOAT: return nc_h5_write_f32(loc, v->name, v->ndim, v->shape, v->f, err);
    case NIR_INT: return nc_h5_write_i64(loc, v->name, v->ndim, v->shape, v->i, err);
    case NIR_STRING:
        if (v->ndim == 0)
            return nc_h5_write_vstring(loc, v->name, v->s[0], err);
        {
            /* a 1-d array of variable-length strings */
            hsize_t dims[1] = {(hsize_t)v->numel};
            hid_t type = vlen_utf8(), space = H5Screate_simple(1, dims, NULL);
            hid_t d = H5Dcreate2(loc, v->name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            nc_status st = NC_OK;
            if (d < 0 || (v->numel > 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v->s) < 0)) {
                char why[256];
                st = nc_fail(err, NC_ERR_IO, "cannot write dataset '%s': %s", v->name,
                             nc_h5_error_text(why, sizeof why));
            }
            nc_h5_close(&d);
            nc_h5_close(&space);
            nc_h5_close(&type);
            return st;
        }
    }
    return nc_fail(err, NC_ERR_INTERNAL, "dataset '%s': unknown value kind", v->name);
}

/* Groups keep their links in the object header (compact storage, covered
 * by its checksum) rather than in a fractal heap and B-tree: libhdf5 1.10
 * crashes on some damaged dense link storage instead of reporting it. */
static nc_status group_create(hid_t loc, const char *name, hid_t *out, nc_error *err)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (gcpl >= 0)
        H5Pset_link_phase_change(gcpl, 65535, 65534);
    *out = H5Gcreate2(loc, name, H5P_DEFAULT, gcpl >= 0 ? gcpl : H5P_DEFAULT, H5P_DEFAULT);
    nc_h5_close(&gcpl);
    if (*out < 0) {
        char why[256];
        return nc_fail(err, NC_ERR_IO, "cannot write group '%s': %s", name, nc_h5_error_text(why, sizeof why));
    }
    return NC_OK;
}

static nc_status write_node(hid_t loc, const char *link, const nir_node *n, nc_error *err)
{
    hid_t g = H5I_INVALID_HID, sub = H5I_INVALID_HID;
    nc_status st = group_create(loc, link, &g, err);
    if (st == NC_OK)
        st = nc_h5_write_vstring(g, "type", n->type, err);
    for (int k = 0; st == NC_OK && k < n->n_fields; k++)
        st = write_value(g, &n->fields[k], err);
    if (st == NC_OK && n->n_meta > 0) {
        st = group_create(g, "metadata", &sub, err);
        for (int k = 0; st == NC_OK && k < n->n_meta; k++)
            st = write_value(sub, &n->meta[k], err);
        nc_h5_close(&sub);
    }
    if (st == NC_OK && n->graph) {
        st = group_create(g, "nodes", &sub, err);
        for (int k = 0; st == NC_OK && k < n->graph->n_nodes; k++)
            st = write_node(sub, n->graph->nodes[k].name, &n->graph->nodes[k], err);
        nc_h5_close(&sub);
        if (st == NC_OK)
            st = write_edges(g, n->graph, err);
    }
    nc_h5_close(&g);
    if (st != NC_OK && strcmp(link, "node") != 0)
        nc_error_prefix(err, "node '%s'", n->name);
    return st;
}

nc_status nir_write_file(const char *path, const nir_node *root, const char *version,
                         const char *const *root_attrs, nc_error *err)
{
    nc_h5_writer w;
    nc_status st = nc_h5_create(&w, path, err);
    if (st != NC_OK)
        return st;
    st = nc_h5_write_vstring(w.file, "version", version, err);
    if (st == NC_OK)
        st = write_node(w.file, "node", root, err);
    if (st == NC_OK && root_attrs) {
        hid_t g = H5Gopen2(w.file, "/", H5P_DEFAULT);
        for (int k = 0; st == NC_OK && root_attrs[k] && root_attrs[k + 1]; k += 2)
            st = nc_h5_attr_string(g, root_attrs[k], root_attrs[k + 1], err);
        nc_h5_close(&g);
    }
    if (st != NC_OK) {
        nc_h5_discard(&w);
        nc_error_prefix(err, "%s", path);
        return st;
    }
    st = nc_h5_commit(&w, err);
    return st;
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct reader {
    nc_nir_notes *notes;
    nc_error *err;
    int64_t total_nodes;
} reader;

/* Link names of a group, in name order (hard links only). */
typedef struct name_list {
    int count, cap;
    char **names;
    int bad;             /* a soft or external link, or a name too long */
    char bad_name[NC_NAME_MAX];
} name_list;

static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *info, void *user)
{
    (void)g;
    name_list *l = user;
    if (info->type != H5L_TYPE_HARD || strlen(name) >= NC_NAME_MAX) {
        l->bad = info->type != H5L_TYPE_HARD ? 1 : 2;
        snprintf(l->bad_name, sizeof l->bad_name, "%.200s", name);
        return 1; /* stop */
    }
    if (l->count >= NIR_MAX_NODES) {
        l->bad = 3;
        return 1;
    }
    return nc_strings_add(&l->names, &l->count, &l->cap, name);
}

static void name_list_free(name_list *l)
{
    nc_strings_free(l->names, l->count);
    memset(l, 0, sizeof *l);
}

static nc_status list_group(hid_t g, const char *what, name_list *l, nc_error *err)
{
    memset(l, 0, sizeof *l);
    hsize_t idx = 0;
    herr_t rc = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, list_cb, l);
    if (l->bad == 1)
        return nc_fail(err, NC_ERR_FORMAT, "%s: '%s' is a soft or external link, which is refused", what,
                       l->bad_name);
    if (l->bad == 2)
        return nc_fail(err, NC_ERR_FORMAT, "%s: the name '%s...' is longer than %d bytes", what, l->bad_name,
                       NC_NAME_MAX - 1);
    if (l->bad == 3)
        return nc_fail(err, NC_ERR_FORMAT, "%s holds more than %d objects", what, NIR_MAX_NODES);
    if (rc < 0) {
        char why[256];
        return nc_fail(err, NC_ERR_FORMAT, "%s cannot be listed: %s", what, nc_h5_error_text(why, sizeof why));
    }
    return NC_OK;
}

/* H5O_TYPE_GROUP, H5O_TYPE_DATASET, or H5O_TYPE_UNKNOWN. */
static H5O_type_t object_type(hid_t g, const char *name)
{
    H5O_info_t info;
    if (H5Oget_info_by_name2(g, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return H5O_TYPE_UNKNOWN;
    return info.type;
}

/* Valid UTF-8 without NUL or control characters other than tab. */
static int text_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x20 && *p != '\t')
            return 0;
        if (*p < 0x80) {
            p++;
            continue;
        }
        int len = (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (!len)
            return 0;
        for (int k = 1; k < len; k++)
            if ((p[k] & 0xC0) != 0x80)
                return 0;
        p += len;
    }
    return 1;
}

/* ---- variable-length strings: read by us, not by libhdf5 ---------------------
 *
 * A variable-length element is stored as (length u32, global heap collection
 * address, object index u32); libhdf5 1.10 follows that reference without
 * bounds checks (a damaged file crashes inside H5HG_read, or loops there),
 * and its vlen conversion allocates what a damaged base type says.  So
 * vlen_strings() reads the raw elements itself (contiguous or unfiltered
 * chunked layouts), checks that each points at a well-formed collection
 * ("GCOL", version 1, inside the file, every object of it well-formed)
 * holding an object of that index and exactly that length, and copies the
 * strings out of the collection.  A compact layout (raw data inside the
 * object header, which the 1.10 format checksums) is left to libhdf5. */

typedef struct heap_cache {
    uint64_t addr;
    unsigned char *data;
    uint64_t size;
    int64_t *obj_size;  /* [65536]: size of object i of the collection, -1 = none */
    int64_t *obj_off;   /* [65536]: where its data starts in `data`            */
} heap_cache;

static uint64_t le_uint(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* Checks one element (len, addr, idx) against the heap; 1 ok. */
static int heap_ref_ok(int fd, uint64_t file_size, uint64_t base, int sa, int ss, heap_cache *hc, uint64_t len,
                       uint64_t addr, uint64_t idx)
{
    if (len == 0)
        return 1; /* an empty (or NULL) string reads nothing */
    if (len > NIR_MAX_STRING || idx == 0 || idx > 65535)
        return 0;
    uint64_t at = addr + base;
    if (addr >= file_size || at >= file_size)
        return 0;
    if (!hc->data || hc->addr != at) {
        unsigned char head[32];
        int hl = 8 + ss;
        if (at + (uint64_t)hl > file_size || pread_all(fd, head, (size_t)hl, at) != 0)
            return 0;
        uint64_t size = le_uint(head + 8, ss);
        if (memcmp(head, "GCOL", 4) != 0 || head[4] != 1 || size < (uint64_t)hl || size > ((uint64_t)1 << 26) ||
            at + size > file_size)
            return 0;
        unsigned char *data = malloc((size_t)size);
        if (!hc->obj_size)
            hc->obj_size = malloc(65536 * sizeof *hc->obj_size);
        if (!hc->obj_off)
            hc->obj_off = malloc(65536 * sizeof *hc->obj_off);
        if (!data || !hc->obj_size || !hc->obj_off || pread_all(fd, data, (size_t)size, at) != 0) {
            free(data);
            return 0;
        }
        free(hc->data);
        hc->data = NULL;
        /* libhdf5 parses the whole collection when it loads it
         * (H5HG__cache_heap_deserialize): an object whose size makes no
         * progress loops forever there, one that runs past the end makes it
         * read out of bounds.  Walk it the same way and refuse anything it
         * would not end cleanly on; remember each object's size (a later
         * object of the same index replaces an earlier one, as there). */
        uint64_t head_size = 8 + (uint64_t)ss, off = head_size;
        for (int k = 0; k < 65536; k++)
            hc->obj_size[k] = -1;
        while (off < size) {
            if (off + head_size > size)
                break; /* a tail too small for an object header is free space */
            const unsigned char *o = data + off;
            uint64_t oi = le_uint(o, 2), osize = le_uint(o + 8, ss), need;
            if (oi == 0) /* the free-space object: its size includes the header */
                need = osize;
            else if (osize > size)
                need = 0;
            else
                need = head_size + ((osize + 7) & ~(uint64_t)7);
            if (need == 0 || need > size - off) {
                free(data);
                return 0;
            }
            if (oi > 0) {
                hc->obj_size[oi] = (int64_t)osize;
                hc->obj_off[oi] = (int64_t)(off + head_size);
            }
            off += need;
        }
        hc->data = data;
        hc->size = size;
        hc->addr = at;
    }
    (void)sa;
    /* libhdf5 copies the object's size into a buffer of the element's */
    return hc->obj_size[idx] >= 0 && (uint64_t)hc->obj_size[idx] == len;
}

/* Reads the variable-length strings of dataset `name` from the file's bytes
 * (the elements, then each string from its checked heap object), never
 * through libhdf5's vlen conversion, which trusts a damaged file's heap and
 * base type (it allocated 24 GiB for one such file).  Returns 1 with *n
 * strings in *texts (free with nc_h5_free_strings; texts may be NULL to only
 * check), 0 when the dataset holds no variable-length strings or keeps them
 * in its object header (compact layout: libhdf5 reads them), -1 when they
 * point outside the heap or cannot be read (damaged). */
static int vlen_strings(hid_t g, const char *name, int64_t *n_out, char ***texts)
{
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID, dcpl = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hid_t f = H5I_INVALID_HID, fcpl = H5I_INVALID_HID;
    int ok = -1, fd = -1;
    heap_cache hc = {0};
    unsigned char *raw = NULL;
    if (t < 0)
        goto done;
    if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) <= 0) {
        ok = 0; /* fixed-length strings are read without the heap */
        goto done;
    }
    ok = -1;
    space = H5Dget_space(d);
    dcpl = H5Dget_create_plist(d);
    f = H5Iget_file_id(d);
    fcpl = f >= 0 ? H5Fget_create_plist(f) : H5I_INVALID_HID;
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    size_t sa = 0, ss = 0;
    hsize_t base = 0, file_size = 0;
    if (n < 0 || dcpl < 0 || fcpl < 0 || H5Pget_sizes(fcpl, &sa, &ss) < 0 || H5Pget_userblock(fcpl, &base) < 0 ||
        H5Fget_filesize(f, &file_size) < 0 || sa < 2 || sa > 8 || ss < 2 || ss > 8 || n > NIR_MAX_EDGES * 2)
        goto done;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_COMPACT) {
        ok = 0;
        goto done;
    }
    if (n == 0) {
        ok = 1;
        if (texts && !(*texts = calloc(1, sizeof(char *))))
            ok = -1;
        goto done;
    }
    char path[4096];
    ssize_t pl = H5Fget_name(f, path, sizeof path);
    if (pl <= 0 || (size_t)pl >= sizeof path || (fd = open(path, O_RDONLY)) < 0)
        goto done;
    size_t elem = 4 + sa + 4, bytes = (size_t)n * elem;
    if (!(raw = malloc(bytes)))
        goto done;
    if (layout == H5D_CONTIGUOUS) {
        haddr_t off = H5Dget_offset(d);
        if (off == HADDR_UNDEF || off + base + bytes > file_size || pread_all(fd, raw, bytes, off + base) != 0)
            goto done;
    } else if (layout == H5D_CHUNKED) {
        /* one unfiltered chunk holding every element (how writers store small
         * string arrays); anything else is not checked and refused */
        hsize_t nchunks = 0, coff[H5S_MAX_RANK], csize = 0;
        haddr_t caddr = HADDR_UNDEF;
        unsigned mask = 0;
        int rank = H5Sget_simple_extent_ndims(space);
        hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
        if (rank < 1 || H5Sget_simple_extent_dims(space, dims, NULL) < 0 || H5Pget_chunk(dcpl, rank, cdims) != rank ||
            H5Pget_nfilters(dcpl) != 0 || H5Dget_num_chunks(d, H5S_ALL, &nchunks) < 0 || nchunks != 1)
            goto done;
        for (int k = 0; k < rank; k++)
            if (cdims[k] < dims[k])
                goto done;
        if (H5Dget_chunk_info(d, H5S_ALL, 0, coff, &mask, &caddr, &csize) < 0 || caddr == HADDR_UNDEF)
            goto done;
        /* the chunk is laid out with its own dims; read it whole and pick
         * the elements row by row */
        size_t cn = 1;
        for (int k = 0; k < rank; k++)
            cn *= (size_t)cdims[k];
        if (cn > (size_t)NIR_MAX_EDGES * 4 || csize < cn * elem || caddr + base + cn * elem > file_size)
            goto done;
        unsigned char *chunk = malloc(cn * elem);
        if (!chunk || pread_all(fd, chunk, cn * elem, caddr + base) != 0) {
            free(chunk);
            goto done;
        }
        for (hssize_t e = 0; e < n; e++) {
            size_t rem = (size_t)e, at = 0, stride = 1;
            for (int k = rank - 1; k >= 0; k--) {
                at += (rem % dims[k]) * stride;
                rem /= dims[k];
                stride *= cdims[k];
            }
            memcpy(raw + (size_t)e * elem, chunk + at * elem, elem);
        }
        free(chunk);
    } else {
        goto done;
    }
    char **out = texts ? calloc((size_t)n, sizeof(char *)) : NULL;
    ok = texts && !out ? -1 : 1;
    for (hssize_t e = 0; e < n && ok == 1; e++) {
        const unsigned char *p = raw + (size_t)e * elem;
        uint64_t len = le_uint(p, 4), idx = le_uint(p + 4 + sa, 4);
        if (!heap_ref_ok(fd, file_size, base, (int)sa, (int)ss, &hc, len, le_uint(p + 4, (int)sa), idx))
            ok = -1;
        else if (out && !(out[e] = len ? strndup((const char *)hc.data + hc.obj_off[idx], (size_t)len) : strdup("")))
            ok = -1;
    }
    if (out && ok == 1) {
        *texts = out;
        *n_out = (int64_t)n;
    } else if (out) {
        nc_h5_free_strings((int64_t)n, out);
    }
done:
    free(raw);
    free(hc.data);
    free(hc.obj_size);
    free(hc.obj_off);
    if (fd >= 0)
        close(fd);
    nc_h5_close(&fcpl);
    nc_h5_close(&f);
    nc_h5_close(&dcpl);
    nc_h5_close(&space);
    nc_h5_close(&t);
    nc_h5_close(&d);
    return ok;
}

/* The strings of a dataset: variable-length ones through vlen_strings,
 * fixed-length (and compact) ones through nc_h5util. */
static nc_status read_texts(hid_t g, const char *name, int64_t *count, char ***texts, nc_error *err)
{
    *count = 0;
    *texts = NULL;
    int r = vlen_strings(g, name, count, texts);
    if (r < 0)
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s': its strings point outside the file's string heap (damaged)",
                       name);
    return r > 0 ? NC_OK : nc_h5_read_strings_any(g, name, count, texts, err);
}

/* The class of a dataset's element type. */
static H5T_class_t dataset_class(hid_t g, const char *name, int *ndim, int64_t *shape, nc_error *err)
{
    if (nc_h5_read_shape(g, name, NIR_MAX_NDIM, ndim, shape, err) != NC_OK)
        return H5T_NO_CLASS;
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID;
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    nc_h5_close(&t);
    nc_h5_close(&d);
    if (cls == H5T_NO_CLASS)
        nc_fail(err, NC_ERR_FORMAT, "dataset '%s' has no readable type", name);
    return cls;
}

/* Reads dataset `name` of group g into a new value of node n (meta: into
 * its metadata).  *skipped = 1 when its type is not one NIR uses. */
static nc_status read_value(hid_t g, const char *name, nir_node *n, int meta, int *skipped, nc_error *err)
{
    int ndim = 0;
    int64_t shape[NIR_MAX_NDIM];
    *skipped = 0;
    if (strlen(name) >= NIR_FIELD_NAME_MAX) {
        *skipped = 1;
        return NC_OK;
    }
    H5T_class_t cls = dataset_class(g, name, &ndim, shape, err);
    if (cls == H5T_NO_CLASS)
        return NC_ERR_FORMAT;
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        int rd;
        int64_t rshape[NIR_MAX_NDIM];
        nc_status st;
        void *data = NULL;
        if (cls == H5T_INTEGER)
            st = nc_h5_read_i64(g, name, NIR_MAX_NDIM, &rd, rshape, (int64_t **)&data, err);
        else
            st = nc_h5_read_f32(g, name, NIR_MAX_NDIM, &rd, rshape, (float **)&data, err);
        if (st != NC_OK)
            return st;
        nir_value *v = cls == H5T_INTEGER ? nir_add_int(n, meta, name, 0, NULL) : nir_add_float(n, meta, name, 0, NULL);
        if (!v) {
            free(data);
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for dataset '%s'", name);
        }
        free(v->f);
        free(v->i);
        v->f = NULL;
        v->i = NULL;
        v->ndim = rd;
        memcpy(v->shape, rshape, (size_t)rd * sizeof(int64_t));
        v->numel = nc_shape_numel(rd, rshape);
        if (cls == H5T_INTEGER)
            v->i = data;
        else
            v->f = data;
        return NC_OK;
    }
    if (cls == H5T_STRING) {
        if (ndim > 1) {
            *skipped = 1; /* only `edges` is a 2-d string array; read elsewhere */
            return NC_OK;
        }
        int64_t count = 0;
        char **texts = NULL;
        nc_status st = read_texts(g, name, &count, &texts, err);
        if (st != NC_OK)
            return st;
        for (int64_t k = 0; k < count; k++)
            if (strlen(texts[k]) >= NIR_MAX_STRING || !text_ok(texts[k])) {
                nc_h5_free_strings(count, texts);
                return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' holds a string that is too long or not UTF-8 text",
                               name);
            }
        nir_value *v = add_value(n, meta, name);
        if (!v) {
            nc_h5_free_strings(count, texts);
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for dataset '%s'", name);
        }
        v->kind = NIR_STRING;
        v->ndim = ndim;
        v->shape[0] = count;
        v->numel = count;
        v->s = texts;
        return NC_OK;
    }
    *skipped = 1;
    return NC_OK;
}

/* The (N, 2) `edges` string dataset of a graph. */
static nc_status read_edges(hid_t g, nir_graph *gr, nc_error *err)
{
    hid_t d = H5I_INVALID_HID, ftype = H5I_INVALID_HID, space = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
    hid_t dcpl = H5I_INVALID_HID;
    void *buf = NULL;
    char **names = NULL, **own = NULL; /* own: vlen strings read by vlen_strings */
    int64_t own_count = 0;
    herr_t rc = -1;
    int is_vlen = 0;
    nc_status st = NC_OK;
    int ndim = 0;
    int64_t shape[NIR_MAX_NDIM] = {0};
    if ((st = nc_h5_read_shape(g, "edges", NIR_MAX_NDIM, &ndim, shape, err)) != NC_OK)
        return st;
    int64_t n = ndim == 2 ? shape[0] : 0;
    if (!(ndim == 2 && shape[1] == 2) && !(ndim == 1 && shape[0] == 0) && !(ndim == 2 && shape[0] == 0))
        return nc_fail(err, NC_ERR_FORMAT, "field 'edges' must be an (N, 2) array of node names");
    if (n > NIR_MAX_EDGES)
        return nc_fail(err, NC_ERR_FORMAT, "field 'edges' has %lld edges, more than %d", (long long)n, NIR_MAX_EDGES);
    gr->has_edges = 1;
    if (n == 0)
        return NC_OK;
    d = H5Dopen2(g, "edges", H5P_DEFAULT);
    ftype = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID;
    space = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
    dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    if (d < 0 || ftype < 0 || space < 0 || dcpl < 0 || H5Tget_class(ftype) != H5T_STRING) {
        st = nc_fail(err, NC_ERR_FORMAT, "field 'edges' is not an array of strings");
        goto done;
    }
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (H5Pget_external_count(dcpl) != 0 || layout == H5D_VIRTUAL || layout == H5D_LAYOUT_ERROR) {
        st = nc_fail(err, NC_ERR_FORMAT, "field 'edges' stores its data in other files, which is refused");
        goto done;
    }
    own_count = 0;
    int vr = vlen_strings(g, "edges", &own_count, &own); /* 1: read by us, from the file's bytes */
    if (vr < 0 || (vr > 0 && own_count != 2 * n)) {
        st = nc_fail(err, NC_ERR_FORMAT, "field 'edges': its strings point outside the file's string heap (damaged)");
        goto done;
    }
    is_vlen = H5Tis_variable_str(ftype) > 0;
    size_t fsize = is_vlen ? sizeof(char *) : H5Tget_size(ftype);
    size_t disk = is_vlen ? 16 : fsize; /* a vlen element is 16 bytes in the file */
    hsize_t stored = H5Dget_storage_size(d);
    if (fsize == 0 || fsize > NIR_MAX_STRING ||
        ((layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) && stored < (hsize_t)(2 * n) * disk) ||
        (layout == H5D_CHUNKED && stored == 0)) {
        st = nc_fail(err, NC_ERR_FORMAT, "field 'edges' declares %lld edges but the file does not hold them (truncated?)",
                     (long long)n);
        goto done;
    }
    mtype = H5Tcopy(H5T_C_S1);
    H5Tset_size(mtype, is_vlen ? H5T_VARIABLE : fsize);
    H5Tset_cset(mtype, H5Tget_cset(ftype));
    buf = own ? NULL : calloc((size_t)(2 * n), fsize);
    if (!own && !buf) {
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for %lld edges", (long long)n);
        goto done;
    }
    if (!own && (rc = H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) < 0) {
        char why[256];
        st = nc_fail(err, NC_ERR_FORMAT, "field 'edges' cannot be read: %s", nc_h5_error_text(why, sizeof why));
        goto done;
    }
    names = calloc((size_t)(2 * n), sizeof(char *));
    if (!names) {
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for %lld edges", (long long)n);
        goto done;
    }
    for (int64_t k = 0; k < 2 * n && st == NC_OK; k++) {
        const char *s = own ? own[k] : is_vlen ? ((char **)buf)[k] : (const char *)buf + (size_t)k * fsize;
        size_t len = s ? (is_vlen ? strnlen(s, NC_NAME_MAX) : strnlen(s, fsize)) : 0;
        if (len == 0 || len >= NC_NAME_MAX)
            st = nc_fail(err, NC_ERR_FORMAT, "field 'edges': edge %lld has an empty or too long node name",
                         (long long)(k / 2));
        else if (!(names[k] = strndup(s, len)))
            st = nc_fail(err, NC_ERR_MEMORY, "out of memory for the edges");
        else if (!text_ok(names[k]))
            st = nc_fail(err, NC_ERR_FORMAT, "field 'edges': edge %lld names a node in bytes that are not UTF-8 text",
                         (long long)(k / 2));
    }
    if (st == NC_OK) {
        gr->edges = names;
        gr->n_edges = gr->cap_edges = n;
        names = NULL;
    }
done:
    nc_h5_free_strings(own_count, own);
    if (names)
        for (int64_t k = 0; k < 2 * n; k++)
            free(names[k]);
    free(names);
    if (buf) {
        if (rc >= 0 && is_vlen)
            H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
        free(buf);
    }
    nc_h5_close(&mtype);
    nc_h5_close(&dcpl);
    nc_h5_close(&space);
    nc_h5_close(&ftype);
    nc_h5_close(&d);
    return st;
}

/* Reads the datasets of a `metadata` group (numbers and strings; nested
 * groups and other types are skipped). */
static nc_status read_metadata(reader *r, hid_t parent, nir_node *n, const char *path)
{
    name_list l = {0};
    hid_t g = H5I_INVALID_HID;
    nc_status st = nc_h5_group_open(parent, "metadata", &g, r->err);
    if (st == NC_OK)
        st = list_group(g, "group 'metadata'", &l, r->err);
    for (int k = 0; st == NC_OK && k < l.count; k++) {
        int skipped = 0;
        if (object_type(g, l.names[k]) != H5O_TYPE_DATASET)
            continue;
        st = read_value(g, l.names[k], n, 1, &skipped, r->err);
        if (st != NC_OK)
            nc_error_prefix(r->err, "metadata");
    }
    (void)path;
    name_list_free(&l);
    nc_h5_close(&g);
    return st;
}

static nc_status read_node(reader *r, hid_t parent, const char *link, const char *path, int depth, nir_node *out);

/* The `nodes` group of a NIRGraph node. */
static nc_status read_graph(reader *r, hid_t g, const char *path, int depth, nir_node *n)
{
    hid_t nodes = H5I_INVALID_HID;
    name_list l = {0};
    if (!(n->graph = nir_graph_new()))
        return nc_fail(r->err, NC_ERR_MEMORY, "out of memory");
    if (!nc_h5_exists(g, "nodes") || object_type(g, "nodes") != H5O_TYPE_GROUP)
        return nc_fail(r->err, NC_ERR_FORMAT, "%s (NIRGraph): field 'nodes' is missing (a group of node groups)", path);
    nc_status st = nc_h5_group_open(g, "nodes", &nodes, r->err);
    if (st == NC_OK)
        st = list_group(nodes, "group 'nodes'", &l, r->err);
    if (st != NC_OK)
        nc_error_prefix(r->err, "%s (NIRGraph)", path);
    for (int k = 0; st == NC_OK && k < l.count; k++) {
        if (++r->total_nodes > NIR_MAX_NODES) {
            st = nc_fail(r->err, NC_ERR_FORMAT, "the file holds more than %d nodes", NIR_MAX_NODES);
            break;
        }
        char child[2 * NC_NAME_MAX + 8];
        if (depth == 0)
            snprintf(child, sizeof child, "node '%s'", l.names[k]);
        else
            snprintf(child, sizeof child, "%.*s.%s'", (int)strlen(path) - 1, path, l.names[k]);
        nir_node *c = nir_graph_add(n->graph, l.names[k], "");
        if (!c) {
            st = nc_fail(r->err, NC_ERR_MEMORY, "out of memory");
            break;
        }
        st = read_node(r, nodes, l.names[k], child, depth + 1, c);
    }
    name_list_free(&l);
    nc_h5_close(&nodes);
    if (st != NC_OK)
        return st;
    if (!nc_h5_exists(g, "edges")) {
        return nc_fail(r->err, NC_ERR_FORMAT, "%s (NIRGraph): field 'edges' is missing (an (N, 2) array of node names)",
                       path);
    }
    st = read_edges(g, n->graph, r->err);
    if (st != NC_OK)
        nc_error_prefix(r->err, "%s (NIRGraph)", path);
    return st;
}

/* path: how messages name this node, e.g. "node 'lif1.lif'". */
static nc_status read_node(reader *r, hid_t parent, const char *link, const char *path, int depth, nir_node *out)
{
    hid_t g = H5I_INVALID_HID;
    name_list l = {0};
    nc_status st;
    if (depth > NIR_MAX_DEPTH)
        return nc_fail(r->err, NC_ERR_FORMAT, "%s: graphs nested more than %d deep", path, NIR_MAX_DEPTH);
    if (object_type(parent, link) != H5O_TYPE_GROUP)
        return nc_fail(r->err, NC_ERR_FORMAT, "%s: is not a group (every NIR node is an HDF5 group)", path);
    if ((st = nc_h5_group_open(parent, link, &g, r->err)) != NC_OK) {
        nc_error_prefix(r->err, "%s", path);
        return st;
    }
    /* the type: a scalar string dataset */
    if (!nc_h5_exists(g, "type") || object_type(g, "type") != H5O_TYPE_DATASET) {
        if (nc_h5_attr_exists(g, "type"))
            st = nc_fail(r->err, NC_ERR_FORMAT,
                         "%s: field 'type' is stored as an HDF5 attribute; NIR needs a scalar string dataset 'type'",
                         path);
        else
            st = nc_fail(r->err, NC_ERR_FORMAT, "%s: field 'type' is missing (a scalar string dataset naming the node type)",
                         path);
        goto done;
    }
    {
        int ndim = 0;
        int64_t shape[NIR_MAX_NDIM];
        int64_t count = 0;
        char **texts = NULL;
        H5T_class_t cls = dataset_class(g, "type", &ndim, shape, r->err);
        if (cls != H5T_STRING) {
            st = nc_fail(r->err, NC_ERR_FORMAT, "%s: field 'type' is not a string", path);
            goto done;
        }
        if ((st = read_texts(g, "type", &count, &texts, r->err)) != NC_OK) {
            nc_error_prefix(r->err, "%s", path);
            goto done;
        }
        if (count != 1 || strlen(texts[0]) >= NIR_TYPE_MAX || !text_ok(texts[0]) || !texts[0][0]) {
            st = nc_fail(r->err, NC_ERR_FORMAT, "%s: field 'type' must be one short string, found %lld", path,
                         (long long)count);
            nc_h5_free_strings(count, texts);
            goto done;
        }
        snprintf(out->type, sizeof out->type, "%s", texts[0]);
        nc_h5_free_strings(count, texts);
        if (ndim != 0)
            nir_note(r->notes, NC_NIR_NOTE_WARNING, out->name,
                     "field 'type' is a 1-element array, not a scalar (the official reader refuses that); read anyway");
    }
    if ((st = list_group(g, path, &l, r->err)) != NC_OK)
        goto done;
    int is_graph = strcmp(out->type, "NIRGraph") == 0;
    for (int k = 0; st == NC_OK && k < l.count; k++) {
        const char *name = l.names[k];
        H5O_type_t ot = object_type(g, name);
        if (strcmp(name, "type") == 0)
            continue;
        if (ot == H5O_TYPE_GROUP) {
            if (strcmp(name, "metadata") == 0) {
                st = read_metadata(r, g, out, path);
                if (st != NC_OK)
                    nc_error_prefix(r->err, "%s", path);
            } else if (!(is_graph && strcmp(name, "nodes") == 0)) {
                nir_note(r->notes, NC_NIR_NOTE_WARNING, out->name, "group '%s' is not a NIR field; ignored", name);
            }
            continue;
        }
        if (ot != H5O_TYPE_DATASET || (is_graph && strcmp(name, "edges") == 0))
            continue;
        int skipped = 0;
        st = read_value(g, name, out, 0, &skipped, r->err);
        if (st != NC_OK)
            nc_error_prefix(r->err, "%s: field '%s'", path, name);
        else if (skipped)
            nir_note(r->notes, NC_NIR_NOTE_WARNING, out->name, "dataset '%s' has a type NIR does not use; ignored", name);
    }
    if (st == NC_OK && is_graph)
        st = read_graph(r, g, path, depth, out);
done:
    name_list_free(&l);
    nc_h5_close(&g);
    return st;
}

nc_status nir_read_file(const char *path, nir_node *root, char *version, size_t version_size,
                        nc_nir_notes *notes, nc_error *err)
{
    hid_t f;
    memset(root, 0, sizeof *root);
    if (version_size)
        version[0] = 0;
    nc_status st = nc_h5_open_read(path, &f, err);
    if (st != NC_OK)
        return st;
    reader r = {notes, err, 0};
    if (nc_h5_exists(f, "version") && object_type(f, "version") == H5O_TYPE_DATASET) {
        int64_t n = 0;
        char **texts = NULL;
        nc_error ignored;
        if (read_texts(f, "version", &n, &texts, &ignored) == NC_OK && n == 1 &&
            strlen(texts[0]) < 64 && text_ok(texts[0]))
            snprintf(version, version_size, "%s", texts[0]);
        nc_h5_free_strings(n, texts);
    }
    if (!nc_h5_exists(f, "node")) {
        st = nc_fail(err, NC_ERR_FORMAT, "no group 'node': this HDF5 file is not a NIR graph");
    } else {
        snprintf(root->name, sizeof root->name, "node");
        st = read_node(&r, f, "node", "graph 'node'", 0, root);
        if (st == NC_OK && strcmp(root->type, "NIRGraph") != 0)
            st = nc_fail(err, NC_ERR_UNSUPPORTED, "the top node is a '%s', not a NIRGraph", root->type);
    }
    nc_h5_close(&f);
    if (st != NC_OK) {
        nir_node_clear(root);
        nc_error_prefix(err, "%s", path);
    }
    return st;
}
