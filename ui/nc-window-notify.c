/* nc-window-notify.c — error dialogs and toasts of the window: the leaf that
 * nc-window.c, nc-window-actions.c and nc-window-run.c all use, and that
 * uses none of them. */
#include "nc-window-private.h"

void nc_window_show_error(NcWindow *self, const char *heading, const char *body)
{
    GtkWidget *dialog = adw_message_dialog_new(GTK_WINDOW(self), heading, body);
    adw_message_dialog_add_response(ADW_MESSAGE_DIALOG(dialog), "close", "_Close");
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(dialog), "close");
    gtk_window_present(GTK_WINDOW(dialog));
}

void nc_window_toast(NcWindow *self, const char *text)
{
    AdwToast *toast = adw_toast_new(text);
    adw_toast_set_timeout(toast, 6);
    if (self->toast) /* a newer result replaces the older one at once */
        adw_toast_dismiss(self->toast);
    g_set_weak_pointer(&self->toast, toast);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

void nc_window_dismiss_toast(NcWindow *self)
{
    if (self->toast)
        adw_toast_dismiss(self->toast);
}

