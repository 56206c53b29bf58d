/* nc-workbench-main.c — `neurocuda-workbench [MODEL]`: the GTK4 workbench.
 * Everything lives in ui/ (NcApplication and the window); this only runs it. */
#include "nc-application.h"

int main(int argc, char **argv)
{
    NcApplication *app = nc_application_new();
    int status = g_application_run(G_APPLICATION(app), argc, argv);
    if (status == 0)
        status = nc_application_get_exit_status(app);
    g_object_unref(app);
    return status;
}
