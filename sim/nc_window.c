/* nc_window.c — a sliding window's geometry from a node's parameters (see nc_window.h). */
#include "nc_window.h"

#include <string.h>

int nc_window_init(nc_window *g, int c, int h, int w, const int kernel[2], const int stride[2],
                   const int pad[4], const int dilation[2], int ceil_mode)
{
    memset(g, 0, sizeof *g);
    if (c < 1 || h < 1 || w < 1)
        return -1;
    for (int i = 0; i < 2; i++)
        if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1)
            return -1;
    for (int i = 0; i < 4; i++)
        if (pad[i] < 0)
            return -1;
    g->c = c;
    g->h = h;
    g->w = w;
    memcpy(g->kernel, kernel, sizeof g->kernel);
    memcpy(g->stride, stride, sizeof g->stride);
    memcpy(g->pad, pad, sizeof g->pad);
    memcpy(g->dilation, dilation, sizeof g->dilation);
    g->oh = nc_window_out_size(h, kernel[0], stride[0], pad[0], pad[2], dilation[0], ceil_mode);
    g->ow = nc_window_out_size(w, kernel[1], stride[1], pad[1], pad[3], dilation[1], ceil_mode);
    return g->oh > 0 && g->ow > 0 ? 0 : -1;
}
