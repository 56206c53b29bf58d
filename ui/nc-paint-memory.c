/* nc-paint-memory.c — keeps the memory that a repaint uses touched (see header). */
#include "nc-paint-memory.h"

#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#if defined(NC_PAINT_MEMORY_X11) && defined(GDK_WINDOWING_X11)
#include <cairo-xlib.h>
#include <gdk/x11/gdkx.h>
#define HAVE_X11_PAINT 1
#endif

/* The largest monitor a held image is made for: past it, a window's
 * uploads get pools of their own again (as without the hold). */
enum { MAX_HELD_WIDTH = 3840, MAX_HELD_HEIGHT = 2400 };

static const char held_key[] = "nc-paint-memory-held";

gboolean nc_paint_memory_enabled(void)
{
    const char *env = g_getenv("NC_PAINT_MEMORY");
    return !env || strcmp(env, "0") != 0;
}

gboolean nc_paint_memory_keep_heap(void)
{
#ifdef __GLIBC__
    if (!nc_paint_memory_enabled())
        return FALSE;
    /* Setting either turns off glibc's own adjustment of both (which raises
     * them as blocks are freed, and lowers the heap's top at each free of a
     * block larger than twice the first), so both are set. */
    return mallopt(M_MMAP_THRESHOLD, 16 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 16 << 20) == 1;
#else
    return FALSE;
#endif
}

cairo_surface_t *nc_paint_memory_get_held(GtkWidget *widget)
{
    GtkNative *native = gtk_widget_get_native(widget);
    return native ? g_object_get_data(G_OBJECT(native), held_key) : NULL;
}

#ifdef HAVE_X11_PAINT
/* The monitor's size in device pixels (the largest area one repaint can
 * upload), capped. */
static void monitor_pixels(GdkDisplay *display, GdkSurface *surface, int *width, int *height)
{
    GdkMonitor *monitor = gdk_display_get_monitor_at_surface(display, surface);
    GdkRectangle geometry = {0, 0, 1920, 1200};
    int scale = 1;
    if (monitor) {
        gdk_monitor_get_geometry(monitor, &geometry);
        scale = gdk_monitor_get_scale_factor(monitor);
    }
    *width = CLAMP(geometry.width * scale, 1, MAX_HELD_WIDTH);
    *height = CLAMP(geometry.height * scale, 1, MAX_HELD_HEIGHT);
}

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
    if (!nc_paint_memory_enabled() || !native || !GDK_IS_X11_DISPLAY(display))
        return FALSE;
    if (nc_paint_memory_get_held(widget))
        return TRUE;
    GskRenderer *renderer = gtk_native_get_renderer(native);
    GdkSurface *surface = gtk_native_get_surface(native);
    if (!renderer || !surface || !GSK_IS_CAIRO_RENDERER(renderer))
        return FALSE; /* GL and Vulkan upload textures, not cairo images */
    int width, height;
    monitor_pixels(display, surface, &width, &height);
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
