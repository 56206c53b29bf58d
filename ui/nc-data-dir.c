/* nc-data-dir.c — the workbench's data directories, in the order of the
 * header. */
#include "nc-data-dir.h"

#include <stdlib.h>
#include <string.h>

#include "nc_config.h"

char *nc_data_dir_exe_dir(void)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    return exe ? g_path_get_dirname(exe) : NULL;
}

/* TRUE when the running program lives under the build tree. */
static gboolean running_uninstalled(const char *exe_dir)
{
    if (!exe_dir)
        return FALSE;
    g_autofree char *build = realpath(NC_BUILD_DIR, NULL);
    if (!build)
        return FALSE;
    size_t n = strlen(build);
    return strncmp(exe_dir, build, n) == 0 && (exe_dir[n] == '/' || exe_dir[n] == '\0');
}

char *nc_data_dir_find(const char *relative)
{
    g_autofree char *exe_dir = nc_data_dir_exe_dir();
    g_autofree char *exe_data = exe_dir ? g_build_filename(exe_dir, "..", "share", "neurocuda", NULL) : NULL;
    const char *env = g_getenv("NC_DATA_DIR");
    const char *dirs[] = {
        env && *env ? env : NULL,
        exe_data,
        NC_PKGDATADIR,
        running_uninstalled(exe_dir) ? NC_SOURCE_DIR "/assets" : NULL,
    };
    for (guint i = 0; i < G_N_ELEMENTS(dirs); i++) {
        if (!dirs[i])
            continue;
        g_autofree char *path = g_build_filename(dirs[i], relative, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
            return g_canonicalize_filename(path, NULL);
    }
    return NULL;
}

GSettingsSchemaSource *nc_data_dir_schema_source(const char *schema_id)
{
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    g_autoptr(GSettingsSchema) schema = source ? g_settings_schema_source_lookup(source, schema_id, TRUE) : NULL;
    if (schema)
        return g_settings_schema_source_ref(source);

    g_autofree char *exe_dir = nc_data_dir_exe_dir();
    g_autofree char *exe_schemas =
        exe_dir ? g_build_filename(exe_dir, "..", "share", "glib-2.0", "schemas", NULL) : NULL;
    const char *dirs[] = {exe_schemas, running_uninstalled(exe_dir) ? NC_BUILD_DIR "/ui" : NULL};
    for (guint i = 0; i < G_N_ELEMENTS(dirs); i++) {
        if (!dirs[i])
            continue;
        g_autofree char *compiled = g_build_filename(dirs[i], "gschemas.compiled", NULL);
        if (!g_file_test(compiled, G_FILE_TEST_IS_REGULAR))
            continue;
        GSettingsSchemaSource *dir_source = g_settings_schema_source_new_from_directory(dirs[i], source, FALSE, NULL);
        g_autoptr(GSettingsSchema) found = dir_source ? g_settings_schema_source_lookup(dir_source, schema_id, FALSE) : NULL;
        if (found)
            return dir_source;
        if (dir_source)
            g_settings_schema_source_unref(dir_source);
    }
    return NULL;
}
