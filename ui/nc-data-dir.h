/* nc-data-dir.h — where the workbench finds its installed data (the bundled
 * model, the GSettings schema) without being told.
 *
 * The data directory is the first of these that exists:
 *   1. $NC_DATA_DIR, when set (tests; a data tree kept elsewhere);
 *   2. EXE/../share/neurocuda, EXE being the folder of the running program
 *      (an install moved to another prefix, a DESTDIR staging tree, an
 *      unpacked .deb);
 *   3. NC_PKGDATADIR, the configured PREFIX/share/neurocuda (`meson install`,
 *      the Debian package);
 *   4. the source tree's assets/, only when the program runs from its build
 *      tree (NC_BUILD_DIR), so that an installed program never reads the
 *      folder it was built in. */
#pragma once

#include <glib.h>
#include <gio/gio.h>

G_BEGIN_DECLS

/* The path of RELATIVE (e.g. "models/fmnist_cnn.onnx") in the first data
 * directory above that holds it as a regular file, or NULL. Free with g_free. */
char *nc_data_dir_find(const char *relative);

/* The folder of the running program (from /proc/self/exe), or NULL. */
char *nc_data_dir_exe_dir(void);

/* The schema source to look up the workbench's schema in: the default one
 * (XDG_DATA_DIRS, GSETTINGS_SCHEMA_DIR), then EXE/../share/glib-2.0/schemas,
 * then the schemas compiled in the build tree (NC_BUILD_DIR/ui) when the
 * program runs from there. Returns a new reference, or NULL. */
GSettingsSchemaSource *nc_data_dir_schema_source(const char *schema_id);

G_END_DECLS
