/* fuzz_onnx.c — ONNX import (nc_onnx_load_with_report), with external data,
 * and the TensorProto file reader (nc_onnx_read_tensor_file).
 * Input: the model bytes [FUZZ_SPLIT external data bytes [FUZZ_SPLIT the
 * data file's name]], written as model.onnx and, next to it, the data file
 * under that name (default model.onnx.data; only [A-Za-z0-9._-], ≤ 64). */
#define NC_FUZZ_WANT_NET
#include "fuzz_common.h"
#include "nc_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *parts[3];
    size_t sizes[3];
    char model[1024], extra[1024], name[80] = "model.onnx.data";
    int n = fuzz_split(data, size, parts, sizes, 3);
    if (n > 2 && sizes[2] >= 1 && sizes[2] <= 64) {
        int ok = 1;
        for (size_t i = 0; i < sizes[2]; i++) {
            char ch = (char)parts[2][i];
            ok &= (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '.' || ch == '_' || ch == '-';
        }
        if (ok && !(sizes[2] <= 2 && parts[2][0] == '.')) /* not "." or ".." */
            snprintf(name, sizeof name, "%.*s", (int)sizes[2], (const char *)parts[2]);
        if (strcmp(name, "model.onnx") == 0)
            snprintf(name, sizeof name, "model.onnx.data");
    }
    fuzz_write("model.onnx", parts[0], sizes[0], model, sizeof model);
    if (n > 1)
        fuzz_write(name, parts[1], sizes[1], extra, sizeof extra);
    nc_net *net = NULL;
    nc_report report = {0};
    nc_error err = {0};
    if (nc_onnx_load_with_report(model, NULL, &net, &report, &err) == NC_OK)
        fuzz_use_net(net);
    nc_report_clear(&report);
    nc_net_free(net);
    if (n > 1)
        fuzz_remove(name);
    /* the same bytes as a serialized TensorProto (ONNX test data files) */
    nc_tensor *t = NULL;
    if (nc_onnx_read_tensor_file(model, &t, &err) == NC_OK)
        (void)nc_tensor_numel(t);
    nc_tensor_free(t);
    return 0;
}
