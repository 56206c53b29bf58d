/* nc-paint-memory.c — keeps the memory that a repaint uses touched (see header). */
#include "nc-paint-memory.h"

#include <stdlib.h>
#include <string.h>

#if defined(NC_PAINT_MEMORY_X11) && defined(GDK_WINDOWING_X11)
#include <cairo-xlib.h>
#include <gdk/x11/gdkx.h>
#define HAVE_X11_PAINT 1
#endif

/* The largest monitor a held image is made for: past it, a window's
 * uploads get pools of their own again (as without the hold). */
enum { MAX_HELD_WIDTH = 3840, MAX_HELD_HEIGHT = 2400 };

static const char held_key[] = "nc-paint-memory-held";

gboolean nc_paint_memory_enabled(const char *part)
{
    const char *env = g_getenv("NC_PAINT_MEMORY");
    if (!env || !*env || strcmp(env, "1") == 0)
        return TRUE;
    return strcmp(env, part) == 0;
}

gboolean nc_paint_memory_keep_heap(size_t image_bytes)
{
#ifdef __GLIBC__
    if (!nc_paint_memory_enabled("heap"))
        return FALSE;
    /* glibc maps a block afresh when it is at least as large as the largest
     * mapped block freed so far (up to 32 MB), and keeps twice that at the
     * top of its heap.  One mapped block a little larger than any image the
     * window paints, freed, moves both past the window's images — glibc's
     * own rule, which the window's images alone only ever bring up to their
     * own size, so that each of them is still mapped afresh.  (Setting the
     * thresholds with mallopt instead turns that rule off for every block of
     * every thread: it kept the workbench's peak memory 110 MB higher.) */
    size_t bytes = MIN(image_bytes + (64 << 10), (size_t)32 << 20);
    volatile char *block = malloc(bytes);
    if (!block)
        return FALSE;
    block[0] = 0, block[bytes - 1] = 0; /* used: the allocation is not optimised away */
    free((void *)block);
    return TRUE;
#else
    (void)image_bytes;
    return FALSE;
#endif
}

cairo_surface_t *nc_paint_memory_get_held(GtkWidget *widget)
{
    GtkNative *native = gtk_widget_get_native(widget);
    return native ? g_object_get_data(G_OBJECT(native), held_key) : NULL;
}

/* The monitor's size in device pixels (the largest area one repaint can
 * upload), capped. */
static void monitor_pixels(GtkWidget *widget, int *width, int *height)
{
    GdkSurface *surface = gtk_native_get_surface(gtk_widget_get_native(widget));
    GdkDisplay *display = gtk_widget_get_display(widget);
    GdkMonitor *monitor = surface ? gdk_display_get_monitor_at_surface(display, surface) : NULL;
    GdkRectangle geometry = {0, 0, 1920, 1200};
    int scale = 1;
    if (monitor) {
        gdk_monitor_get_geometry(monitor, &geometry);
        scale = gdk_monitor_get_scale_factor(monitor);
    }
    *width = CLAMP(geometry.width * scale, 1, MAX_HELD_WIDTH);
    *height = CLAMP(geometry.height * scale, 1, MAX_HELD_HEIGHT);
}

static gboolean drawn_by_cairo(GtkWidget *widget)
{
    GtkNative *native = gtk_widget_get_native(widget);
    GskRenderer *renderer = native ? gtk_native_get_renderer(native) : NULL;
    return renderer && GSK_IS_CAIRO_RENDERER(renderer);
}

#ifdef HAVE_X11_PAINT
/* A shared-memory image from cairo-xlib's pool for this display (a plain
 * image where the server has no MIT-SHM: then NULL). */
static cairo_surface_t *make_shm_image(GdkDisplay *display, int width, int height)
{
    Display *xdisplay = gdk_x11_display_get_xdisplay(display);
    int screen = DefaultScreen(xdisplay);
    cairo_surface_t *root = cairo_xlib_surface_create(xdisplay, RootWindow(xdisplay, screen),
                                                      DefaultVisual(xdisplay, screen), 1, 1);
    cairo_surface_t *image = cairo_surface_create_similar_image(root, CAIRO_FORMAT_ARGB32, width, height);
    gboolean shared = cairo_surface_status(image) == CAIRO_STATUS_SUCCESS &&
                      cairo_surface_get_device(image) == cairo_surface_get_device(root);
    cairo_surface_destroy(root);
    if (!shared)
        g_clear_pointer(&image, cairo_surface_destroy);
    return image;
}
#endif

gboolean nc_paint_memory_hold_shm(GtkWidget *widget)
{
#ifdef HAVE_X11_PAINT
    GtkNative *native = gtk_widget_get_native(widget);
    GdkDisplay *display = gtk_widget_get_display(widget);
    if (!nc_paint_memory_enabled("shm") || !native || !GDK_IS_X11_DISPLAY(display))
        return FALSE;
    if (nc_paint_memory_get_held(widget))
        return TRUE;
    if (!gtk_native_get_surface(native) || !drawn_by_cairo(widget))
        return FALSE; /* GL and Vulkan upload textures, not cairo images */
    int width, height;
    monitor_pixels(widget, &width, &height);
    cairo_surface_t *image = make_shm_image(display, width, height);
    if (!image)
        return FALSE;
    g_object_set_data_full(G_OBJECT(native), held_key, image, (GDestroyNotify)cairo_surface_destroy);
    return TRUE;
#else
    (void)widget;
    return FALSE;
#endif
}

void nc_paint_memory_prepare(GtkWidget *widget)
{
    if (!drawn_by_cairo(widget))
        return; /* GL and Vulkan upload textures, not cairo images */
    int width, height;
    monitor_pixels(widget, &width, &height);
    nc_paint_memory_keep_heap((size_t)width * height * 4);
    nc_paint_memory_hold_shm(widget);
}
