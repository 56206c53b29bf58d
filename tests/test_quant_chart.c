/* test_quant_chart.c — the workbench's loihi quantisation-error chart
 * (ui/nc-quant-chart.c): one bar group per synaptic layer from a converted
 * net, the reason shown for a net the engine cannot quantise, and a PNG
 * export of the drawing.  Needs a display: meson runs it under xvfb-run; it
 * skips (TAP) when GTK cannot open one. */
#include "nc_test.h"
#include "nc_test_util.h"

#include <adwaita.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/nc_loihi.h"
#include "nc-quant-chart.h"

/* x[4] → fc1 → if1 → fc2 → out, weights w·k. */
static nc_net *tiny_snn(float scale)
{
    nc_net *net = nc_net_new();
    int x = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[x].ndim = 1, net->nodes[x].shape[0] = 4;
    int h = nc_net_add_node(net, NC_NODE_DENSE, "fc1", 1, &x);
    net->nodes[h].weight = nc_tensor_new2(3, 4);
    for (int k = 0; k < 12; k++)
        net->nodes[h].weight->data[k] = scale * (float)((k * 5) % 7 - 3) / 7.0f;
    int s = nc_net_add_node(net, NC_NODE_NEURON, "if1", 1, &h);
    float th = 0.8f;
    net->nodes[s].neuron.model = NC_NEURON_IF;
    nc_neuron_set_threshold(&net->nodes[s].neuron, 1, &th, NULL);
    int o = nc_net_add_node(net, NC_NODE_DENSE, "fc2", 1, &s);
    net->nodes[o].weight = nc_tensor_new2(2, 3);
    for (int k = 0; k < 6; k++)
        net->nodes[o].weight->data[k] = (float)(k % 3) - 1.0f;
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &o);
    return inferred(net);
}

static void test_chart(void)
{
    GtkWidget *w = nc_quant_chart_new();
    g_object_ref_sink(w);
    NcQuantChart *chart = NC_QUANT_CHART(w);
    nc_net *net = tiny_snn(1.0f);
    nc_quant_chart_set_net(chart, net);
    NC_CHECK(nc_quant_chart_get_n_layers(chart) == 2, "two synaptic layers: %d", nc_quant_chart_get_n_layers(chart));
    char path[256];
    snprintf(path, sizeof path, "%s/nc_quant_chart_%d.png", g_get_tmp_dir(), (int)getpid());
    GError *error = NULL;
    NC_CHECK(nc_chart_export(NC_CHART(w), path, 600, 300, &error), "export: %s", error ? error->message : "");
    struct stat st;
    NC_CHECK(stat(path, &st) == 0 && st.st_size > 1000, "a PNG was drawn");
    remove(path);
    g_clear_error(&error);
    /* weights far beyond 254·2^7 thresholds: no bars, the reason instead */
    nc_net *bad = tiny_snn(1e7f);
    nc_quant_chart_set_net(chart, bad);
    NC_CHECK(nc_quant_chart_get_n_layers(chart) == 0, "a net the engine refuses shows no bars");
    nc_quant_chart_set_net(chart, NULL);
    NC_CHECK(nc_quant_chart_get_n_layers(chart) == 0, "cleared");
    nc_net_free(bad);
    nc_net_free(net);
    g_object_unref(w);
}

int main(void)
{
    if (!gtk_init_check()) {
        printf("1..0 # SKIP no display (run under xvfb-run)\n");
        return 0;
    }
    adw_init();
    NC_RUN(test_chart);
    return nc_test_done();
}
