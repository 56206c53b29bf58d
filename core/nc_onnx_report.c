/* nc_onnx_report.c — ONNX import, the conversion report: one entry per ONNX
 * node (converted / folded / removed / unsupported, and why), constants
 * credited to the IR node that absorbs them, the report put in graph order,
 * and the one message that lists every unsupported node. */
#include "nc_onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- report ---- */

nc_status onnx_report(nctx *c, nc_support support, const char *target, const char *reason)
{
    importer *imp = c->imp;
    if (!nc_report_add(&imp->report, c->name, c->op, imp->opset, support, target, "%s", reason ? reason : ""))
        return onnx_oom(imp);
    imp->entry[c->index] = imp->report.count - 1;
    imp->handled[c->index] = 1;
    return NC_OK;
}

/* A constant-folded node is reported as folded into the first IR node that
 * reads its result; until one does, the target stays empty. */
static void credit_constants(importer *imp, const value *v, const char *target)
{
    int *stack = malloc((size_t)(imp->n_nodes + 1) * sizeof *stack);
    if (!stack)
        return; /* only the report's target names are lost */
    int top = 0;
    if (v->producer >= 0)
        stack[top++] = v->producer;
    while (top > 0) {
        int k = stack[--top];
        int e = imp->entry[k];
        if (e < 0 || imp->report.entries[e].support != NC_SUPPORT_FOLDED || imp->report.entries[e].target[0])
            continue;
        snprintf(imp->report.entries[e].target, NC_NAME_MAX, "%s", target);
        const Onnx__NodeProto *p = imp->graph->node[k];
        for (size_t i = 0; i < p->n_input && top < imp->n_nodes; i++) {
            int iv = p->input[i] && p->input[i][0] ? onnx_find_value(imp, p->input[i]) : -1;
            if (iv >= 0 && imp->values[iv].producer >= 0)
                stack[top++] = imp->values[iv].producer;
        }
    }
    free(stack);
}

void onnx_credit_node_constants(nctx *c, const char *target)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = onnx_in_value(c, i);
        if (v && v->c)
            credit_constants(c->imp, v, target);
    }
}

/* Node c cannot be converted: report it and let its outputs stand in for its
 * first data input, so that the nodes after it can still be checked. */
nc_status onnx_mark_unsupported(nctx *c, const char *why, int unchecked)
{
    importer *imp = c->imp;
    const value *src = NULL;
    for (size_t i = 0; i < c->p->n_input && !src; i++) {
        value *v = onnx_in_value(c, i);
        src = v && !v->c ? v : NULL;
    }
    for (size_t i = 0; i < c->p->n_output; i++) {
        value *o = onnx_out_value(c, i);
        if (!o)
            continue;
        onnx_cv_free(o->c);
        o->c = NULL;
        o->tainted = 1;
        o->ir = src ? src->ir : -1;
        if (c->guess_ndim >= 0)
            onnx_set_dims(&o->ndim, o->dims, c->guess_ndim, c->guess);
        else
            onnx_set_dims(&o->ndim, o->dims, src ? src->ndim : 0, src ? src->dims : NULL);
    }
    imp->unchecked[c->index] = unchecked;
    imp->n_unsupported += !unchecked;
    return onnx_report(c, NC_SUPPORT_UNSUPPORTED, "", why);
}

/* One message listing every unsupported node, with what to do. */
nc_status onnx_unsupported_message(importer *imp)
{
    char list[NC_ERROR_MESSAGE_MAX];
    int with_reasons = 1, listed = 0, skipped = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t used = 0;
        listed = skipped = 0;
        list[0] = 0;
        for (int k = 0; k < imp->n_nodes; k++) {
            int e = imp->entry[k];
            if (e < 0 || imp->report.entries[e].support != NC_SUPPORT_UNSUPPORTED || imp->unchecked[k])
                continue;
            const nc_report_entry *r = &imp->report.entries[e];
            char item[NC_NAME_MAX + 700];
            snprintf(item, sizeof item, "%s%s (%s, opset %d)%s%s", listed ? "; " : "", r->source_name, r->op_type,
                     r->opset, with_reasons ? ": " : "", with_reasons ? r->reason : "");
            if (used + strlen(item) + 40 >= sizeof list - 300) {
                skipped++;
                continue;
            }
            used += (size_t)snprintf(list + used, sizeof list - used, "%s", item);
            listed++;
        }
        if (!skipped)
            break;
        with_reasons = 0;
    }
    char more[48] = "";
    if (skipped)
        snprintf(more, sizeof more, " and %d more", skipped);
    return onnx_ifail(imp, NC_ERR_UNSUPPORTED,
                      "%d unsupported node%s: %s%s. Replace %s in the PyTorch model with supported layers "
                 "(see docs/ONNX.md) and export again; the conversion report lists every node",
                 imp->n_unsupported, imp->n_unsupported == 1 ? "" : "s", list, more,
                 imp->n_unsupported == 1 ? "it" : "them");
}

/* Puts the report in graph order (constants are folded first). */
nc_status onnx_sort_report(importer *imp)
{
    nc_report_entry *sorted = malloc((size_t)(imp->report.count + 1) * sizeof *sorted);
    if (!sorted)
        return onnx_oom(imp);
    int n = 0;
    for (int k = 0; k < imp->n_nodes; k++) {
        if (imp->entry[k] >= 0) {
            sorted[n] = imp->report.entries[imp->entry[k]];
            imp->entry[k] = n++;
        }
    }
    free(imp->report.entries);
    imp->report.entries = sorted;
    imp->report.count = imp->report.capacity = n;
    return NC_OK;
}

nc_status onnx_copy_report(const nc_report *src, nc_report *dst)
{
    memset(dst, 0, sizeof *dst);
    if (!src->count)
        return NC_OK;
    dst->entries = malloc((size_t)src->count * sizeof *dst->entries);
    if (!dst->entries)
        return NC_ERR_MEMORY;
    memcpy(dst->entries, src->entries, (size_t)src->count * sizeof *dst->entries);
    dst->count = dst->capacity = src->count;
    return NC_OK;
}
