/* test_net.c — the network IR: shape inference, costs, fan-out, clone, and
 * the errors that name the node. */
#include "nc_test.h"

#include "nc_net.h"

/* input [1,8,8] → conv 3x3 (4 out, pad 1) → relu → maxpool 2 → flatten → dense 10 → output */
static nc_net *small_cnn(void)
{
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[in].ndim = 3;
    net->nodes[in].shape[0] = 1;
    net->nodes[in].shape[1] = 8;
    net->nodes[in].shape[2] = 8;
    int conv = nc_net_add_node(net, NC_NODE_CONV2D, "conv", 1, &in);
    net->nodes[conv].weight = nc_tensor_new4(4, 1, 3, 3);
    net->nodes[conv].bias = nc_tensor_new1(4);
    for (int i = 0; i < 4; i++)
        net->nodes[conv].pad[i] = 1;
    int relu = nc_net_add_node(net, NC_NODE_NEURON, "relu", 1, &conv);
    int pool = nc_net_add_node(net, NC_NODE_MAXPOOL, "pool", 1, &relu);
    net->nodes[pool].kernel[0] = net->nodes[pool].kernel[1] = 2;
    net->nodes[pool].stride[0] = net->nodes[pool].stride[1] = 2;
    int flat = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &pool);
    int fc = nc_net_add_node(net, NC_NODE_DENSE, "fc", 1, &flat);
    net->nodes[fc].weight = nc_tensor_new2(10, 64);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &fc);
    return net;
}

static void test_shapes_and_costs(void)
{
    nc_net *net = small_cnn();
    nc_error err = {0};
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_OK, "%s", err.message);
    NC_CHECK(net->nodes[1].shape[0] == 4 && net->nodes[1].shape[1] == 8 && net->nodes[1].shape[2] == 8, "conv");
    NC_CHECK(net->nodes[3].shape[1] == 4 && net->nodes[3].shape[2] == 4, "pool 8→4");
    NC_CHECK(net->nodes[4].ndim == 1 && net->nodes[4].shape[0] == 64, "flatten");
    NC_CHECK(net->nodes[6].shape[0] == 10, "output");
    NC_CHECK(nc_node_macs(net, 1) == 4 * 8 * 8 * 9, "conv MACs %lld", (long long)nc_node_macs(net, 1));
    NC_CHECK(nc_node_macs(net, 5) == 640, "dense MACs");
    NC_CHECK(nc_net_params(net) == 36 + 4 + 640, "params %lld", (long long)nc_net_params(net));
    /* every pooled value drives 10 synapses; each relu value reaches one window */
    NC_CHECK_CLOSE(nc_node_fanout(net, 2), 10.0, 1e-9, 0, "fan-out of relu through the pool");
    NC_CHECK_CLOSE(nc_node_fanout(net, 0), 4 * 9.0 * 64 / 64, 1e-9, 0, "input fan-out (conv MACs / inputs)");
    NC_CHECK(nc_net_consumers(net, 2) == 1, "consumers");
    nc_net_free(net);
}

/* ONNX/PyTorch pooling rule: ceil_mode drops a window that starts in the padding. */
static void test_pool_ceil_mode(void)
{
    nc_net *net = small_cnn();
    nc_node *pool = &net->nodes[3];
    pool->kernel[0] = pool->kernel[1] = 3;
    pool->ceil_mode = 1;
    nc_error err = {0};
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_OK, "%s", err.message);
    /* (8 - 3) / 2 = 2.5 → ceil 3 +1 = 4 windows; last starts at 6 < 8: kept */
    NC_CHECK(pool->shape[1] == 4, "ceil gives %lld", (long long)pool->shape[1]);
    pool->ceil_mode = 0;
    nc_net_infer_shapes(net, &err);
    NC_CHECK(pool->shape[1] == 3, "floor gives %lld", (long long)pool->shape[1]);
    /* padding 1, kernel 2, stride 2 on 5 → ceil((5+1-2)/2)+1 = 3, start 4 < 5+1: kept */
    net->nodes[0].shape[1] = net->nodes[0].shape[2] = 5;
    net->nodes[5].weight->shape[1] = 4 * 9;
    pool->kernel[0] = pool->kernel[1] = 2;
    pool->pad[0] = pool->pad[1] = 1;
    pool->ceil_mode = 1;
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_OK, "%s", err.message);
    NC_CHECK(pool->shape[1] == 3, "padded ceil gives %lld", (long long)pool->shape[1]);
    nc_net_free(net);
}

static void test_errors_name_the_node(void)
{
    nc_net *net = small_cnn();
    nc_error err = {0};
    net->nodes[5].weight->shape[1] = 63; /* dense expects 63 inputs, gets 64 */
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_ERR_SHAPE, "mismatch detected");
    NC_CHECK(strstr(err.message, "'fc'") && strstr(err.message, "63") && strstr(err.message, "64"), "%s",
             err.message);
    net->nodes[5].weight->shape[1] = 64;
    net->nodes[2].neuron.model = NC_NEURON_IF; /* IF without threshold */
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_ERR_SHAPE && strstr(err.message, "'relu'"), "%s", err.message);
    float theta[3] = {1, 2, 3}; /* 3 thresholds for 4 channels */
    nc_neuron_set_threshold(&net->nodes[2].neuron, 3, theta, &err);
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_ERR_SHAPE && strstr(err.message, "3 threshold"), "%s",
             err.message);
    float four[4] = {1, 2, 3, -1};
    nc_neuron_set_threshold(&net->nodes[2].neuron, 4, four, &err);
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_ERR_ARGUMENT, "negative threshold refused: %s", err.message);
    nc_net_free(net);
}

static void test_clone_is_deep(void)
{
    nc_net *net = small_cnn();
    nc_error err = {0};
    float theta = 2.5f;
    net->nodes[2].neuron.model = NC_NEURON_IF;
    nc_neuron_set_threshold(&net->nodes[2].neuron, 1, &theta, &err);
    nc_net_infer_shapes(net, &err);
    nc_report_add(&net->report, "Conv_0", "Conv", 13, NC_SUPPORT_CONVERTED, "conv", NULL);
    nc_net *copy = nc_net_clone(net);
    NC_CHECK(copy && copy->n_nodes == net->n_nodes, "clone");
    net->nodes[1].weight->data[0] = 7;
    net->nodes[2].neuron.threshold[0] = 9;
    NC_CHECK(copy->nodes[1].weight->data[0] == 0, "weights copied");
    NC_CHECK(copy->nodes[2].neuron.threshold[0] == 2.5f, "thresholds copied");
    NC_CHECK(copy->report.count == 1 && strcmp(copy->report.entries[0].target, "conv") == 0, "report copied");
    NC_CHECK(nc_net_find(copy, "fc") == 5 && nc_net_find(copy, "nope") == -1, "find");
    nc_net_free(copy);
    nc_net_free(net);
    nc_net_free(NULL);
}

static void test_names_and_parsing(void)
{
    nc_maxpool_strategy s;
    NC_CHECK(nc_maxpool_strategy_parse("gated", &s) == 0 && s == NC_MAXPOOL_GATED, "gated");
    NC_CHECK(nc_maxpool_strategy_parse("pre-spike", &s) == 0 && s == NC_MAXPOOL_PRE_SPIKE, "pre-spike");
    NC_CHECK(nc_maxpool_strategy_parse("max", &s) == -1, "bad strategy");
    NC_CHECK(strcmp(nc_node_kind_name(NC_NODE_GLOBAL_AVGPOOL), "global-avgpool") == 0, "kind name");
    size_t out;
    NC_CHECK(nc_mul_size(SIZE_MAX / 2, 3, &out) == -1, "overflow detected");
    NC_CHECK(nc_mul_size(1000, 1000, &out) == 0 && out == 1000000, "product");
    char buf[64];
    int64_t shape[3] = {3, 28, 28};
    NC_CHECK(strcmp(nc_shape_str(3, shape, buf, sizeof buf), "[3, 28, 28]") == 0, "%s", buf);
}

int main(void)
{
    NC_RUN(test_shapes_and_costs);
    NC_RUN(test_pool_ceil_mode);
    NC_RUN(test_errors_name_the_node);
    NC_RUN(test_clone_is_deep);
    NC_RUN(test_names_and_parsing);
    return nc_test_done();
}
